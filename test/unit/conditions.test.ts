// Step conditions compare values as their JSON (engine/conditions.ts): the same answers whether a
// value is a primitive, compared as it is, or an object, whose JSON is written once.
import { describe, expect, it } from 'vitest';
import { failedCondition } from '../../src/engine/conditions.js';

const holds = (operator: string, actual: unknown, value?: unknown) =>
  failedCondition([{ field: 'payload.a', operator, ...(value === undefined ? {} : { value }) } as never], { payload: { a: actual }, subscriber: {} }) === undefined;

describe('failedCondition', () => {
  it('compares primitives and objects as JSON does', () => {
    expect(holds('eq', 'x', 'x')).toBe(true);
    expect(holds('eq', 1, '1')).toBe(false);
    expect(holds('eq', 0, -0)).toBe(true);
    expect(holds('eq', null, null)).toBe(true);
    expect(holds('eq', undefined, null)).toBe(false);
    expect(holds('eq', { b: [1, { c: 2 }] }, { b: [1, { c: 2 }] })).toBe(true);
    // As JSON: the keys' order counts.
    expect(holds('eq', { b: 1, c: 2 }, { c: 2, b: 1 })).toBe(false);
    expect(holds('ne', { b: 1 }, { b: 2 })).toBe(true);
    expect(holds('ne', 'x', 'x')).toBe(false);
    expect(holds('contains', [1, { b: 1 }], { b: 1 })).toBe(true);
    expect(holds('contains', [1, { b: 1 }], { b: 2 })).toBe(false);
    expect(holds('in', { b: 1 }, [{ b: 1 }, 2])).toBe(true);
    expect(holds('notIn', 'x', ['y'])).toBe(true);
  });

  it('gives one answer however many conditions look at the same object', () => {
    const a = { big: 'x'.repeat(300_000), list: [1, 2, 3] };
    const twenty = Array.from({ length: 20 }, () => ({ field: 'payload.a', operator: 'ne', value: { big: 'y' } }) as never);
    expect(failedCondition(twenty, { payload: { a }, subscriber: {} })).toBeUndefined();
    expect(failedCondition([...twenty, { field: 'payload.a', operator: 'eq', value: { big: 'y' } } as never], { payload: { a }, subscriber: {} })).toBe('payload.a eq {"big":"y"}');
  });
});
