import { Ajv2020 } from 'ajv/dist/2020.js';
import ajvFormats from 'ajv-formats';
import { RE2JS } from 're2js';
import type { ErrorObject } from 'ajv';
import { pacer } from './turns.js';

const addFormats = ajvFormats.default;

/**
 * JSON Schema 2020-12 (OpenAPI 3.1's dialect) with formats and discriminated steps: the one
 * validator setup for the contract (http/) and, through `createTenantAjv`, for the schemas tenants
 * send (engine/). It lists every error unless `allErrors: false` is given (see firstThenAll).
 */
export function createAjv(options: { allErrors?: boolean; [option: string]: unknown } = {}): Ajv2020 {
  const ajv = new Ajv2020({ allErrors: true, ...options, strict: false, discriminator: true });
  addFormats(ajv);
  return ajv;
}

/** The most values (the value itself, and every item and property within, nested) whose every error is listed. */
const LISTED_ERRORS_WITHIN = 2_000;

/** Whether `value` holds at most `limit` values, counted without walking past the limit. */
function holdsAtMost(value: unknown, limit: number): boolean {
  const pending: unknown[] = [value];
  let seen = 0;
  while (pending.length > 0) {
    if (++seen > limit) return false;
    const next = pending.pop();
    if (next === null || typeof next !== 'object') continue;
    for (const item of Array.isArray(next) ? next : Object.values(next)) pending.push(item);
    if (pending.length + seen > limit) return false;
  }
  return true;
}

export type Validate = ((data: unknown) => boolean) & { errors?: ErrorObject[] | null; schema: unknown };

/**
 * Validation that stops at the first error, then lists every error only for a small value. ajv's
 * allErrors checks every item of an array against every keyword and makes an error object for each
 * failure: a hostile megabyte held the event loop for seconds (and, against a wide schema, filled
 * the heap). A valid value costs one pass either way; an invalid large one, the cost of finding its
 * first error; an invalid small one (up to LISTED_ERRORS_WITHIN values), a second pass that lists
 * them all (`listAll`: the same schema compiled by an allErrors instance, made when first needed).
 */
export function firstThenAll(validate: Validate, listAll: () => Validate, data: unknown): ErrorObject[] | undefined {
  if (validate(data)) return undefined;
  const first = validate.errors ?? [];
  if (!holdsAtMost(data, LISTED_ERRORS_WITHIN)) return first;
  const all = listAll();
  return all(data) ? first : (all.errors ?? first);
}

/**
 * The most characters the patterns of tenants' schemas may check for one request (a trigger, or
 * all the events of a bulk trigger together), every pattern and every value counted. Matching is
 * linear in the value but not free, and a schema may apply many patterns to the same value, or one
 * to every item of an array: a budget per request bounds the total, whatever the schema.
 */
export const PATTERN_BUDGET_CHARS = 256 * 1024;

/**
 * The most schemas a payload may be checked against for one request (the events of a bulk trigger
 * together), each value counted once for every schema that may apply to it (workflow-rules.ts,
 * schemaChecksOf). A schema's size is bounded, but a payload may put many values under a wide one:
 * an `anyOf` of 990 branches over 20,000 items held the event loop for five seconds.
 */
export const SCHEMA_CHECK_BUDGET = 1_000_000;

/** What one request may still spend checking payloads: characters matched by patterns, and schemas applied. */
export interface CheckBudget {
  patternChars: number;
  schemaChecks: number;
}

export const newCheckBudget = (): CheckBudget => ({ patternChars: PATTERN_BUDGET_CHARS, schemaChecks: SCHEMA_CHECK_BUDGET });

/** A validation stopped because its patterns would check more than the request's budget. */
export class PatternBudgetSpent extends Error {
  constructor() {
    super(
      `would need more than ${PATTERN_BUDGET_CHARS.toLocaleString('en')} characters checked by the payloadSchema's patterns and formats, their budget for one request (a bulk request's events share it)`,
    );
  }
}

// The budget of the validation under way: validating is synchronous, so one runs at a time.
let spending: CheckBudget | undefined;

/**
 * Runs validation with validators compiled by `createTenantAjv` under a request's pattern budget; throws
 * PatternBudgetSpent (before matching the value that would go over) when it runs out.
 */
export function validateWithin<T>(budget: CheckBudget, validation: () => T): T {
  spending = budget;
  try {
    return validation();
  } finally {
    spending = undefined;
  }
}

