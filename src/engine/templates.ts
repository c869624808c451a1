// Templates are the tenants' code, run by the worker on their payloads. They run in a Handlebars
// of their own with only the helpers registered here (none with a side effect: `log` renders
// nothing and writes nothing), and under a work budget: their loops may go round so many times,
// for so long, and a message field may be so large. A template over its budget fails its job
// with a detail that says which budget (TemplateOverBudget, an Undeliverable: never retried).
// The size is counted as the output grows, not measured once it is built: every value and every
// piece of text a template writes passes through `countOutput` (the compilers below), so a
// template that repeats a large value stops at the cap. With the loops bounded too, the render
// stays in the worker's thread: everything else a template does is linear in its own size.
import Handlebars from 'handlebars';
import { Undeliverable } from './undeliverable.js';
import { BoundedMap } from '../bounded-map.js';

/** The most characters one rendered field (a subject, a content, a URL) may have. */
export const MAX_RENDERED_CHARS = 256 * 1024;
/**
 * The most characters one message's rendered fields may have together: an in-app message has some
 * sixty (its buttons, its `data`), and at MAX_RENDERED_CHARS each one small trigger made a 15 MB
 * message for every recipient, stored twice and sent to every inbox stream.
 */
export const MAX_MESSAGE_CHARS = 1024 * 1024;
/** The loop iterations one message's render may run, all its fields' `{{#each}}` (and blocks over arrays) together. */
export const MAX_ITERATIONS = 100_000;
/**
 * How long one message's loops may run, in this process's CPU time and by the clock both: the render
 * holds the event loop meanwhile. Counted by the clock alone, a large digest's render failed whenever
 * other processes took the cores; by the process's CPU time alone, whenever its other threads worked.
 */
export const MAX_RENDER_MS = 50;
/**
 * The most `{{…}}` expressions one template may have, and a workflow's templates together:
 * compiling costs time for each, and it happens in the request that saves the workflow.
 */
export const MAX_EXPRESSIONS = 1_000;

/** How many `{{` a template has: its expressions, counted without parsing it (which costs as much as compiling). */
export function expressionCount(source: string): number {
  let count = 0;
  for (let at = source.indexOf('{{'); at !== -1; at = source.indexOf('{{', at + 2)) count++;
  return count;
}

/**
 * Why a trigger's overrides hold too many expressions to compile, undefined when they do not: all
 * their strings, nested ones too, may hold MAX_EXPRESSIONS together, a workflow's budget. No save
 * checks them, and each new template compiles in the job that renders it.
 */
export function overridesProblem(overrides: unknown): string | undefined {
  let count = 0;
  const walk = (value: unknown): void => {
    if (typeof value === 'string') count += expressionCount(value);
    else if (value !== null && typeof value === 'object') for (const item of Object.values(value)) walk(item);
  };
  walk(overrides);
  return count > MAX_EXPRESSIONS ? `hold ${count.toLocaleString('en')} {{…}} expressions together, more than the ${MAX_EXPRESSIONS.toLocaleString('en')} a trigger's overrides may` : undefined;
}

const tooManyExpressions = (count: number) =>
  `has ${count.toLocaleString('en')} {{…}} expressions, more than the ${MAX_EXPRESSIONS.toLocaleString('en')} a template may have`;

/**
 * What Handlebars' parser and compiler are given at most, besides MAX_EXPRESSIONS: their time grows
 * with the parts inside the `{{…}}` (names, path segments, literals, parameters) and faster than
 * that with how deep sub-expressions `(…)` and blocks nest.
 */
export const MAX_TEMPLATE_PARTS = 3_000;
/**
 * …and a workflow's templates together: at MAX_TEMPLATE_PARTS each, a workflow of 170 such
 * templates (a megabyte) took seconds to compile.
 */
export const MAX_WORKFLOW_TEMPLATE_PARTS = 5_000;
export const MAX_SUBEXPRESSION_DEPTH = 16;
export const MAX_BLOCK_DEPTH = 32;

interface TemplateShape {
  /** Names, path segments, literals and parameters inside every `{{…}}`. */
  parts: number;
  /** The deepest nesting of `(…)` in one expression (parentheses in string literals do not count). */
  subexpressionDepth: number;
  /** The deepest nesting of blocks (`{{#…}}` … `{{/…}}`), each `{{else <helper>}}` one level more. */
  blockDepth: number;
}

