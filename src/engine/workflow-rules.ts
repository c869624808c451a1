// The rules a workflow must satisfy beyond its schema, checked when it is saved so that a broken
// workflow is a 422 on save rather than a failed send later.
import type { ErrorDetail } from '../contract.js';
import { compilePatterns, createTenantAjv, linearPatternProblem, patternSize, type CompiledPatterns, type Validate } from '../json-schema.js';
import type { Step } from '../db/repos/workflows.js';
import { expressionChars, expressionCount, MAX_EXPRESSIONS, MAX_WORKFLOW_TEMPLATE_PARTS, templateParts, templateProblem, type TemplateField } from './templates.js';
import { payloadChecks, THREADED_PATTERN_SIZE, THREADED_SCHEMA_CHARS, THREADED_SCHEMAS, THREADED_TEMPLATE_CHARS } from './payload-checks.js';

/** Templates are every string field of a step's `template`, except the plain sender name. */
const PLAIN_TEMPLATE_FIELDS = new Set(['senderName']);

/** "Comment added!" → "comment-added": the workflowId a name gives when none is chosen. */
export function slugify(name: string): string {
  return name
    .normalize('NFKD')
    .replace(/[\u0300-\u036f]/g, '')
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '-')
    .slice(0, 100)
    .replace(/^-+|-+$/g, '');
}

/**
 * Gives every step its stepId (from its type, numbered when the type repeats) and `active` flag,
 * and lists what is wrong: repeated stepIds, templates that do not compile or are over their
 * budgets, conditions whose value does not fit their operator (each step's problems in that order).
 */
export async function normalizeSteps(steps: Step[]): Promise<{ steps: Step[]; problems: ErrorDetail[] }> {
  // Each step's problems, listed by step: its stepId's, its templates', its conditions'.
  const found = steps.map(() => ({ stepId: [] as ErrorDetail[], templates: [] as ErrorDetail[], conditions: [] as ErrorDetail[] }));
  const templates: TemplateField[] = [];
  const stepOfTemplate = new Map<string, number>();
  const taken = new Set(steps.map((step) => step.stepId).filter(Boolean));
  const seen = new Set<string>();
  const normalized = steps.map((step, index) => {
    const at = `body/steps/${index}`;
    let stepId = step.stepId;
    if (!stepId) {
      const base = step.type.replace(/_/g, '-');
      stepId = base;
      for (let n = 2; taken.has(stepId); n++) stepId = `${base}-${n}`;
      taken.add(stepId);
    }
    if (seen.has(stepId)) found[index].stepId.push({ field: `${at}/stepId`, message: `${stepId} is used by an earlier step` });
    seen.add(stepId);

    if ('template' in step) {
      // An in-app step's nested fields (redirect, actions, data) are templates too.
      const fields = (template: object, path: string): Array<[string, unknown]> =>
        Object.entries(template).flatMap(([field, value]): Array<[string, unknown]> =>
          step.type === 'in_app' && value && typeof value === 'object' ? fields(value, `${path}${field}/`) : [[`${path}${field}`, value]],
        );
      for (const [field, source] of fields(step.template, '')) {
        if (typeof source !== 'string' || PLAIN_TEMPLATE_FIELDS.has(field)) continue;
        templates.push({ field: `${at}/template/${field}`, source });
        stepOfTemplate.set(`${at}/template/${field}`, index);
      }
    }
    const problems = found[index].conditions;
    (step.conditions ?? []).forEach((condition, c) => {
      const field = `${at}/conditions/${c}/value`;
      const hasValue = condition.value !== undefined;
      const chars = hasValue ? JSON.stringify(condition.value).length : 0;
      if (chars > MAX_CONDITION_VALUE_CHARS) {
        problems.push({ field, message: `is ${chars.toLocaleString('en')} characters as JSON, more than the ${MAX_CONDITION_VALUE_CHARS.toLocaleString('en')} a condition's value may be` });
      } else if (condition.operator === 'in' || condition.operator === 'notIn') {
        if (!Array.isArray(condition.value)) problems.push({ field, message: `must be an array for ${condition.operator}` });
      } else if (condition.operator === 'exists' || condition.operator === 'notExists') {
        if (hasValue) problems.push({ field, message: `must be left out for ${condition.operator}` });
      } else if (!hasValue) {
        problems.push({ field, message: `is required for ${condition.operator}` });
      }
    });
    return { ...step, stepId, active: step.active ?? true } as Step;
  });
  for (const problem of await stepTemplateProblems(templates)) found[stepOfTemplate.get(problem.field)!].templates.push(problem);
  return { steps: normalized, problems: found.flatMap((step) => [...step.stepId, ...step.templates, ...step.conditions]) };
}

