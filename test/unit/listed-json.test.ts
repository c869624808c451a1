// A listed item's large JSON field is written into the answer as it is stored, and parsed each time
// it is read and not kept (setStoredJson); a short one, or any of an item read alone, is parsed at
// once. Either way the item reads and serializes as a plain one would.
import { describe, expect, it } from 'vitest';
import { ANSWERED_AS_STORED_CHARS, setStoredJson } from '../../src/db/json.js';
import { stringifyWithRaw } from '../../src/raw-json.js';

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
    expect(stored.length).toBeGreaterThanOrEqual(ANSWERED_AS_STORED_CHARS);
    const item = { id: 'a', data: {} as unknown, after: 1 };
    setStoredJson(item, 'data', stored, {}, true);
    expect(Object.getOwnPropertyDescriptor(item, 'data')?.get).toBeTypeOf('function');
    expect(item.data).toEqual(large);
    expect(item.data).not.toBe(item.data);
    expect(Object.keys(item)).toEqual(['id', 'data', 'after']);
    expect(JSON.stringify(item)).toBe(JSON.stringify({ id: 'a', data: large, after: 1 }));
    expect({ ...item }).toEqual({ id: 'a', data: large, after: 1 });
    expect(stringifyWithRaw(item)).toBe(JSON.stringify(item));
  });

  it('writes a long listed value as its stored text, without parsing it', () => {
    // Stored with spaces JSON.stringify would not write: seen in the answer only if spliced in.
    const stored = JSON.stringify(large, null, 1);
    const item = { id: 'a', data: {} as unknown, after: undefined, last: [1] };
    setStoredJson(item, 'data', stored, {}, true);
    expect(stringifyWithRaw(item)).toBe(`{"id":"a","data":${stored},"last":[1]}`);
    const plain = { id: 'a', data: {} as unknown };
    setStoredJson(plain, 'data', stored, {}, false);
    expect(stringifyWithRaw(plain)).toBe(JSON.stringify(plain));
  });

  it('takes a value set on the field in place of the stored one', () => {
    const item = { data: {} as unknown };
    setStoredJson(item, 'data', JSON.stringify(large), {}, true);
    item.data = { replaced: true };
    expect(item.data).toEqual({ replaced: true });
    expect(JSON.stringify(item)).toBe('{"data":{"replaced":true}}');
    expect(stringifyWithRaw(item)).toBe('{"data":{"replaced":true}}');
  });
});
