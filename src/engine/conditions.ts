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

function inList(list: unknown[], actual: unknown): boolean {
  let texts = listTexts.get(list);
  if (!texts) {
    texts = new Set(list.map((value) => JSON.stringify(value)));
    listTexts.set(list, texts);
  }
  return texts.has(JSON.stringify(actual));
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
      return JSON.stringify(actual) === JSON.stringify(expected);
    case 'ne':
      return JSON.stringify(actual) !== JSON.stringify(expected);
    case 'in':
      return Array.isArray(expected) && inList(expected, actual);
    case 'notIn':
      return Array.isArray(expected) && !inList(expected, actual);
    case 'contains': {
      if (typeof actual === 'string' && typeof expected === 'string') return actual.includes(expected);
      if (!Array.isArray(actual)) return false;
      const text = JSON.stringify(expected);
      return actual.some((value) => JSON.stringify(value) === text);
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