/** The problems of a workflow's templates (templateFieldProblems), found on the payload check thread when they are many. */
async function stepTemplateProblems(templates: TemplateField[]): Promise<ErrorDetail[]> {
  let chars = 0;
  for (const { source } of templates) chars += expressionChars(source);
  return chars > THREADED_TEMPLATE_CHARS ? payloadChecks.templateProblems(templates) : templateFieldProblems(templates);
}

/**
 * The problems of a workflow's templates, in order: the field that takes them past the
 * expressions or the parts they may have together (then nothing more is read), and each template
 * that does not compile.
 */
export function templateFieldProblems(templates: TemplateField[]): ErrorDetail[] {
  const problems: ErrorDetail[] = [];
  let expressionsLeft = MAX_EXPRESSIONS;
  let partsLeft = MAX_WORKFLOW_TEMPLATE_PARTS;
  for (const { field, source } of templates) {
    expressionsLeft -= expressionCount(source);
    if (expressionsLeft < 0) {
      problems.push({ field, message: `brings the workflow's templates to more than ${MAX_EXPRESSIONS.toLocaleString('en')} {{…}} expressions, the most they may have together` });
      break;
    }
    partsLeft -= templateParts(source);
    if (partsLeft < 0) {
      problems.push({ field, message: `brings the workflow's templates to more than ${MAX_WORKFLOW_TEMPLATE_PARTS.toLocaleString('en')} names, literals and parameters inside their {{…}}, the most they may have together` });
      break;
    }
    const problem = templateProblem(source);
    if (problem) problems.push({ field, message: `does not compile: ${problem}` });
  }
  return problems;
}

/**
 * The longest a condition's value may be, as JSON: every event keeps a copy of its workflow, and
 * a list of 95,000 entries in one step made a bulk request of 17 KB store 76 MB.
 */
export const MAX_CONDITION_VALUE_CHARS = 65_536;

/** The most instructions a payloadSchema's patterns may compile to together (json-schema.ts, patternSize). */
export const MAX_PATTERN_SIZE = 100_000;

/**
 * Patterns in a payloadSchema that the linear-time matcher cannot run: backreferences and
 * lookaround, whose matching can take exponential time; and those past what the schema's patterns
 * may compile to together (counted repetitions written out: compiling is not linear in the text).
 * Triggers run a payloadSchema's patterns on callers' payloads with RE2 (json-schema.ts,
 * createTenantAjv), so every other pattern, nested repetition included, matches in time linear in
 * the value. A pattern past the bound is not compiled, here or later.
 */
function unsupportedPatterns(schema: object, at: string, patterns?: CompiledPatterns): ErrorDetail[] {
  const found: ErrorDetail[] = [];
  let size = 0;
  for (const { pattern, field, named } of patternsIn(schema, at)) {
    size += patternSize(pattern);
    if (size > MAX_PATTERN_SIZE) {
      // Past the bound, the first pattern over it is the one problem named.
      const over = `takes the schema's patterns past ${MAX_PATTERN_SIZE.toLocaleString('en')} instructions compiled, more than they may take together (a counted repetition such as a{1000} counts 1,000)`;
      found.push({ field, message: named ? `${pattern.slice(0, 100)} ${over}` : over });
      break;
    }
    const problem = linearPatternProblem(pattern, patterns);
    if (problem) {
      const message = `cannot be matched in linear time (backreferences and lookaround are not supported): ${problem}`;
      found.push({ field, message: named ? `${pattern.slice(0, 100)} ${message}` : message });
    }
  }
  return found;
}

/**
 * The patterns of a payloadSchema, in the order of its text: each `pattern`, and each name of a
 * `patternProperties` (`named`), with the field that holds it. Values that are data (a `const`,
 * an `enum`) are not read: a `pattern` there is no pattern, and a large `const` was walked value
 * by value at each save and at the first trigger of each workflow version.
 */
function* patternsIn(node: unknown, where: string): Generator<{ pattern: string; field: string; named: boolean }> {
  if (!node || typeof node !== 'object') return;
  for (const [key, value] of Object.entries(node)) {
    if (DATA_KEYWORDS.has(key)) continue;
    if (key === 'pattern' && typeof value === 'string') yield { pattern: value, field: `${where}/pattern`, named: false };
    else if (key === 'patternProperties' && value && typeof value === 'object') {
      for (const pattern of Object.keys(value)) yield { pattern, field: `${where}/patternProperties`, named: true };
    }
    if (SCHEMA_MAPS.has(key) && value && typeof value === 'object' && !Array.isArray(value)) {
      // Names here are the schema's own (a property may be called "const"): each value is a schema.
      for (const [name, named] of Object.entries(value)) yield* patternsIn(named, `${where}/${key}/${name}`);
    } else if (value && typeof value === 'object') yield* patternsIn(value, `${where}/${key}`);
  }
}

