// The large JSON field of an item made for an answer is written into it as it is stored, and parsed
// each time it is read and not kept (setStoredJson); a short one, or any of an item the rules read,
// is parsed at once. Either way the item reads and serializes as a plain one would.
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

  it('parses a long value at once, as a plain field, for an item the rules read', () => {
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

  it('writes a long value of an answered item as its stored text, without parsing it', () => {
    // Stored with spaces JSON.stringify would not write: seen in the answer only if spliced in.
    const stored = JSON.stringify(large, null, 1);
    const item = { id: 'a', data: {} as unknown, after: undefined, last: [1] };
    setStoredJson(item, 'data', stored, {}, true);
    expect(stringifyWithRaw(item)).toBe(`{"id":"a","data":${stored},"last":[1]}`);
    const plain = { id: 'a', data: {} as unknown };
    setStoredJson(plain, 'data', stored, {}, false);
    expect(stringifyWithRaw(plain)).toBe(JSON.stringify(plain));
  });

  it('splices from ANSWERED_AS_STORED_CHARS on, about a kilobyte, where it costs less than parsing', () => {
    expect(ANSWERED_AS_STORED_CHARS).toBeLessThanOrEqual(1024);
    // Stored with a space JSON.stringify would not write: in the answer only if spliced.
    const storedOf = (chars: number) => `{"text": "${'x'.repeat(chars - 12)}"}`;
    for (const [chars, spliced] of [[ANSWERED_AS_STORED_CHARS, true], [ANSWERED_AS_STORED_CHARS - 1, false]] as const) {
      const stored = storedOf(chars);
      expect(stored).toHaveLength(chars);
      const item = { data: {} as unknown };
      setStoredJson(item, 'data', stored, {}, true);
      expect(stringifyWithRaw(item)).toBe(spliced ? `{"data":${stored}}` : JSON.stringify({ data: JSON.parse(stored) }));
    }
  });

  it('writes a field deleted and set again, or redefined, as its new value, not the stored text', () => {
    const stored = JSON.stringify(large, null, 1);
    const deleted = { data: {} as unknown };
    setStoredJson(deleted, 'data', stored, {}, true);
    delete (deleted as { data?: unknown }).data;
    deleted.data = { replaced: true };
    expect(stringifyWithRaw(deleted)).toBe('{"data":{"replaced":true}}');
    const redefined = { data: {} as unknown };
    setStoredJson(redefined, 'data', stored, {}, true);
    Object.defineProperty(redefined, 'data', { value: 5, enumerable: true });
    expect(stringifyWithRaw(redefined)).toBe('{"data":5}');
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
