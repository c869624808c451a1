import type { Schemas } from '../contract.js';
import { valueAt } from './durations.js';

type Condition = Schemas['StepCondition'];

function compare(actual: unknown, expected: unknown): number | undefined {
  if (typeof actual === 'number' && typeof expected === 'number') return actual - expected;
  if (typeof actual === 'string' && typeof expected === 'string') return actual < expected ? -1 : actual > expected ? 1 : 0;
  return undefined;
}

// Each `in`/`notIn` list as the set of its entries' JSON, made once per condition: comparing a
// payload value with a long list entry by entry, stringifying both each time, held the loop for seconds.
const listTexts = new WeakMap<unknown[], Set<string>>();

// An object's JSON, written once however many conditions (and recipients of one event) compare it,
// rather than once per condition over a large value.
const objectTexts = new WeakMap<object, string>();

/** A value's JSON, by which conditions compare values (an object's remembered). */
function jsonOf(value: unknown): string | undefined {
  if (value === null || typeof value !== 'object') return JSON.stringify(value);
  let text = objectTexts.get(value);
  if (text === undefined) objectTexts.set(value, (text = JSON.stringify(value)));
  return text;
}

/** Whether two values are the same JSON: primitives compare as they are, without writing a long string out. */
function sameJson(a: unknown, b: unknown): boolean {
  const primitive = (value: unknown) => value === null || (typeof value !== 'object' && value !== undefined);
  if (primitive(a) && primitive(b)) return a === b;
  return jsonOf(a) === jsonOf(b);
}

function inList(list: unknown[], actual: unknown): boolean {
  let texts = listTexts.get(list);
  if (!texts) {
    texts = new Set(list.map((value) => JSON.stringify(value)));
    listTexts.set(list, texts);
  }
  return texts.has(jsonOf(actual) as string);
}

function holds(condition: Condition, facts: object): boolean {
  const actual = valueAt(facts, condition.field);
  const expected = condition.value;
  switch (condition.operator) {
    case 'exists':
      return actual !== undefined && actual !== null;
    case 'notExists':
      return actual === undefined || actual === null;
    case 'eq':
      return sameJson(actual, expected);
    case 'ne':
      return !sameJson(actual, expected);
    case 'in':
      return Array.isArray(expected) && inList(expected, actual);
    case 'notIn':
      return Array.isArray(expected) && !inList(expected, actual);
    case 'contains': {
      if (typeof actual === 'string' && typeof expected === 'string') return actual.includes(expected);
      if (!Array.isArray(actual)) return false;
      const text = jsonOf(expected);
      return actual.some((value) => jsonOf(value) === text);
    }
    default: {
      // gt, gte, lt, lte compare numbers with numbers and strings with strings; anything else fails.
      const order = compare(actual, expected);
      if (order === undefined) return false;
      return { gt: order > 0, gte: order >= 0, lt: order < 0, lte: order <= 0 }[condition.operator];
    }
  }
}

/** The first condition that does not hold, described for the execution detail; undefined if all hold. */
export function failedCondition(conditions: Condition[] | undefined, facts: { payload: unknown; subscriber: unknown }): string | undefined {
  for (const condition of conditions ?? []) {
    if (!holds(condition, facts)) {
      const value = condition.value === undefined ? '' : ` ${JSON.stringify(condition.value)}`;
      return `${condition.field} ${condition.operator}${value}`;
    }
  }
  return undefined;
}