/**
 * A payloadSchema's patterns compiled ahead, with the event loop turning between them, as far as
 * they may compile to together (MAX_PATTERN_SIZE): give them to compilePayloadSchema.
 */
export async function precompiledPatterns(schema: object): Promise<CompiledPatterns> {
  let size = 0;
  const within = function* () {
    for (const { pattern } of patternsIn(schema, '')) {
      size += patternSize(pattern);
      if (size > MAX_PATTERN_SIZE) return;
      yield pattern;
    }
  };
  return compilePatterns(within());
}

/** Each schema node of a payloadSchema, by the number of schemas it holds once its `$ref`s are followed. */
export type SchemaSizes = ReadonlyMap<object, number>;

/** The most schemas a payloadSchema may expand to once its `$ref`s are followed. */
export const MAX_EXPANDED_SCHEMAS = 1_000;
/** Keywords whose values are data, not schemas: a `$ref` inside them is not one. */
const DATA_KEYWORDS = new Set(['const', 'enum', 'default', 'examples']);
/** Keywords whose values map names to schemas: a name there is no keyword (a property may be called "enum"). */
const SCHEMA_MAPS = new Set(['properties', 'patternProperties', '$defs', 'definitions', 'dependentSchemas']);

class ShapeRefused extends Error {
  constructor(readonly detail: ErrorDetail) {
    super(detail.message);
  }
}

/** The schema a local JSON pointer (`#`, `#/$defs/a`) names in `root`, if any. */
function pointedAt(root: object, ref: string): unknown {
  if (ref === '#') return root;
  if (!ref.startsWith('#/')) return undefined;
  let node: unknown = root;
  for (const raw of ref.slice(2).split('/')) {
    let key: string;
    try {
      key = decodeURIComponent(raw).replace(/~1/g, '/').replace(/~0/g, '~');
    } catch {
      return undefined; // broken percent-encoding (#/%E0) points nowhere
    }
    if (!node || typeof node !== 'object' || !Object.hasOwn(node, key)) return undefined;
    node = (node as Record<string, unknown>)[key];
  }
  return node;
}

/**
 * The size of every schema node once its `$ref`s are followed, or what would make checking a
 * payload slow, found by the same walk: a reference that is not a local pointer or that leads back into itself (ajv would recurse on the
 * same value for ever), a schema that expands past MAX_EXPANDED_SCHEMAS (each `anyOf` of two refs
 * to the next doubles it: that is exponential work), or an `$id` below the root. (`enum` and
 * `uniqueItems` are linear whatever they hold: json-schema.ts.)
 */
function expandedSizes(root: object, at: string): { sizes: SchemaSizes } | { problems: ErrorDetail[] } {
  const expanded = new Map<object, number>();
  const walking = new Set<object>();
  const walk = (node: unknown, where: string): number => {
    if (!node || typeof node !== 'object') return 1;
    const known = expanded.get(node);
    if (known !== undefined) return known;
    if (walking.has(node)) throw new ShapeRefused({ field: where, message: 'refers back to a schema that contains it: recursive payload schemas are not accepted' });
    walking.add(node);
    let size = 1;
    const schema = node as Record<string, unknown>;
    for (const [key, value] of Object.entries(schema)) {
      if (DATA_KEYWORDS.has(key)) continue;
      if (key === '$dynamicRef' || key === '$recursiveRef') throw new ShapeRefused({ field: `${where}/${key}`, message: 'is not accepted in a payload schema' });
      // An $id below the root would make ajv resolve the $refs under it from another base than this walk does.
      if (key === '$id' && node !== root) throw new ShapeRefused({ field: `${where}/$id`, message: 'is accepted only at the root of a payload schema' });
      if (SCHEMA_MAPS.has(key) && value && typeof value === 'object' && !Array.isArray(value)) {
        for (const [name, named] of Object.entries(value)) size += walk(named, `${where}/${key}/${name}`);
      } else if (key === '$ref') {
        const target = typeof value === 'string' ? pointedAt(root, value) : undefined;
        if (target === undefined) throw new ShapeRefused({ field: `${where}/$ref`, message: 'must be a local JSON pointer to a schema of this one, such as #/$defs/name' });
        size += walk(target, `${where}/$ref`);
      } else if (value && typeof value === 'object') {
        size += walk(value, `${where}/${key}`);
      }
      if (size > MAX_EXPANDED_SCHEMAS) {
        throw new ShapeRefused({ field: at, message: `expands to more than ${MAX_EXPANDED_SCHEMAS.toLocaleString('en')} schemas once its $refs are followed, more than a payload can be checked against quickly` });
      }
    }
    walking.delete(node);
    expanded.set(node, size);
    return size;
  };
  try {
    walk(root, at);
    return { sizes: expanded };
  } catch (err) {
    if (err instanceof ShapeRefused) return { problems: [err.detail] };
    throw err;
  }
}

