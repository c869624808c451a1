import Handlebars from 'handlebars';

/** The helpers a template may call: Handlebars' own. Anything else would only fail at send time. */
const KNOWN_HELPERS = new Set(['if', 'unless', 'each', 'with', 'lookup', 'log']);

type Node = { type: string; [key: string]: unknown };

/** Finds what parses but cannot render: partials (we keep none) and calls of unknown helpers. */
function unsupported(node: unknown): string | undefined {
  if (!node || typeof node !== 'object') return undefined;
  if (Array.isArray(node)) {
    for (const child of node) {
      const problem = unsupported(child);
      if (problem) return problem;
    }
    return undefined;
  }
  const n = node as Node;
  if (n.type === 'PartialStatement' || n.type === 'PartialBlockStatement') return 'partials are not supported';
  if (n.type === 'DecoratorBlock' || n.type === 'Decorator') return 'decorators are not supported';
  if (n.type === 'MustacheStatement' || n.type === 'BlockStatement' || n.type === 'SubExpression') {
    const path = n.path as { original?: unknown; type?: string };
    const isCall = (n.params as unknown[]).length > 0 || n.hash !== undefined || n.type === 'BlockStatement';
    if (isCall && path.type === 'PathExpression' && !KNOWN_HELPERS.has(String(path.original))) {
      return n.type === 'BlockStatement' && (n.params as unknown[]).length === 0 && n.hash === undefined
        ? undefined // {{#list}}…{{/list}} iterates or scopes a value: no helper needed.
        : `unknown helper "${String(path.original)}"`;
    }
  }
  for (const [key, value] of Object.entries(n)) {
    if (key !== 'loc' && value && typeof value === 'object') {
      const problem = unsupported(value);
      if (problem) return problem;
    }
  }
  return undefined;
}

/** Why a Handlebars template cannot be used, in one line; undefined when it compiles. */
export function templateProblem(source: string): string | undefined {
  try {
    Handlebars.precompile(source, { strict: false });
    return unsupported(Handlebars.parse(source));
  } catch (err) {
    return (err instanceof Error ? err.message : String(err)).split('\n').filter(Boolean).join(' ').replace(/\s+/g, ' ');
  }
}

const compiled = new Map<string, Handlebars.TemplateDelegate>();
const CACHE_LIMIT = 1000;

/**
 * Renders a template, compiling each source once. `escape` HTML-escapes values (email bodies);
 * texts for SMS, chat, push and the in-app feed keep them as they are.
 */
export function render(source: string, context: object, { escape }: { escape: boolean }): string {
  const key = `${escape ? 'e' : 'n'}:${source}`;
  let template = compiled.get(key);
  if (!template) {
    template = Handlebars.compile(source, { noEscape: !escape, strict: false });
    if (compiled.size >= CACHE_LIMIT) compiled.delete(compiled.keys().next().value!);
    compiled.set(key, template);
  }
  return template(context, { allowProtoPropertiesByDefault: false, allowProtoMethodsByDefault: false });
}
