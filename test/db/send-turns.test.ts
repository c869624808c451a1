// reserveTurn: each send takes the next turn of every window it counts against, exactly once,
// however many workers (on PostgreSQL, connection pools) reserve at the same moment.
import { describe, expect, it } from 'vitest';
import { createDb } from '../../src/db/knex.js';
import { forgetFullWindows, reserveTurn, type TurnWindow } from '../../src/db/repos/send-turns.js';
import { useTestDb } from '../helpers/db.js';

const database = useTestDb({ emptied: ['send_turns'] });

const T0 = Date.parse('2026-11-25T10:00:00.000Z');
const perSecond = (scope: string, limit = 1): TurnWindow => ({ scope, limit, windowMs: 1000 });

describe('reserveTurn', () => {
  it('lets a full bucket go at once, then hands out turns one interval apart, per scope', async () => {
    const db = database.db;
    const burst = [];
    for (let i = 0; i < 6; i++) burst.push(await reserveTurn(db, [perSecond('teams', 4)], 1, T0));
    // Four at once (the bucket holds four), then one every 250 ms.
    expect(burst.map((at) => at - T0)).toEqual([0, 0, 0, 0, 250, 500]);
    // Another scope has a bucket of its own.
    expect(await reserveTurn(db, [perSecond('other')], 1, T0)).toBe(T0);
    // Later, the bucket has refilled.
    expect(await reserveTurn(db, [perSecond('teams', 4)], 1, T0 + 10_000)).toBe(T0 + 10_000);
  });

  it('takes the latest turn of all its windows, and takes it in each', async () => {
    const db = database.db;
    const windows = [perSecond('w', 4), { scope: 'w', limit: 6, windowMs: 30_000 }];
    const turns = [];
    for (let i = 0; i < 8; i++) turns.push((await reserveTurn(db, windows, 1, T0)) - T0);
    // Four at once (the one-second window), then 250 ms apart until the 30-second window's six are
    // spent; the seventh waits for that one (5 s an interval), the eighth 5 s after it.
    expect(turns).toEqual([0, 0, 0, 0, 250, 500, 5000, 10000]);
  });

  it('charges a send its cost, and lets a cost over the limit go once the bucket is full', async () => {
    const db = database.db;
    const expo = { scope: 'expo', limit: 600, windowMs: 1000 };
    expect(await reserveTurn(db, [expo], 500, T0)).toBe(T0);
    // 100 left: 300 more must wait for 200 to come back (at 0.6 a millisecond).
    expect(await reserveTurn(db, [expo], 300, T0)).toBe(T0 + 334);
    // 1,000 at once is more than the bucket holds: it waits until the bucket is full, then goes.
    expect(await reserveTurn(db, [expo], 1000, T0 + 334)).toBe(T0 + 1334);
  });

  it('keeps the fraction of a millisecond an interval under one leaves: 5,000 a second are 5 a millisecond', async () => {
    const db = database.db;
    const fast = { scope: 'fast', limit: 5000, windowMs: 1000 };
    expect(await reserveTurn(db, [fast], 5000, T0)).toBe(T0);
    const turns = [];
    for (let i = 0; i < 10; i++) turns.push((await reserveTurn(db, [fast], 1, T0)) - T0);
    expect(turns).toEqual([1, 1, 1, 1, 1, 2, 2, 2, 2, 2]);
  });

  it('gives each of many simultaneous reservations its own turn', async () => {
    const db = database.db;
    // A second pool on the same database, as a second worker process has (PostgreSQL only: one
    // process writes a SQLite database at a time).
    const second = database.testDb.schema ? createDb(database.testDb.url, { schema: database.testDb.schema }) : db;
    try {
      const turns = await Promise.all(Array.from({ length: 20 }, (_, i) => reserveTurn(i % 2 ? second : db, [perSecond('slack'), perSecond('integration', 50)], 1, T0)));
      expect(turns.map((at) => at - T0).sort((a, b) => a - b)).toEqual(Array.from({ length: 20 }, (_, i) => i * 1000));
    } finally {
      if (second !== db) await second.destroy();
    }
  });

  it('forgets windows whose buckets are full, which changes no turn', async () => {
    const db = database.db;
    await reserveTurn(db, [perSecond('old')], 1, T0);
    await reserveTurn(db, [perSecond('busy')], 1, T0 + 60_000);
    await forgetFullWindows(db, T0 + 30_000);
    expect(Number((await db('send_turns').count({ n: '*' }).first())!.n)).toBe(1);
    expect(await reserveTurn(db, [perSecond('old')], 1, T0 + 30_000)).toBe(T0 + 30_000);
  });
});