/**
 * The keywords that apply schemas to a value or to what it holds, the only ones the count reads
 * (ajv ignores a keyword it does not know, and so does the count, however many a schema has).
 * `dependencies` is draft 7's, which ajv still runs.
 */
const APPLICATORS = [
  '$ref', 'allOf', 'anyOf', 'oneOf', 'not', 'if', 'then', 'else', 'dependentSchemas', 'dependencies',
  'properties', 'patternProperties', 'additionalProperties', 'unevaluatedProperties', 'propertyNames',
  'prefixItems', 'items', 'additionalItems', 'unevaluatedItems', 'contains',
] as const;
/** Keywords whose schemas (one, or a list) apply to the value itself. */
const SAME_VALUE = new Set(['allOf', 'anyOf', 'oneOf', 'not', 'if', 'then', 'else']);
/** Keywords whose schema applies to each property value of an object. */
const EACH_PROPERTY = new Set(['additionalProperties', 'unevaluatedProperties']);
/** Keywords whose schema applies to each item of an array (`items` as a list: each to its own). */
const EACH_ITEM = new Set(['items', 'additionalItems', 'unevaluatedItems', 'contains']);
/** Keywords that compare a whole value (its every nested value) rather than apply a schema to it. */
const WHOLE_VALUE = ['const', 'enum', 'uniqueItems'] as const;

class OverBudget extends Error {}

/**
 * How many schemas checking `payload` against `root` may apply, counting stopped just past `limit`:
 * every value counts each schema that may apply to it, so an `anyOf` of 900 branches over 20,000
 * items counts 18,000,000. A value that is not an object or array counts the whole schema it meets
 * (its size once its `$ref`s are followed), without walking it; an object counts its keys for each
 * keyword that looks at them, and a value compared whole (`const`, `enum`, `uniqueItems`) the values
 * it holds. An upper bound of a validator's work, reached in at most about `limit` steps; the schema
 * is one compilePayloadSchema accepted, and `sizes` its sizes from there.
 */
export function schemaChecksOf(root: object, sizes: SchemaSizes, payload: unknown, limit: number): number {
  const sizeOf = (node: unknown): number => (node && typeof node === 'object' ? (sizes.get(node) ?? 1) : 1);
  // How many values an object or array holds, nested, each counted once however often it is compared.
  const held = new Map<object, number>();
  const valuesIn = (value: object): number => {
    let count = held.get(value);
    if (count === undefined) {
      count = 1;
      for (const inner of Object.values(value)) count += inner !== null && typeof inner === 'object' ? valuesIn(inner) : 1;
      held.set(value, count);
    }
    return count;
  };
  let spent = 0;
  const spend = (n: number) => {
    spent += n;
    if (spent > limit) throw new OverBudget();
  };
  const check = (node: unknown, value: unknown): void => {
    if (!node || typeof node !== 'object') return spend(1);
    if (value === null || typeof value !== 'object') return spend(sizeOf(node));
    spend(1);
    const schema = node as Record<string, unknown>;
    const object = Array.isArray(value) ? undefined : (value as Record<string, unknown>);
    const items = Array.isArray(value) ? value : undefined;
    const names = object ? Object.keys(object) : [];
    for (const key of WHOLE_VALUE) if (Object.hasOwn(schema, key)) spend(valuesIn(value));
    for (const key of APPLICATORS) {
      if (!Object.hasOwn(schema, key)) continue;
      const sub = schema[key];
      if (key === '$ref') {
        if (typeof sub === 'string') check(pointedAt(root, sub), value);
        continue;
      }
      if (!sub || typeof sub !== 'object') continue;
      if (SAME_VALUE.has(key)) {
        for (const branch of Array.isArray(sub) ? sub : [sub]) check(branch, value);
      } else if (key === 'dependentSchemas' || key === 'dependencies') {
        // Draft 7's dependencies also take lists of property names, which apply no schema.
        if (object) for (const each of Object.values(sub)) if (each && typeof each === 'object' && !Array.isArray(each)) check(each, value);
      } else if (object && key === 'properties') {
        spend(names.length);
        for (const name of names) if (Object.hasOwn(sub, name)) check((sub as Record<string, unknown>)[name], object[name]);
      } else if (object && key === 'patternProperties') {
        spend(names.length);
        for (const each of Object.values(sub)) for (const name of names) check(each, object[name]);
      } else if (object && EACH_PROPERTY.has(key)) {
        for (const name of names) check(sub, object[name]);
      } else if (object && key === 'propertyNames') {
        spend(names.length * sizeOf(sub));
      } else if (items && (key === 'prefixItems' || (key === 'items' && Array.isArray(sub)))) {
        (sub as unknown[]).slice(0, items.length).forEach((each, i) => check(each, items[i]));
      } else if (items && EACH_ITEM.has(key)) {
        for (const item of items) check(sub, item);
      }
    }
  };
  try {
    check(root, payload);
  } catch (err) {
    if (!(err instanceof OverBudget)) throw err;
  }
  return spent;
}

