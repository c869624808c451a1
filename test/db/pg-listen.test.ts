// PostgreSQL's LISTEN connection (db/pg-listen.ts): the channels of one database handle share one
// connection, each listener hears its own channel, a dropped connection is reopened and every
// listener told it may have missed something, the connection ends with its last listener, and a
// later listener opens a new one.
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { createDb } from '../../src/db/knex.js';
import { listenOn, type ChannelListener } from '../../src/db/pg-listen.js';
import { testDatabaseUrl, useTestDb } from '../helpers/db.js';

const shared = useTestDb();

function recorder() {
  const heard: string[] = [];
  let missed = 0;
  const listener: ChannelListener = { heard: (payload) => heard.push(payload), missed: () => missed++, error: () => undefined };
  return { listener, heard, missed: () => missed };
}

describe.runIf(testDatabaseUrl())('the LISTEN connection', () => {
  it('is one for all channels of a database handle, reopened when it drops, and ends with its last listener', async () => {
    const prefix = `herald_test_${randomBytes(4).toString('hex')}`;
    const [first, second] = [`${prefix}_a`, `${prefix}_b`];
    const { testDb } = shared;
    const db = createDb(testDb.url, { schema: testDb.schema });
    const a = recorder();
    const b = recorder();
    const listeningA = listenOn(db, first, a.listener);
    const listeningB = listenOn(db, second, b.listener);
    /** The backends whose last statement LISTENed on one of this test's channels. */
    const listeners = async (): Promise<number[]> =>
      (await testDb.db.raw(`SELECT pid FROM pg_stat_activity WHERE query LIKE ?`, [`LISTEN ${prefix}%`])).rows.map((row: { pid: number }) => row.pid);
    const notify = (channel: string, payload: string) => testDb.db.raw('SELECT pg_notify(?, ?)', [channel, payload]);
    try {
      await Promise.all([listeningA.opened, listeningB.opened]);
      expect(await listeners()).toHaveLength(1);
      await notify(first, 'one');
      await notify(second, 'two');
      await expect.poll(() => [a.heard, b.heard], { timeout: 5000 }).toEqual([['one'], ['two']]);

      // Dropped: both are told, and both hear again on the reopened connection.
      const missedBefore = [a.missed(), b.missed()];
      const [pid] = await listeners();
      await testDb.db.raw('SELECT pg_terminate_backend(?)', [pid]);
      await expect.poll(async () => (await listeners()).filter((other) => other !== pid).length, { timeout: 5000 }).toBe(1);
      await expect.poll(() => [a.missed() > missedBefore[0], b.missed() > missedBefore[1]], { timeout: 5000 }).toEqual([true, true]);
      await notify(first, 'three');
      await notify(second, 'four');
      await expect.poll(() => [a.heard, b.heard], { timeout: 5000 }).toEqual([['one', 'three'], ['two', 'four']]);

      // One closed: the other still hears; both closed: the connection ends.
      await listeningA.close();
      await notify(first, 'five');
      await notify(second, 'six');
      await expect.poll(() => b.heard, { timeout: 5000 }).toEqual(['two', 'four', 'six']);
      expect(a.heard).toEqual(['one', 'three']);
      await listeningB.close();
      await expect.poll(listeners, { timeout: 5000 }).toEqual([]);

      // Listened on again through the same handle: a new connection LISTENs afresh.
      const again = recorder();
      const listeningAgain = listenOn(db, first, again.listener);
      try {
        await listeningAgain.opened;
        await notify(first, 'seven');
        await expect.poll(() => again.heard, { timeout: 5000 }).toEqual(['seven']);
      } finally {
        await listeningAgain.close();
      }
    } finally {
      await listeningA.close();
      await listeningB.close();
      await db.destroy();
    }
  });
});