/** Charges `chars` matched by a pattern or a format to the validation under way; PatternBudgetSpent past its budget. */
function charge(chars: number): void {
  if (!spending) return;
  spending.patternChars -= chars;
  if (spending.patternChars < 0) throw new PatternBudgetSpent();
}

/**
 * ajv-formats' checks, each charging the value it checks first, as patterns do (linearRegExp):
 * each is linear, but a schema may apply ninety of them to one value of 1 MB (an allOf of
 * formats), which held the event loop 370 ms.
 */
function chargeFormats(ajv: Ajv2020): void {
  /** A format's check (a function, a RegExp or its source) that charges the value first. */
  const charged = (check: string | RegExp | ((value: never) => boolean)) => {
    const pattern = typeof check === 'string' ? new RegExp(check, 'u') : check;
    const test = typeof pattern === 'function' ? (pattern as (value: unknown) => boolean) : (value: unknown) => pattern.test(value as string);
    return (value: string) => (charge(typeof value === 'string' ? value.length : 1), test(value));
  };
  for (const [name, format] of Object.entries(ajv.formats)) {
    if (format === undefined || format === true) continue;
    if (typeof format !== 'object' || format instanceof RegExp) ajv.addFormat(name, charged(format));
    else if (!format.async) ajv.addFormat(name, { ...format, validate: charged(format.validate as (value: never) => boolean) } as typeof format);
  }
}

/**
 * The RE2 programs of a schema's patterns, compiled ahead with the event loop turning between them
 * (compilePatterns), so that compiling the schema, which ajv does in one go, finds them made: a
 * schema of 900 patterns took half a second to compile, each pattern compiled twice.
 */
export type CompiledPatterns = ReadonlyMap<string, RE2JS | Error>;

/** `pattern`'s RE2 program, from `patterns` when it is there, or why RE2 cannot run it. */
function programOf(pattern: string, patterns: CompiledPatterns | undefined): RE2JS | Error {
  return patterns?.get(pattern) ?? compileOrError(pattern);
}

function compileOrError(pattern: string): RE2JS | Error {
  try {
    return RE2JS.compile(pattern);
  } catch (err) {
    return err instanceof Error ? err : new Error(String(err));
  }
}

/** Compiles each of `patterns` (once each), letting the event loop turn between them when they run long. */
export async function compilePatterns(patterns: Iterable<string>): Promise<CompiledPatterns> {
  const compiled = new Map<string, RE2JS | Error>();
  const pace = pacer();
  for (const pattern of patterns) {
    if (compiled.has(pattern)) continue;
    compiled.set(pattern, compileOrError(pattern));
    await pace();
  }
  return compiled;
}

/**
 * ajv's `code.regExp` for schemas tenants write: RE2 (re2js) matches in time linear in the value,
 * so no pattern can stall the process on a crafted payload, whatever its nesting; each value it
 * checks is charged to the request's budget first. The contract's own patterns keep V8's engine
 * (they are ours, and it is faster). Programs in `patterns` are not compiled again.
 */
function linearRegExp(patterns: CompiledPatterns | undefined) {
  return Object.assign(
    (pattern: string) => {
      const compiled = programOf(pattern, patterns);
      if (compiled instanceof Error) throw compiled;
      return {
        test(value: string): boolean {
          charge(value.length);
          return compiled.test(value);
        },
        // ajv keeps one compiled pattern per distinct toString().
        toString: () => `/${pattern}/`,
      };
    },
    { code: 'RE2JS.compile' },
  );
}

/**
 * The validator setup for a tenant's schema (a workflow's payloadSchema); see firstThenAll for
 * `allErrors: false`. `patterns`, its patterns compiled ahead (compilePatterns).
 */
export function createTenantAjv({ patterns, ...options }: { allErrors?: boolean; patterns?: CompiledPatterns } = {}): Ajv2020 {
  // ajv's optimizing passes over the generated code cost more than linear time in a wide `oneOf` or
  // `anyOf` (bench/README.md, "Tenant schemas"); a tenant's schema is compiled without them.
  // Own properties only: a payload `{}` has no `toString` to satisfy `required`. No logger: ajv warns
  // of an unknown format (which JSON Schema says to ignore) by writing the tenant's text to the console.
  const ajv = createAjv({ ...options, ownProperties: true, logger: false, code: { regExp: linearRegExp(patterns), optimize: false } });
  chargeFormats(ajv);
  ajv.removeKeyword('enum');
  ajv.addKeyword({ keyword: 'enum', schemaType: 'array', errors: true, compile: compileEnum });
  ajv.removeKeyword('uniqueItems');
  ajv.addKeyword({ keyword: 'uniqueItems', type: 'array', schemaType: 'boolean', errors: true, compile: compileUniqueItems });
  return ajv;
}