/** Handlebars' own lexer (Jison's): the tokens its parser would read, without parsing them. */
interface Lexer {
  setInput(source: string): void;
  lex(): number | string;
  EOF: number;
}
const grammar = (Handlebars as unknown as { Parser: { lexer: Lexer; terminals_: Record<number, string> } }).Parser;
const PART_TOKENS = new Set(['ID', 'STRING', 'NUMBER', 'BOOLEAN', 'UNDEFINED', 'NULL', 'DATA']);
const BLOCK_OPENS = new Set(['OPEN_BLOCK', 'OPEN_INVERSE', 'OPEN_RAW_BLOCK']);
const BLOCK_ENDS = new Set(['OPEN_ENDBLOCK', 'END_RAW_BLOCK']);

/**
 * A template's shape, read from the tokens of Handlebars' own lexer (so a quote or `}}` inside a
 * `[…]` segment, a comment or a spaced `{{ else if}}` is read as the parser reads it), without
 * parsing them: lexing is linear, parsing what the limits refuse is not. It stops once the parts
 * are over their limit, and at a token the lexer refuses (the parse stops there too).
 */
function templateShape(source: string): TemplateShape {
  const shape: TemplateShape = { parts: 0, subexpressionDepth: 0, blockDepth: 0 };
  // Each open block's levels: 1, and one more for each `{{else <helper>}}` chained in it (Handlebars
  // nests each such branch inside the one before).
  const open: number[] = [];
  let levels = 0;
  let depth = 0;
  const { lexer, terminals_: names } = grammar;
  lexer.setInput(source);
  try {
    for (let token = lexer.lex(); token !== lexer.EOF; token = lexer.lex()) {
      const name = typeof token === 'number' ? names[token] : token;
      if (PART_TOKENS.has(name)) {
        if (++shape.parts > MAX_TEMPLATE_PARTS) return shape; // over: no need to read on
      } else if (name === 'OPEN_SEXPR') shape.subexpressionDepth = Math.max(shape.subexpressionDepth, ++depth);
      else if (name === 'CLOSE_SEXPR') depth--;
      else if (BLOCK_OPENS.has(name)) open.push(1), levels++;
      else if (BLOCK_ENDS.has(name) && open.length > 0) levels -= open.pop()!;
      else if (name === 'OPEN_INVERSE_CHAIN' && open.length > 0) open[open.length - 1]++, levels++;
      shape.blockDepth = Math.max(shape.blockDepth, levels);
    }
  } catch {
    // A token the lexer refuses: the parse fails there too, having read only what was counted.
  }
  return shape;
}

/** A template of a workflow's step, with the field that holds it (`body/steps/0/template/content`). */
export interface TemplateField {
  field: string;
  source: string;
}

/** How many names, literals and parameters a template has inside its `{{…}}`, counted to just past MAX_TEMPLATE_PARTS. */
export function templateParts(source: string): number {
  return templateShape(source).parts;
}

/**
 * How many characters of a template are inside `{{…}}` (an unclosed one to the end): what compiling
 * it costs grows with them, and counting them costs next to nothing, unlike lexing.
 */
export function expressionChars(source: string): number {
  let chars = 0;
  for (let at = source.indexOf('{{'); at !== -1; ) {
    const end = source.indexOf('}}', at + 2);
    if (end === -1) return chars + source.length - at;
    chars += end + 2 - at;
    at = source.indexOf('{{', end + 2);
  }
  return chars;
}

/** Why a template is past what Handlebars may be given to parse, without parsing it; undefined when it is not. */
function parseBudgetProblem(source: string): string | undefined {
  const count = expressionCount(source);
  if (count > MAX_EXPRESSIONS) return tooManyExpressions(count);
  const shape = templateShape(source);
  if (shape.parts > MAX_TEMPLATE_PARTS) {
    return `has ${shape.parts.toLocaleString('en')} names, literals and parameters inside its {{…}}, more than the ${MAX_TEMPLATE_PARTS.toLocaleString('en')} a template may have`;
  }
  if (shape.subexpressionDepth > MAX_SUBEXPRESSION_DEPTH) {
    return `nests sub-expressions (…) ${shape.subexpressionDepth} deep, more than the ${MAX_SUBEXPRESSION_DEPTH} a template may`;
  }
  if (shape.blockDepth > MAX_BLOCK_DEPTH) return `nests blocks {{#…}} (or chains {{else …}}) ${shape.blockDepth} deep, more than the ${MAX_BLOCK_DEPTH} a template may`;
  return undefined;
}

