import { describe, expect, it } from 'vitest';
import { newId } from '../../src/ids.js';

describe('newId', () => {
  it('makes 24 hex digits that start with the time', () => {
    const id = newId(0x0194f2a1c3b2);
    expect(id).toMatch(/^0194f2a1c3b2[0-9a-f]{12}$/);
  });

  it('sorts ids made in the same millisecond, or after the clock stepped back, in the order they were made', () => {
    const ids = [newId(2_000_000_000_000), newId(2_000_000_000_000), newId(1_999_999_999_999), newId(2_000_000_000_000)];
    expect([...ids].sort()).toEqual(ids);
    expect(new Set(ids).size).toBe(4);
  });
});
