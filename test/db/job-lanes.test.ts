// The runner's three lanes (sends, in-app, control steps) claim from partial indexes of their own
// (migrations 50 and of 2026-12-06): no lane's claim reads past another's backlog, and a send claim
// can pass over environments whose share of the slots is taken.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type pg from 'pg';
import { createOrganization } from '../../src/db/repos/accounts.js';
import { insertRows } from '../../src/db/insert-rows.js';
import { claimDueJobs, jobRow, jobsDue, type JobLane } from '../../src/db/repos/jobs.js';
import { newId } from '../../src/ids.js';
import { createTestDb, testDatabaseUrl, type TestDb } from '../helpers/db.js';
import { recordQueries } from '../helpers/queries.js';
import { storedEventRow } from '../helpers/events.js';

let testDb: TestDb;
let environments: string[];
let eventId: string;

beforeAll(async () => {
  testDb = await createTestDb();
  const { db } = testDb;
  const { environmentIds } = await createOrganization(db, { name: 'Lanes', plan: 'enterprise', environments: ['development', 'production'] });
  environments = [environmentIds.development, environmentIds.production];
  eventId = newId();
  const workflow = { id: newId(), workflowId: 'lanes', name: 'Lanes', critical: false, preferenceSettings: {}, steps: [] } as never;
  await insertRows(db, 'events', [await storedEventRow(db, { id: eventId, environmentId: environments[0], transactionId: 'lanes', workflow, payload: {}, overrides: {}, createdAt: new Date().toISOString() })]);
});
afterAll(async () => testDb?.close());

/** Due jobs of these types, oldest first in the order given, in the first environment unless named. */
async function queue(types: Array<string | [string, number]>) {
  const now = Date.now();
  const rows = types.map((entry, i) => {
    const [type, environment] = typeof entry === 'string' ? [entry, 0] : entry;
    return jobRow({ environmentId: environments[environment], eventId, notificationId: null, kind: type === 'fanout' ? 'fanout' : 'step', stepIndex: 0, type, status: 'pending', runAt: new Date(now - 60_000 + i) }, new Date(now));
  });
  await insertRows(testDb.db, 'jobs', rows);
  return rows.map((row) => row.id);
}

const claim = (lane: JobLane, limit: number, excludeEnvironments?: string[]) =>
  claimDueJobs(testDb.db, { owner: `lanes-${lane}`, now: new Date(), leaseMs: 60_000, limit, lane, excludeEnvironments });

describe('claiming by lane', () => {
  it('takes sends, in-app work and control steps apart, each in due order, and leaves the other lanes alone', async () => {
    await testDb.db('jobs').delete();
    const ids = await queue(['chat', 'email', 'in_app', 'sms', 'delay', 'push', 'digest', 'fanout', 'in_app', 'throttle']);
    expect((await claim('control', 10)).map((job) => job.id)).toEqual([ids[4], ids[6], ids[7], ids[9]]);
    expect((await claim('in_app', 10)).map((job) => job.id)).toEqual([ids[2], ids[8]]);
    const sends = await claim('send', 2);
    expect(sends.map((job) => job.id)).toEqual([ids[0], ids[1]]);
    expect((await claim('send', 10)).map((job) => job.type)).toEqual(['sms', 'push']);
    expect(await claim('control', 10)).toEqual([]);
    expect(await claim('in_app', 10)).toEqual([]);
  });

  it('passes over the environments it is told to', async () => {
    await testDb.db('jobs').delete();
    const ids = await queue([['chat', 0], ['chat', 0], ['chat', 1]]);
    expect((await claim('send', 10, [environments[0]])).map((job) => job.id)).toEqual([ids[2]]);
    expect((await claim('send', 10)).map((job) => job.id)).toEqual([ids[0], ids[1]]);
  });
});

describe('looking before claiming', () => {
  it('says a lane has work exactly when its claim would find some: due, or its lease ran out', async () => {
    const db = testDb.db;
    await db('jobs').delete();
    const now = new Date();
    const lanes = (at: Date) => Promise.all((['in_app', 'control', 'send'] as const).map((lane) => jobsDue(db, lane, at)));
    expect(await lanes(now)).toEqual([false, false, false]);
    const [chat] = await queue(['chat']);
    expect(await lanes(now)).toEqual([false, false, true]);
    await db('jobs').where({ id: chat }).update({ run_at: new Date(now.getTime() + 60_000).toISOString() });
    expect(await jobsDue(db, 'send', now)).toBe(false);
    const [inApp] = await queue(['in_app']);
    expect(await lanes(now)).toEqual([true, false, false]);
    const [delay] = await queue(['delay']);
    expect(await lanes(now)).toEqual([true, true, false]);
    // Claimed under a lease: not due again until the lease has run out.
    expect((await claim('in_app', 10)).map((job) => job.id)).toEqual([inApp]);
    expect((await claim('control', 10)).map((job) => job.id)).toEqual([delay]);
    expect(await lanes(now)).toEqual([false, false, false]);
    const later = new Date(now.getTime() + 61_000);
    expect(await lanes(later)).toEqual([true, true, true]);
    await db('jobs').update({ status: 'completed', lease_owner: null, lease_expires_at: null });
    expect(await lanes(later)).toEqual([false, false, false]);
  });
});

describe.runIf(testDatabaseUrl())('lane claims on PostgreSQL', () => {
  it("read their lane's partial index in order", async () => {
    await testDb.db('jobs').delete();
    await queue(Array.from({ length: 3_000 }, (_, i) => ['chat', 'in_app', 'delay'][i % 3]));
    await testDb.db.raw('ANALYZE jobs');
    await testDb.db('jobs').update({ status: 'completed' });
    for (const [lane, index] of [['send', 'jobs_due_send'], ['in_app', 'jobs_due_in_app'], ['control', 'jobs_due_control']] as const) {
      const recording = recordQueries(testDb.db, /./);
      await claim(lane, 100);
      const [sent] = recording.stop();
      const connection = (await testDb.db.client.acquireConnection()) as pg.Client;
      try {
        const { rows } = await connection.query(`EXPLAIN ${sent.sql}`, sent.bindings);
        const plan = rows.map((row: { 'QUERY PLAN': string }) => row['QUERY PLAN']).join('\n');
        expect(plan).toMatch(new RegExp(`Index (Only )?Scan using ${index} on jobs`));
      } finally {
        await testDb.db.client.releaseConnection(connection);
      }
    }
  });
});