/** A template that went over its work budget: its job fails with this message as the detail. */
export class TemplateOverBudget extends Undeliverable {}

const handlebars = Handlebars.create();
// `log` wrote the payload into the server's log (any level, any text): it now renders nothing.
// It stays known, so that workflows saved with it still render.
handlebars.unregisterHelper('log');
handlebars.registerHelper('log', () => '');
handlebars.unregisterDecorator('inline');

// The budget of the render under way: rendering is synchronous, so one render runs at a time.
// Loops, time and the output of all fields together are a message's (every field of it, in
// renderingMessage); a field's output has a cap of its own.
let iterationsLeft = 0;
/** When the render's time is up by the clock, and by the process's CPU time: it is over its budget once both are. */
let deadline = 0;
let cpuDeadline = 0;
let outputLeft = 0;
let messageOutputLeft = 0;
/** Whether the field under way is held by what its message has left rather than by its own cap. */
let heldByMessage = false;
let inMessage = false;

/**
 * This process's CPU time so far, in milliseconds: its other threads' too (Node 20 has no clock of
 * one thread's), so a render is over its time only once the clock says so as well: neither a busy
 * machine (the clock runs, the CPU time does not) nor the process's busy threads (the other way round)
 * fail a render that is within its budget.
 */
function cpuMs(): number {
  const { user, system } = process.cpuUsage();
  return (user + system) / 1000;
}

function startBudget(): void {
  iterationsLeft = MAX_ITERATIONS;
  deadline = performance.now() + MAX_RENDER_MS;
  cpuDeadline = cpuMs() + MAX_RENDER_MS;
  messageOutputLeft = MAX_MESSAGE_CHARS;
}

/** Runs `build`, which renders one message's fields, under one budget of loops and time for them all. */
export function renderingMessage<T>(build: () => T): T {
  startBudget();
  inMessage = true;
  try {
    return build();
  } finally {
    inMessage = false;
  }
}

const builtinEach = handlebars.helpers.each;
/** Handlebars' own `each`, each iteration counted and timed. */
handlebars.registerHelper('each', function (this: unknown, context: unknown, options: Handlebars.HelperOptions) {
  if (!options || typeof options.fn !== 'function') return builtinEach.call(this, context, options);
  const fn = options.fn;
  const counted = Object.assign((value: unknown, frame?: Handlebars.RuntimeOptions) => {
    if (--iterationsLeft < 0) throw new TemplateOverBudget(`The template's loops ran more than ${MAX_ITERATIONS.toLocaleString('en')} times, their budget for one message`);
    // Every 32 iterations: once the clock is past, the CPU time is read too, a system call.
    if ((iterationsLeft & 31) === 0 && performance.now() > deadline && cpuMs() > cpuDeadline) throw new TemplateOverBudget(`The template took more than ${MAX_RENDER_MS} ms to render, its budget for one message`);
    return fn(value, frame);
  }, fn);
  return builtinEach.call(this, context, { ...options, fn: counted });
});

const builtinLookup = handlebars.helpers.lookup;
/** Handlebars' own `lookup`: as a block (`{{#lookup …}}`) what it returns is output, so it is counted. */
handlebars.registerHelper('lookup', function (this: unknown, ...args: unknown[]) {
  const value = builtinLookup.apply(this, args as Parameters<typeof builtinLookup>);
  const options = args.at(-1) as Partial<Handlebars.HelperOptions> | undefined;
  return typeof options?.fn === 'function' ? countOutput(value) : value;
});

function tooLarge(): TemplateOverBudget {
  if (heldByMessage) return new TemplateOverBudget(`The message's fields render more than ${MAX_MESSAGE_CHARS.toLocaleString('en')} characters together, the most one message may have`);
  return new TemplateOverBudget(`The template renders more than ${MAX_RENDERED_CHARS.toLocaleString('en')} characters, the most one message field may have`);
}

