// A listed item's large JSON field is parsed each time it is read and not kept (setStoredJson); a
// short one, or any of an item read alone, is parsed at once. Either way the item reads and
// serializes as a plain one would.
import { describe, expect, it } from 'vitest';
import { PARSED_WHEN_READ_CHARS, setStoredJson } from '../../src/db/json.js';

const large = { items: Array.from({ length: 5_000 }, (_, i) => ({ i, text: 'abcdefghij' })) };

describe('setStoredJson', () => {
  it('parses a short value at once, as a plain field', () => {
    const item = { id: 'a', data: {} as unknown, after: 1 };
    setStoredJson(item, 'data', JSON.stringify({ plan: 'pro' }), {}, true);
    expect(Object.getOwnPropertyDescriptor(item, 'data')).toMatchObject({ value: { plan: 'pro' }, writable: true, enumerable: true });
    const missing = { data: {} as unknown };
    setStoredJson(missing, 'data', null, { fallback: true }, true);
    expect(missing.data).toEqual({ fallback: true });
  });

  it('parses a long value at once, as a plain field, for an item that is not listed', () => {
    const item = { id: 'a', data: {} as unknown };
    setStoredJson(item, 'data', JSON.stringify(large), {}, false);
    expect(Object.getOwnPropertyDescriptor(item, 'data')).toMatchObject({ value: large, writable: true, enumerable: true });
  });

  it('parses a long value each time it is read, in its place among the fields, and keeps none of it', () => {
    const stored = JSON.stringify(large);
    expect(stored.length).toBeGreaterThanOrEqual(PARSED_WHEN_READ_CHARS);
    const item = { id: 'a', data: {} as unknown, after: 1 };
    setStoredJson(item, 'data', stored, {}, true);
    expect(Object.getOwnPropertyDescriptor(item, 'data')?.get).toBeTypeOf('function');
    expect(item.data).toEqual(large);
    expect(item.data).not.toBe(item.data);
    expect(Object.keys(item)).toEqual(['id', 'data', 'after']);
    expect(JSON.stringify(item)).toBe(JSON.stringify({ id: 'a', data: large, after: 1 }));
    expect({ ...item }).toEqual({ id: 'a', data: large, after: 1 });
  });

  it('takes a value set on the field in place of the stored one', () => {
    const item = { data: {} as unknown };
    setStoredJson(item, 'data', JSON.stringify(large), {}, true);
    item.data = { replaced: true };
    expect(item.data).toEqual({ replaced: true });
    expect(JSON.stringify(item)).toBe('{"data":{"replaced":true}}');
  });
});