/**
 * A payloadSchema compiled by `compile`, or why it cannot be used: not a valid JSON Schema, too
 * costly to check, or a pattern RE2 cannot run (then it is not compiled at all). `patterns`, its
 * patterns compiled ahead (precompiledPatterns), for `compile` to use too.
 */
export function compilePayloadSchema<T>(
  schema: object,
  compile: (schema: object) => T,
  patterns?: CompiledPatterns,
): { compiled: T; sizes: SchemaSizes } | { problems: ErrorDetail[] } {
  const unsupported = unsupportedPatterns(schema, 'body/payloadSchema', patterns);
  if (unsupported.length > 0) return { problems: unsupported };
  const expanded = expandedSizes(schema, 'body/payloadSchema');
  if ('problems' in expanded) return expanded;
  try {
    return { compiled: compile(schema), sizes: expanded.sizes };
  } catch (err) {
    return { problems: [{ field: 'body/payloadSchema', message: `is not a valid JSON Schema: ${err instanceof Error ? err.message : String(err)}` }] };
  }
}

/**
 * How much a payloadSchema takes to compile: its subschemas once `$ref`s are followed, and what its
 * patterns compile to together; with its sizes (schemaChecksOf). Found without compiling it.
 */
export function schemaWeight(schema: object): { sizes: SchemaSizes; schemas: number; patternSize: number; chars: number } | { problems: ErrorDetail[] } {
  const expanded = expandedSizes(schema, 'body/payloadSchema');
  if ('problems' in expanded) return expanded;
  let size = 0;
  for (const { pattern } of patternsIn(schema, '')) size += patternSize(pattern);
  return { sizes: expanded.sizes, schemas: expanded.sizes.get(schema) ?? 1, patternSize: size, chars: JSON.stringify(schema).length };
}

/** Whether a schema of this weight is compiled and run on the payload check thread (payload-checks.ts). */
export function checkedOffLoop(weight: { schemas: number; patternSize: number; chars: number }): boolean {
  return weight.schemas > THREADED_SCHEMAS || weight.patternSize > THREADED_PATTERN_SIZE || weight.chars > THREADED_SCHEMA_CHARS;
}

/**
 * A payloadSchema compiled for checking payloads, its patterns compiled ahead: `first` stops at the
 * first error (or, `allErrors`, lists them all), and `listAll`, made when first asked, lists them
 * all (json-schema.ts, firstThenAll); or why it cannot be used (compilePayloadSchema).
 */
export async function compiledPayloadSchema(
  schema: object,
  { allErrors }: { allErrors: boolean },
): Promise<{ first: Validate; listAll: () => Validate; sizes: SchemaSizes } | { problems: ErrorDetail[] }> {
  const patterns = await precompiledPatterns(schema);
  const checked = compilePayloadSchema(schema, (valid) => createTenantAjv({ allErrors, patterns }).compile(valid) as Validate, patterns);
  if ('problems' in checked) return checked;
  let all: Validate | undefined;
  return { first: checked.compiled, listAll: () => (all ??= createTenantAjv({ patterns }).compile(schema) as Validate), sizes: checked.sizes };
}

/** Why a payloadSchema cannot be used (compilePayloadSchema), when a workflow is saved. */
export async function payloadSchemaProblems(schema: object): Promise<ErrorDetail[]> {
  const weight = schemaWeight(schema);
  if (!('problems' in weight) && checkedOffLoop(weight)) return payloadChecks.problems(schema);
  const result = await compiledPayloadSchema(schema, { allErrors: true });
  return 'problems' in result ? result.problems : [];
}
