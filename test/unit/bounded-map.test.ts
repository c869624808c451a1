import { describe, expect, it } from 'vitest';
import { BoundedMap } from '../../src/bounded-map.js';

describe('BoundedMap', () => {
  it('holds at most its limit, the oldest key pushed out first', () => {
    const map = new BoundedMap<string, number>(3);
    for (const [i, key] of ['a', 'b', 'c', 'd', 'e'].entries()) map.set(key, i);
    expect([...map.entries()]).toEqual([
      ['c', 2],
      ['d', 3],
      ['e', 4],
    ]);
  });

  it('counts a key set again as new, and pushes nothing out for it', () => {
    const map = new BoundedMap<string, number>(3);
    map.set('a', 1).set('b', 2).set('c', 3);
    map.set('a', 10);
    expect([...map.keys()]).toEqual(['b', 'c', 'a']);
    map.set('d', 4);
    expect([...map.entries()]).toEqual([
      ['c', 3],
      ['a', 10],
      ['d', 4],
    ]);
  });

  it('with a budget, holds no more weight than it, pushing out the oldest, and keeps no key heavier than all of it', () => {
    const map = new BoundedMap<string, number>(100, { total: 10, weigh: (key) => key.length });
    map.set('aaaa', 1).set('bbbb', 2);
    map.set('cccc', 3);
    expect([...map.keys()]).toEqual(['bbbb', 'cccc']);
    map.set('dddddddddd', 4);
    expect([...map.keys()]).toEqual(['dddddddddd']);
    map.set('e'.repeat(11), 5);
    expect(map.has('e'.repeat(11))).toBe(false);
    expect([...map.keys()]).toEqual(['dddddddddd']);
    // Deleting and clearing give their weight back.
    map.delete('dddddddddd');
    map.set('ff', 6).set('gggg', 7).set('hhhh', 8);
    expect([...map.keys()]).toEqual(['ff', 'gggg', 'hhhh']);
    map.clear();
    map.set('iiiiiiiiii', 9);
    expect([...map.keys()]).toEqual(['iiiiiiiiii']);
  });

  it('refuses a limit that would bound nothing', () => {
    for (const limit of [0, -1, 1.5, Number.NaN]) expect(() => new BoundedMap(limit)).toThrow(RangeError);
  });

  it('is a Map: get, has, delete and clear as usual', () => {
    const map = new BoundedMap<string, number>(2);
    map.set('a', 1);
    expect(map).toBeInstanceOf(Map);
    expect(map.get('a')).toBe(1);
    expect(map.delete('a')).toBe(true);
    expect(map.has('a')).toBe(false);
    map.set('b', 2).set('c', 3);
    expect(map.clears).toBe(0);
    map.clear();
    expect(map.size).toBe(0);
    expect(map.clears).toBe(1);
  });
});
