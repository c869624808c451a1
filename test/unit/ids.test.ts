import { describe, expect, it, vi } from 'vitest';

/**
 * `newId` remembers the last time it used (ids made after the clock stepped back still sort after
 * it), and test files share one module graph: each test takes a fresh copy, as a new process has,
 * so neither these tests nor the ids other files make depend on what ran before.
 */
async function freshNewId() {
  vi.resetModules();
  return (await import('../../src/ids.js')).newId;
}

describe('newId', () => {
  it('makes 24 hex digits that start with the time', async () => {
    const newId = await freshNewId();
    const id = newId(0x0194f2a1c3b2);
    expect(id).toMatch(/^0194f2a1c3b2[0-9a-f]{12}$/);
  });

  it('sorts ids made in the same millisecond, or after the clock stepped back, in the order they were made', async () => {
    const newId = await freshNewId();
    const ids = [newId(2_000_000_000_000), newId(2_000_000_000_000), newId(1_999_999_999_999), newId(2_000_000_000_000)];
    expect([...ids].sort()).toEqual(ids);
    expect(new Set(ids).size).toBe(4);
  });
});