/**
 * `uniqueItems` for tenants' schemas: each item's canonical JSON in a Set, linear in the array's
 * size, where ajv's own compares items that are not all of one simple type pairwise.
 */
function compileUniqueItems(unique: boolean) {
  const validate = (data: unknown[]): boolean => {
    if (!unique) return true;
    const seen = new Set<string>();
    for (const item of data) {
      const text = canonicalJson(item);
      if (seen.has(text)) {
        validate.errors = [{ keyword: 'uniqueItems', message: 'must NOT have duplicate items', params: {} }];
        return false;
      }
      seen.add(text);
    }
    return true;
  };
  validate.errors = undefined as undefined | Array<Partial<ErrorObject>>;
  return validate;
}

/** JSON with every object's keys in order, so that equal values have equal texts. */
function canonicalJson(value: unknown): string {
  if (value === null || typeof value !== 'object') return JSON.stringify(value);
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  const keys = Object.keys(value).sort();
  return `{${keys.map((key) => `${JSON.stringify(key)}:${canonicalJson((value as Record<string, unknown>)[key])}`).join(',')}}`;
}

/** The most objects or arrays an `enum` of a tenant's schema may hold. */
const MAX_COMPOSITE_ENUM = 20;

/**
 * `enum` for tenants' schemas: ajv's own compares a value with each entry in turn, so an array of
 * many items under a long enum was items × entries comparisons (seconds for a megabyte). Here
 * strings, numbers, booleans and null are looked up in a Set, and the few object or array
 * entries by their canonical JSON, the equality uniqueItems uses.
 */
function compileEnum(entries: unknown[]) {
  const simple = new Set(entries.filter((entry) => entry === null || typeof entry !== 'object'));
  const composite = entries.filter((entry) => entry !== null && typeof entry === 'object');
  if (composite.length > MAX_COMPOSITE_ENUM) throw new Error(`an enum may hold at most ${MAX_COMPOSITE_ENUM} objects or arrays`);
  const compositeTexts = new Set(composite.map(canonicalJson));
  const validate = (data: unknown): boolean => {
    const found = data === null || typeof data !== 'object' ? simple.has(data) : compositeTexts.size > 0 && compositeTexts.has(canonicalJson(data));
    if (!found) validate.errors = [{ keyword: 'enum', message: 'must be equal to one of the allowed values', params: { allowedValues: entries } }];
    return found;
  };
  validate.errors = undefined as undefined | Array<Partial<ErrorObject>>;
  return validate;
}

/**
 * Why RE2 cannot run a pattern (a backreference, lookahead or lookbehind, which cannot match in
 * linear time), in one line; undefined when it can.
 */
export function linearPatternProblem(pattern: string, patterns?: CompiledPatterns): string | undefined {
  const compiled = programOf(pattern, patterns);
  return compiled instanceof Error ? compiled.message : undefined;
}

/** What building a class costs in instructions' worth (about 1.7 µs each), besides its ranges. */
const CLASS_COST = 40;
/** A Unicode table (`\pL`, `\p{Greek}`): building it from its ranges costs about this much. */
const UNICODE_TABLE_COST = 100;
/** A Perl class (`\d`, `\w`, `\s`) outside brackets: a small class of its own. */
const PERL_CLASS_COST = 10;
/** Code points of a range per instruction's worth: with `(?i)`, RE2 folds the case of each. */
const RANGE_WIDTH_PER_COST = 40;

/**
 * About how many instructions' worth of work RE2 compiles `pattern` to, found without compiling it:
 * a character counts 1, a group what it holds, a counted repetition what it repeats times its
 * largest count (`a{1000}` is 1,000: RE2 writes it out in full, so that written 1,000 times, 7 KB,
 * took seconds), and a class what building it costs (its Unicode tables, and the width of its
 * ranges, whose every code point case folding visits).
 */