/**
 * What a template writes, on its way into the output: each value of a `{{mustache}}` (escaped
 * first where the render escapes), each piece of the template's own text, and what `{{#lookup}}`
 * returns. Other blocks are not counted again: every other helper a block can call (`if`,
 * `unless`, `with`, `each`, and the missing-helper fallback) returns what its insides wrote. So the
 * count is the output's length, known before the output is built.
 */
function countOutput(value: unknown): unknown {
  if (value == null) return value;
  // `'' +` as the output buffer itself converts a value, so what is counted is what is written.
  const text = typeof value === 'string' ? value : '' + (value as string);
  outputLeft -= text.length;
  if (outputLeft < 0) throw tooLarge();
  return text;
}

/**
 * A value as the output may take it: a payload's object whose own `toString` or `valueOf` is data,
 * not a method, cannot be turned into text (its job failed, "Cannot convert object to primitive
 * value"); it is written as any other object is, `[object Object]`, and an array as its items
 * joined with commas.
 */
function convertible(value: unknown): unknown {
  // Handlebars' SafeString writes itself (toHTML); a payload, being JSON, holds no function.
  if (value === null || typeof value !== 'object' || typeof (value as { toHTML?: unknown }).toHTML === 'function') return value;
  return textOf(value);
}

/** An object's text, as `'' +` writes it, each part converted once (an array's items, nested ones too, joined). */
function textOf(value: object): string {
  if (Array.isArray(value)) return value.map((item) => (item == null ? '' : typeof item === 'object' ? textOf(item) : String(item))).join(',');
  try {
    return '' + (value as unknown as string);
  } catch {
    return '[object Object]';
  }
}

// Handlebars' two compilers (not in its typings), as far as the output count uses them: the first
// turns a template into opcodes, the second opcodes into JavaScript. Ours differ in three places.
type Code = unknown;
interface CompilerBase {
  options: { noEscape?: boolean };
  SubExpression(node: object): void;
  opcode(name: string, ...args: unknown[]): void;
}
interface JavaScriptCompilerBase {
  source: { push(code: Code): void; quotedString(text: string): Code; wrap(chunks: Code[]): Code };
  pendingContent?: string;
  pendingLocation?: unknown;
  popStack(): Code;
  push(code: Code[]): Code;
  append(): void;
  aliasable(name: string): Code;
  appendToBuffer(source: Code, location?: unknown, explicit?: boolean): Code;
  pushSource(source: Code): void;
  createFunctionContext(asObject: boolean): Code;
}
const internals = handlebars as unknown as {
  Compiler: new () => CompilerBase;
  JavaScriptCompiler: new () => JavaScriptCompilerBase;
};

/** A `{{mustache}}` appends its value through `countOutput` (opcode appendValue); a block appends as before. */
class CountingCompiler extends internals.Compiler {
  MustacheStatement(mustache: { escaped: boolean }): void {
    this.SubExpression(mustache);
    this.opcode(mustache.escaped && !this.options.noEscape ? 'appendEscaped' : 'appendValue');
  }
}
Object.assign(CountingCompiler.prototype, { compiler: CountingCompiler });

/** Code in which values and text reach the output through `countOutput` (values through `convertible` first), bound in each function made. */
class CountingJavaScriptCompiler extends internals.JavaScriptCompiler {
  appendValue(): void {
    this.push(['countOutput(convertible(', this.popStack(), '))']);
    this.append();
  }

  appendEscaped(): void {
    this.pushSource(this.appendToBuffer(['countOutput(', this.aliasable('container.escapeExpression'), '(convertible(', this.popStack(), ')))']));
  }

  override pushSource(source: Code): void {
    if (this.pendingContent) {
      const text = this.pendingContent;
      this.pendingContent = undefined;
      this.source.push(this.appendToBuffer(['countOutput(', this.source.quotedString(text), ')'], this.pendingLocation));
    }
    super.pushSource(source);
  }

