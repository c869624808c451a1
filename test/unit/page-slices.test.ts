// A page's rows are made wire objects a slice of about SLICE_CHARS characters at a time, with a
// turn of the event loop between slices that ran long; a page of small rows is one call.
import { describe, expect, it } from 'vitest';
import { groupsOf, SLICE_CHARS, slicesByText } from '../../src/db/chunks.js';
import { toWireInSlices } from '../../src/db/paginate.js';
import { countTurns } from '../helpers/turns.js';

const row = (id: number, chars: number) => ({ id: String(id), text: 'x'.repeat(chars), n: 1 });

describe('slicesByText', () => {
  it('keeps small rows in one slice, cuts large ones into slices of about SLICE_CHARS, and gives an oversized row a slice of its own', () => {
    expect(slicesByText([row(1, 10), row(2, 10)])).toHaveLength(1);
    const half = SLICE_CHARS / 2 - 10;
    const slices = slicesByText([row(1, half), row(2, half), row(3, half), row(4, 3 * SLICE_CHARS), row(5, 10)]);
    expect(slices.map((slice) => slice.map((r) => r.id))).toEqual([['1', '2'], ['3'], ['4'], ['5']]);
    expect(slicesByText([])).toEqual([]);
  });
});

describe('groupsOf', () => {
  it('closes a group at its weight budget or its most items, whichever comes first', () => {
    const weights = [3, 3, 3, 1, 1, 1, 1, 9, 1];
    expect(groupsOf(weights, (w) => w, 6, 3)).toEqual([[3, 3], [3, 1, 1], [1, 1], [9], [1]]);
  });
});

describe('toWireInSlices', () => {
  it('maps a page of small rows in one call', async () => {
    const calls: number[] = [];
    const wire = await toWireInSlices([row(1, 10), row(2, 10)], (rows) => (calls.push(rows.length), rows.map((r) => r.id)));
    expect(wire).toEqual(['1', '2']);
    expect(calls).toEqual([2]);
  });

  it('maps large rows a slice at a time, in order, letting the event loop turn between slices that run long', async () => {
    const rows = Array.from({ length: 6 }, (_, i) => row(i, SLICE_CHARS));
    const turns = countTurns();
    const calls: number[] = [];
    const wire = await toWireInSlices(rows, (slice) => {
      calls.push(slice.length);
      const until = performance.now() + 15; // longer than a turn's budget
      while (performance.now() < until);
      return slice.map((r) => r.id);
    });
    expect(turns.stop()).toBeGreaterThanOrEqual(5);
    expect(wire).toEqual(['0', '1', '2', '3', '4', '5']);
    expect(calls).toEqual([1, 1, 1, 1, 1, 1]);
  });
});
