// countThrottleHit: one upsert counts each hit exactly once, however many transactions (and, on
// PostgreSQL, however many connection pools, as separate workers have) count the same key at once;
// a hit after the window ended opens a new one.
import { describe, expect, it } from 'vitest';
import { createDb, type Db } from '../../src/db/knex.js';
import { createOrganization } from '../../src/db/repos/accounts.js';
import { countThrottleHit } from '../../src/db/repos/throttles.js';
import { useTestDb } from '../helpers/db.js';

const database = useTestDb({ emptied: ['throttle_windows'] });

async function environment(db: Db): Promise<string> {
  const { environmentIds } = await createOrganization(db, { name: 'throttled', plan: 'enterprise', environments: ['development'] });
  return environmentIds.development;
}

const count = (db: Db, key: string, environmentId: string, now: Date, windowMs = 60_000) =>
  db.transaction((trx) => countThrottleHit(trx, { key, environmentId, windowEndsAt: new Date(now.getTime() + windowMs) }, now));

describe('countThrottleHit', () => {
  it('opens a window with the first hit and counts the next ones in it, until it ends', async () => {
    const db = database.db;
    const environmentId = await environment(db);
    const t0 = new Date('2026-11-25T10:00:00.000Z');
    expect(await count(db, 'k', environmentId, t0)).toEqual({ hits: 1, endsAt: '2026-11-25T10:01:00.000Z' });
    // A later hit does not move the window's end.
    expect(await count(db, 'k', environmentId, new Date('2026-11-25T10:00:30.000Z'))).toEqual({ hits: 2, endsAt: '2026-11-25T10:01:00.000Z' });
    expect(await count(db, 'other', environmentId, t0)).toEqual({ hits: 1, endsAt: '2026-11-25T10:01:00.000Z' });
    // At its end the window is over: the next hit opens a new one.
    expect(await count(db, 'k', environmentId, new Date('2026-11-25T10:01:00.000Z'))).toEqual({ hits: 1, endsAt: '2026-11-25T10:02:00.000Z' });
  });

  it('counts each of many simultaneous hits once', async () => {
    const db = database.db;
    const environmentId = await environment(db);
    const now = new Date();
    // A second pool on the same database, as a second worker process has (PostgreSQL only: a
    // SQLite database has one process).
    const second = database.testDb.schema ? createDb(database.testDb.url, { schema: database.testDb.schema }) : db;
    try {
      const hits = await Promise.all(Array.from({ length: 24 }, (_, i) => count(i % 2 ? second : db, 'same', environmentId, now)));
      expect(hits.map((w) => w.hits).sort((a, b) => a - b)).toEqual(Array.from({ length: 24 }, (_, i) => i + 1));
      expect(new Set(hits.map((w) => w.endsAt)).size).toBe(1);
    } finally {
      if (second !== db) await second.destroy();
    }
  });

  it('counts nothing when the transaction that counted rolls back', async () => {
    const db = database.db;
    const environmentId = await environment(db);
    const now = new Date();
    await expect(
      db.transaction(async (trx) => {
        await countThrottleHit(trx, { key: 'undone', environmentId, windowEndsAt: new Date(now.getTime() + 60_000) }, now);
        throw new Error('rolled back');
      }),
    ).rejects.toThrow('rolled back');
    expect((await count(db, 'undone', environmentId, now)).hits).toBe(1);
  });
});