  // Handlebars makes each function with `new Function`, in global scope: ours is made inside one
  // that takes `countOutput` and `convertible`, so the code reaches them and templates (which see
  // only their data) do not.
  // Precompiled (not asObject), each function is written in parentheses: V8 compiles such a function
  // with the code around it (adoptPrecompiled's turn), not at its first call (the job's render).
  override createFunctionContext(asObject: boolean): Code {
    const code = super.createFunctionContext(false);
    return asObject ? new Function('countOutput', 'convertible', `return ${String(code)}`)(countOutput, convertible) : this.source.wrap(['(', code, ')']);
  }
}
Object.assign(CountingJavaScriptCompiler.prototype, { compiler: CountingJavaScriptCompiler });
Object.assign(handlebars, { Compiler: CountingCompiler, JavaScriptCompiler: CountingJavaScriptCompiler });

/**
 * The helpers a template may call, all registered above (anything else would only fail at send
 * time), with the number of arguments each takes where it counts them: given another number, it
 * throws when the template renders.
 */
const ONE = { count: 1, words: 'one argument' };
const KNOWN_HELPERS = new Map<string, { count: number; words: string } | undefined>([
  ['if', ONE],
  ['unless', ONE],
  ['each', ONE],
  ['with', ONE],
  ['lookup', { count: 2, words: 'two arguments (an object and a key)' }],
  ['log', undefined],
]);

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
    // A helper's name alone calls it too (`{{lookup}}`), so its count is checked with or without arguments.
    const takes = path.type === 'PathExpression' ? KNOWN_HELPERS.get(String(path.original)) : undefined;
    if (takes && (n.params as unknown[]).length !== takes.count) return `${String(path.original)} takes exactly ${takes.words}`;
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
  const overBudget = parseBudgetProblem(source);
  if (overBudget) return overBudget;
  try {
    const ast = handlebars.parse(source);
    handlebars.precompile(ast, { strict: false });
    return unsupported(ast);
  } catch (err) {
    return (err instanceof Error ? err.message : String(err)).split('\n').filter(Boolean).join(' ').replace(/\s+/g, ' ');
  }
}

/**
 * Herald's own names at a template's top level. They come before the payload's fields: a payload
 * field of one of these names is read as `{{payload.<name>}}` only. `tenant` is kept for Herald,
 * though it has none yet, so that giving it one later changes no template.
 */
export const RESERVED_NAMES = ['payload', 'subscriber', 'actor', 'step', 'tenant', 'transactionId'] as const;
export type ReservedName = (typeof RESERVED_NAMES)[number];
const RESERVED = new Set<string>(RESERVED_NAMES);

/**
 * What a template sees at its top level: Herald's values under their names and, beside them, the
 * payload's own fields, the way Novu v1 templates read them (`{{orderId}}` for
 * `{{payload.orderId}}`). A view over the two, not a copy: making it costs the same for any payload,
 * and it answers as a plain object would (own fields only; `{{#each this}}` lists both).
 */
export function templateData(values: Partial<Record<ReservedName, unknown>>, payload: Record<string, unknown>): object {
  const own = (key: string) => (RESERVED.has(key) ? Object.hasOwn(values, key) && values[key as ReservedName] !== undefined : Object.hasOwn(payload, key));
  const read = (key: string) => (RESERVED.has(key) ? values[key as ReservedName] : payload[key]);
  return new Proxy<Record<string, unknown>>(
    {},
    {
      get: (target, key) => (typeof key === 'string' && own(key) ? read(key) : RESERVED.has(key as string) ? undefined : Reflect.get(target, key)),
      has: (target, key) => (typeof key === 'string' && own(key)) || Reflect.has(target, key),
      ownKeys: () => [...RESERVED_NAMES.filter(own), ...Object.keys(payload).filter((key) => !RESERVED.has(key))],
      getOwnPropertyDescriptor: (_target, key) =>
        typeof key === 'string' && own(key) ? { value: read(key), writable: true, enumerable: true, configurable: true } : undefined,
    },
  );
}

/**
 * Compiled templates by their source: at most 1,000, and 8 Mi characters of source together, so
 * that tenants' largest templates (an email body may be 256 KiB) cannot fill the memory.
 */
const compiled = new BoundedMap<string, Handlebars.TemplateDelegate>(1000, { total: 8 * 1024 * 1024, weigh: (key) => key.length });

const cacheKey = (source: string, escape: boolean) => `${escape ? 'e' : 'n'}:${source}`;