export function patternSize(pattern: string): number {
  // Each open group: what it holds so far, and the size of its last atom (what a quantifier repeats).
  const groups = [{ total: 0, last: 0 }];
  const atom = (size: number) => {
    const group = groups[groups.length - 1];
    group.total += size;
    group.last = size;
  };
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i];
    if (c === '\\') {
      const next = pattern[i + 1];
      if (next === 'Q') {
        const end = pattern.indexOf('\\E', i + 2);
        atom(end === -1 ? pattern.length - i - 2 : end - i - 2);
        i = end === -1 ? pattern.length : end + 1;
        continue;
      }
      const escape = readEscape(pattern, i);
      atom(escape.table ? UNICODE_TABLE_COST : escape.code === undefined ? PERL_CLASS_COST : 1);
      i = escape.end - 1;
    } else if (c === '[') {
      const { end, cost } = readClass(pattern, i);
      atom(cost);
      i = end - 1;
    } else if (c === '(') {
      groups.push({ total: 0, last: 0 });
    } else if (c === ')' && groups.length > 1) {
      atom(groups.pop()!.total);
    } else if (c === '|') {
      groups[groups.length - 1].last = 0;
    } else if (c === '*' || c === '+' || c === '?') {
      groups[groups.length - 1].total += 1;
    } else if (c === '{' && /^\{\d+(,\d*)?\}/.test(pattern.slice(i, i + 24))) {
      const [whole, low, high] = /^\{(\d+)(?:,(\d*))?\}/.exec(pattern.slice(i, i + 24))!;
      const count = Math.max(Number(low), Number(high || 0));
      const group = groups[groups.length - 1];
      group.total += group.last * (count - 1);
      group.last *= count;
      i += whole.length - 1;
    } else {
      atom(1);
    }
  }
  return groups.reduce((sum, group) => sum + group.total, 0);
}

/** One escape at `at` (a backslash): where it ends, its code point if it stands for one, and whether it names a Unicode table. */
function readEscape(pattern: string, at: number): { end: number; code?: number; table?: boolean } {
  const kind = pattern[at + 1];
  if (kind === undefined) return { end: at + 1 };
  if (kind === 'p' || kind === 'P') {
    const close = pattern[at + 2] === '{' ? pattern.indexOf('}', at + 3) : -1;
    return { end: close === -1 ? at + 3 : close + 1, table: true };
  }
  if (kind === 'x') {
    const close = pattern[at + 2] === '{' ? pattern.indexOf('}', at + 3) : -1;
    const digits = close === -1 ? pattern.slice(at + 2, at + 4) : pattern.slice(at + 3, close);
    const code = Number.parseInt(digits, 16);
    return { end: close === -1 ? at + 2 + digits.length : close + 1, code: Number.isNaN(code) ? undefined : code };
  }
  // A Perl class (\d, \w, \s) or an assertion (\b, \A, \z): no single code point.
  if ('dDwWsSbBAz'.includes(kind)) return { end: at + 2 };
  return { end: at + 2, code: kind.codePointAt(0) };
}

/** The class opening at `at` (`[`): where it ends, and what building it costs (see patternSize). */
function readClass(pattern: string, at: number): { end: number; cost: number } {
  let cost = CLASS_COST;
  let i = at + 1;
  if (pattern[i] === '^') i++;
  // The code point just read, which a `-` may make the start of a range.
  let previous: number | undefined;
  for (let first = true; i < pattern.length && (pattern[i] !== ']' || first); first = false) {
    let code: number | undefined;
    if (pattern.startsWith('[:', i)) {
      const close = pattern.indexOf(':]', i + 2);
      i = close === -1 ? pattern.length : close + 2;
    } else if (pattern[i] === '\\') {
      const escape = readEscape(pattern, i);
      if (escape.table) cost += UNICODE_TABLE_COST;
      code = escape.code;
      i = escape.end;
    } else if (pattern[i] === '-' && previous !== undefined && pattern[i + 1] !== ']' && i + 1 < pattern.length) {
      // A range: its end is the next character or escape.
      const high = pattern[i + 1] === '\\' ? readEscape(pattern, i + 1) : { end: i + 1 + String.fromCodePoint(pattern.codePointAt(i + 1)!).length, code: pattern.codePointAt(i + 1) };
      if (high.code !== undefined) cost += Math.floor(Math.abs(high.code - previous) / RANGE_WIDTH_PER_COST);
      i = high.end;
      previous = undefined;
      continue;
    } else {
      code = pattern.codePointAt(i)!;
      i += String.fromCodePoint(code).length;
    }
    previous = code;
  }
  return { end: Math.min(i + 1, pattern.length), cost };
}
