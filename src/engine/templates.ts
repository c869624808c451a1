// Templates are the tenants' code, run by the worker on their payloads. They run in a Handlebars
// of their own with only the helpers registered here (none with a side effect: `log` renders
// nothing and writes nothing), and under a work budget: their loops may go round so many times,
// for so long, and a rendered field may be so large. A template over its budget fails its job
// with a detail that says which budget (TemplateOverBudget, an Undeliverable: never retried).
// Bounding the loops keeps the render in the worker's thread: everything else a template does is
// linear in its own size and its data's.
import Handlebars from 'handlebars';
import { Undeliverable } from './undeliverable.js';

/** The most characters one rendered field (a subject, a content, a URL) may have. */
export const MAX_RENDERED_CHARS = 256 * 1024;
/** The loop iterations one render may run, all its `{{#each}}` (and blocks over arrays) together. */
export const MAX_ITERATIONS = 100_000;
/** How long one render's loops may run. */
export const MAX_RENDER_MS = 250;

/** A template that went over its work budget: its job fails with this message as the detail. */
export class TemplateOverBudget extends Undeliverable {}

const handlebars = Handlebars.create();
// `log` wrote the payload into the server's log (any level, any text): it now renders nothing.
// It stays known, so that workflows saved with it still render.
handlebars.unregisterHelper('log');
handlebars.registerHelper('log', () => '');
handlebars.unregisterDecorator('inline');

// The budget of the render under way: rendering is synchronous, so one render runs at a time.
let iterationsLeft = 0;
let deadline = 0;

const builtinEach = handlebars.helpers.each;
/** Handlebars' own `each`, each iteration counted, timed, and its output measured. */
handlebars.registerHelper('each', function (this: unknown, context: unknown, options: Handlebars.HelperOptions) {
  if (!options || typeof options.fn !== 'function') return builtinEach.call(this, context, options);
  const fn = options.fn;
  let size = 0;
  const counted = Object.assign((value: unknown, frame?: Handlebars.RuntimeOptions) => {
    if (--iterationsLeft < 0) throw new TemplateOverBudget(`The template's loops ran more than ${MAX_ITERATIONS.toLocaleString('en')} times, their budget for one message`);
    if ((iterationsLeft & 63) === 0 && performance.now() > deadline) throw new TemplateOverBudget(`The template took more than ${MAX_RENDER_MS} ms to render, its budget for one message`);
    const out = fn(value, frame);
    size += out.length;
    if (size > MAX_RENDERED_CHARS) throw tooLarge();
    return out;
  }, fn);
  return builtinEach.call(this, context, { ...options, fn: counted });
});

function tooLarge(): TemplateOverBudget {
  return new TemplateOverBudget(`The template renders more than ${MAX_RENDERED_CHARS.toLocaleString('en')} characters, the most one message field may have`);
}

/** The helpers a template may call, all registered above. Anything else would only fail at send time. */
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
    handlebars.precompile(source, { strict: false });
    return unsupported(handlebars.parse(source));
  } catch (err) {
    return (err instanceof Error ? err.message : String(err)).split('\n').filter(Boolean).join(' ').replace(/\s+/g, ' ');
  }
}

const compiled = new Map<string, Handlebars.TemplateDelegate>();
const CACHE_LIMIT = 1000;

/**
 * Renders a template, compiling each source once. `escape` HTML-escapes values (email bodies);
 * texts for SMS, chat, push and the in-app feed keep them as they are. Throws Undeliverable when
 * the template cannot render, TemplateOverBudget when it goes over its budget.
 */
export function render(source: string, context: object, { escape }: { escape: boolean }): string {
  const key = `${escape ? 'e' : 'n'}:${source}`;
  let template = compiled.get(key);
  if (!template) {
    template = handlebars.compile(source, { noEscape: !escape, strict: false });
    if (compiled.size >= CACHE_LIMIT) compiled.delete(compiled.keys().next().value!);
    compiled.set(key, template);
  }
  iterationsLeft = MAX_ITERATIONS;
  deadline = performance.now() + MAX_RENDER_MS;
  let out: string;
  try {
    out = template(context, { allowProtoPropertiesByDefault: false, allowProtoMethodsByDefault: false });
  } catch (err) {
    if (err instanceof Undeliverable) throw err;
    // Rendering is pure: what failed once fails again, so it is not retried.
    const why = (err instanceof Error ? err.message : String(err)).split('\n')[0];
    throw new Undeliverable(`The template does not render: ${why}`);
  }
  if (out.length > MAX_RENDERED_CHARS) throw tooLarge();
  return out;
}