/** A template as a message renders it: its source, and whether its values are HTML-escaped. */
export interface MessageTemplate {
  source: string;
  escape: boolean;
}

/**
 * The templates among these that `render` would compile, not having them yet, each once, with how
 * many characters their `{{…}}` hold together (expressionChars: what compiling them costs).
 */
export function uncompiled(templates: MessageTemplate[]): { templates: MessageTemplate[]; chars: number } {
  const seen = new Set<string>();
  const left: MessageTemplate[] = [];
  let chars = 0;
  for (const template of templates) {
    const key = cacheKey(template.source, template.escape);
    if (compiled.has(key) || seen.has(key)) continue;
    seen.add(key);
    left.push(template);
    chars += expressionChars(template.source);
  }
  return { templates: left, chars };
}

/**
 * A template compiled as `render` compiles it, but to Handlebars' precompiled spec (JavaScript
 * source, with the counting compilers above): what the payload check thread does for a message
 * whose templates are costly to compile, off the event loop. Or why it cannot render.
 */
export type Precompiled = { spec: string } | { overBudget: string } | { error: string };

export function precompiled({ source, escape }: MessageTemplate): Precompiled {
  const overBudget = parseBudgetProblem(source);
  if (overBudget) return { overBudget: `The template ${overBudget}` };
  try {
    return { spec: String(handlebars.precompile(source, { noEscape: !escape, strict: false })) };
  } catch (err) {
    return { error: err instanceof Error ? err.message : String(err) };
  }
}

/**
 * Puts a template precompiled elsewhere into render's cache. Evaluating the spec is the last
 * (and cheap) part of what handlebars.compile does: V8 parses the code, Handlebars made it. A
 * template that cannot render is kept as one that fails as render would have failed it.
 */
export function adoptPrecompiled(template: MessageTemplate, made: Precompiled): void {
  let delegate: Handlebars.TemplateDelegate;
  if ('spec' in made) {
    // As CountingJavaScriptCompiler.createFunctionContext binds them when Handlebars compiles here.
    const spec = new Function('countOutput', 'convertible', `return ${made.spec}`)(countOutput, convertible) as Parameters<typeof handlebars.template>[0];
    delegate = handlebars.template(spec);
  } else if ('overBudget' in made) {
    const why = made.overBudget;
    delegate = () => {
      throw new TemplateOverBudget(why);
    };
  } else {
    const why = made.error;
    delegate = () => {
      throw new Error(why);
    };
  }
  compiled.set(cacheKey(template.source, template.escape), delegate);
}

/**
 * Renders a template, compiling each source once (on the event loop, unless adoptPrecompiled put
 * it in the cache first). `escape` HTML-escapes values (email bodies);
 * texts for SMS, chat, push and the in-app feed keep them as they are. Throws Undeliverable when
 * the template cannot render, TemplateOverBudget when it goes over its budget.
 */
export function render(source: string, context: object, { escape }: { escape: boolean }): string {
  // A trigger's overrides may put anything where a template goes (Handlebars would even compile a syntax tree).
  if (typeof source !== 'string') throw new Undeliverable(`A template must be text, not ${source === null ? 'null' : Array.isArray(source) ? 'an array' : typeof source}: check the trigger's overrides`);
  const key = cacheKey(source, escape);
  let template = compiled.get(key);
  if (!template) {
    // A trigger's overrides are templates no save has checked.
    const overBudget = parseBudgetProblem(source);
    if (overBudget) throw new TemplateOverBudget(`The template ${overBudget}`);
    template = handlebars.compile(source, { noEscape: !escape, strict: false });
    compiled.set(key, template);
  }
  if (!inMessage) startBudget();
  heldByMessage = messageOutputLeft < MAX_RENDERED_CHARS;
  outputLeft = Math.min(MAX_RENDERED_CHARS, messageOutputLeft);
  let out: string;
  try {
    out = template(context, { allowProtoPropertiesByDefault: false, allowProtoMethodsByDefault: false });
    messageOutputLeft -= out.length;
  } catch (err) {
    if (err instanceof Undeliverable) throw err;
    // Rendering is pure: what failed once fails again, so it is not retried.
    const why = (err instanceof Error ? err.message : String(err)).split('\n')[0];
    throw new Undeliverable(`The template does not render: ${why}`);
  }
  return out;
}
