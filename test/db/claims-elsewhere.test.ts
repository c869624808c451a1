// A claim that leaves environments out (those at their share of the send slots) reads the others'
// due sends by environment (db/due-elsewhere.ts): it must take exactly what the plain query, which
// reads every due send in order and skips the left-out ones, would take, and must not read the
// left-out environments' backlog to do so.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type pg from 'pg';
import { createOrganization } from '../../src/db/repos/accounts.js';
import { insertRows } from '../../src/db/insert-rows.js';
import { claimDueJobs, DUE_SENDS_BY_ENVIRONMENT, jobRow, SEND_TYPES } from '../../src/db/repos/jobs.js';
import { waitingEnvironmentsSql } from '../../src/db/due-elsewhere.js';
import { claimDueDeliveries } from '../../src/db/repos/webhook-deliveries.js';
import { newId } from '../../src/ids.js';
import { createTestDb, testDatabaseUrl, type TestDb } from '../helpers/db.js';
import { recordQueries } from '../helpers/queries.js';
import { storedEventRow } from '../helpers/events.js';

let testDb: TestDb;
const environments: string[] = [];
let eventId: string;

beforeAll(async () => {
  testDb = await createTestDb();
  const { db } = testDb;
  for (const name of ['One', 'Two', 'Three']) {
    const { environmentIds } = await createOrganization(db, { name, plan: 'enterprise', environments: ['development', 'production'] });
    environments.push(environmentIds.development, environmentIds.production);
  }
  eventId = newId();
  const workflow = { id: newId(), workflowId: 'elsewhere', name: 'Elsewhere', critical: false, preferenceSettings: {}, steps: [] } as never;
  await insertRows(db, 'events', [await storedEventRow(db, { id: eventId, environmentId: environments[0], transactionId: 'elsewhere', workflow, payload: {}, overrides: {}, createdAt: new Date().toISOString() })]);
});
afterAll(async () => testDb?.close());

/** A small deterministic generator (the cases are the same on every run). */
function generator(seed: number): () => number {
  let state = seed;
  return () => {
    state = (state * 1_103_515_245 + 12_345) % 2_147_483_648;
    return state / 2_147_483_648;
  };
}
const pick = <T>(random: () => number, items: readonly T[]): T => items[Math.floor(random() * items.length)];

const JOB_TYPES = [...SEND_TYPES, 'in_app', 'delay', 'digest'];
const JOB_STATUSES = ['pending', 'queued', 'delayed', 'completed', 'failed', 'running'] as const;
const DUE_SEND = `status IN ('pending', 'queued', 'delayed') AND type IN (${SEND_TYPES.map((type) => `'${type}'`).join(', ')})`;

/** The left-out sets and limits a test tries: none of the first environment's, several, all but one, all. */
function cases(random: () => number): Array<{ excluded: string[]; limit: number }> {
  const found: Array<{ excluded: string[]; limit: number }> = [
    { excluded: [environments[0]], limit: 32 },
    { excluded: environments.slice(0, 5), limit: 10 },
    { excluded: [...environments], limit: 10 },
  ];
  // Limits under the number of environments too: then which environments' rows are read decides.
  for (let i = 0; i < 24; i++) {
    found.push({ excluded: environments.filter(() => random() < 0.4), limit: 1 + Math.floor(random() * (i % 2 ? 40 : 4)) });
  }
  return found.filter((c) => c.excluded.length > 0);
}

/** A table's claimable rows as the plain claim reads them, left-out environments skipped as it reads. */
interface Claimable {
  table: string;
  due: string;
  /** The lapsed part's order, and the column it sorts by beside the due rows' run_at. */
  lapsedOrder: string;
  lapsedRunAt: string;
  lapsedWhere: string;
}
const JOBS: Claimable = { table: 'jobs', due: DUE_SEND, lapsedOrder: 'lease_expires_at', lapsedRunAt: 'run_at', lapsedWhere: `type IN (${SEND_TYPES.map((t) => `'${t}'`).join(', ')})` };
const DELIVERIES: Claimable = { table: 'webhook_deliveries', due: `status = 'pending'`, lapsedOrder: 'lease_expires_at', lapsedRunAt: 'lease_expires_at', lapsedWhere: '1 = 1' };

/** The plain query: every due row in due order and every lapsed lease, those of the left-out environments skipped; the first `limit`. */
async function plainlyClaimable(of: Claimable, excluded: string[], now: Date, limit: number): Promise<string[]> {
  const at = now.toISOString();
  const due: Array<{ id: string; run_at: string }> = await testDb
    .db(of.table)
    .whereRaw(of.due)
    .where('run_at', '<=', at)
    .whereNotIn('environment_id', excluded)
    .orderBy([{ column: 'run_at' }, { column: 'id' }])
    .limit(limit)
    .select('id', 'run_at');
  const lapsed: Array<{ id: string; run_at: string }> = await testDb
    .db(of.table)
    .where('status', 'running')
    .where('lease_expires_at', '<', at)
    .whereRaw(of.lapsedWhere)
    .whereNotIn('environment_id', excluded)
    .orderBy([{ column: 'lease_expires_at' }, { column: 'id' }])
    .limit(limit)
    .select('id', { run_at: of.lapsedRunAt });
  return [...due, ...lapsed]
    .sort((a, b) => (a.run_at < b.run_at ? -1 : a.run_at > b.run_at ? 1 : a.id < b.id ? -1 : 1))
    .slice(0, limit)
    .map((row) => row.id);
}

/** Some running rows hold their lease, some have let it lapse (a worker that died): claimable too. */
function lease(random: () => number, status: string, now: Date) {
  if (status !== 'running') return {};
  return { lease_owner: 'someone', lease_expires_at: new Date(now.getTime() + (random() < 0.5 ? -1 : 1) * Math.floor(random() * 60) * 1000 - 1).toISOString() };
}

/** Puts claimed rows back as they were, for the next case. */
async function putBack(table: string, ids: string[], rows: Array<{ id: string; status: string; lease_owner?: string; lease_expires_at?: string }>): Promise<void> {
  const before = new Map(rows.map((row) => [row.id, row]));
  for (const id of ids) {
    const row = before.get(id)!;
    await testDb.db(table).where({ id }).update({ status: row.status, lease_owner: row.lease_owner ?? null, lease_expires_at: row.lease_expires_at ?? null });
  }
}

describe('a claim that leaves environments out', () => {
  it('takes the same jobs as the plain query, in the same order, and no job of a left-out environment', async () => {
    const { db } = testDb;
    await db('jobs').delete();
    const random = generator(7);
    const now = new Date();
    // One environment with a backlog ten times the others', as one at its share has.
    const rows = Array.from({ length: 600 }, (_, i) => {
      const status = pick(random, JOB_STATUSES);
      const row = jobRow(
        {
          environmentId: i < 300 ? environments[0] : pick(random, environments),
          eventId,
          notificationId: null,
          kind: 'step',
          stepIndex: 0,
          type: pick(random, JOB_TYPES),
          status,
          // Some due, some later; some at the same moment, so the id decides.
          runAt: new Date(now.getTime() + Math.floor((random() - 0.7) * 100) * 1000),
        },
        now,
      );
      return { ...row, ...lease(random, status, now) };
    });
    await insertRows(db, 'jobs', rows);
    let claimedSome = 0;
    for (const { excluded, limit } of cases(random)) {
      const expected = await plainlyClaimable(JOBS, excluded, now, limit);
      const claimed = await claimDueJobs(db, { owner: 'elsewhere', now, leaseMs: 60_000, limit, lane: 'send', excludeEnvironments: excluded });
      expect(claimed.map((job) => job.id)).toEqual(expected);
      claimedSome += claimed.length;
      await putBack('jobs', claimed.map((job) => job.id), rows);
    }
    expect(claimedSome).toBeGreaterThan(50);
  });

  it('takes the same webhook deliveries as the plain query', async () => {
    const { db } = testDb;
    await db('webhook_deliveries').delete();
    const random = generator(11);
    const now = new Date();
    const rows = Array.from({ length: 400 }, (_, i) => {
      const at = new Date(now.getTime() + Math.floor((random() - 0.7) * 100) * 1000).toISOString();
      const status = pick(random, ['pending', 'pending', 'running', 'succeeded', 'failed']);
      return {
        id: newId(),
        environment_id: i < 200 ? environments[0] : pick(random, environments),
        endpoint_id: 'ep_elsewhere',
        event_id: `msg_${i}`,
        event_type: 'message.delivered',
        payload: '{}',
        status,
        attempts: 0,
        manual: false,
        run_at: at,
        created_at: at,
        updated_at: at,
        ...lease(random, status, now),
      };
    });
    await insertRows(db, 'webhook_deliveries', rows);
    let claimedSome = 0;
    for (const { excluded, limit } of cases(random)) {
      const expected = await plainlyClaimable(DELIVERIES, excluded, now, limit);
      const claimed = await claimDueDeliveries(db, { owner: 'elsewhere', now, leaseMs: 60_000, limit, excludeEnvironments: excluded });
      // Deliveries come back in the order the claim updated them.
      expect(claimed.map((delivery) => delivery.id).sort()).toEqual([...expected].sort());
      claimedSome += claimed.length;
      await putBack('webhook_deliveries', claimed.map((delivery) => delivery.id), rows);
    }
    expect(claimedSome).toBeGreaterThan(50);
  });

  it('breaks a tie between two environments as the plain query does: by the sends\' ids, not the environments\'', async () => {
    const { db } = testDb;
    await db('jobs').delete();
    const now = new Date();
    const [low, high] = [environments[1], environments[2]].sort();
    const job = (environmentId: string, id: string) => ({
      ...jobRow({ environmentId, eventId, notificationId: null, kind: 'step', stepIndex: 0, type: 'chat', status: 'pending', runAt: new Date(now.getTime() - 1_000) }, now),
      id,
    });
    await insertRows(db, 'jobs', [job(low, 'z'.repeat(24)), job(high, 'a'.repeat(24))]);
    expect(await plainlyClaimable(JOBS, [environments[0]], now, 1)).toEqual(['a'.repeat(24)]);
    const claimed = await claimDueJobs(db, { owner: 'elsewhere', now, leaseMs: 60_000, limit: 1, lane: 'send', excludeEnvironments: [environments[0]] });
    expect(claimed.map((c) => c.id)).toEqual(['a'.repeat(24)]);
  });

  it('is for sends only', async () => {
    await expect(claimDueJobs(testDb.db, { owner: 'elsewhere', now: new Date(), leaseMs: 60_000, limit: 1, lane: 'control', excludeEnvironments: [environments[0]] })).rejects.toThrow(
      /A claim from jobs_due_control cannot leave environments out/,
    );
  });
});

/** A claim of sends leaving the first environment out: its read of the environments, and the claim. */
async function claimLeavingOut(): Promise<Array<{ sql: string; bindings: unknown[] }>> {
  const now = new Date();
  const recording = recordQueries(testDb.db, /./);
  await claimDueJobs(testDb.db, { owner: 'plans', now, leaseMs: 60_000, limit: 32, lane: 'send', excludeEnvironments: [environments[0]] });
  const sent = recording.stop();
  if (testDatabaseUrl()) {
    expect(sent).toHaveLength(2);
    return sent;
  }
  // On SQLite the read goes past knex (to the read connection), unseen: its text is rebuilt here.
  expect(sent).toHaveLength(1);
  return [{ sql: waitingEnvironmentsSql(testDb.db, DUE_SENDS_BY_ENVIRONMENT, 1), bindings: [environments[0], now.toISOString(), 32] }, sent[0]];
}

/** The first environment with a backlog of due sends, and another with one. */
async function backlog(): Promise<void> {
  const { db } = testDb;
  await db('jobs').delete();
  const now = new Date();
  const job = (environmentId: string, i: number) =>
    jobRow({ environmentId, eventId, notificationId: null, kind: 'step', stepIndex: 0, type: 'chat', status: 'pending', runAt: new Date(now.getTime() - 60_000 + i) }, now);
  await insertRows(db, 'jobs', [...Array.from({ length: 2_000 }, (_, i) => job(environments[0], i)), job(environments[1], 5_000)]);
}

describe.runIf(process.env.HERALD_TEST_DB === 'sqlite')('its plan on SQLite', () => {
  it('seeks from one environment to the next by the index of due sends by environment, reading no backlog in due order', async () => {
    await backlog();
    const steps: string[] = [];
    for (const { sql, bindings } of await claimLeavingOut()) {
      const plan = (await testDb.db.raw(`EXPLAIN QUERY PLAN ${sql}`, bindings as never[])) as Array<{ detail: string }>;
      steps.push(...plan.map((step) => step.detail));
    }
    const jobSteps = steps.filter((step) => / jobs\b/.test(step));
    // From one environment to the next, each one's earliest due send, and its first sends: all seeks.
    expect(jobSteps).toContainEqual(expect.stringMatching(/^SEARCH jobs USING (COVERING )?INDEX jobs_due_send_by_environment \(environment_id>\?\)/));
    expect(jobSteps).toContainEqual(expect.stringMatching(/^SEARCH jobs USING (COVERING )?INDEX jobs_due_send_by_environment \(environment_id=\? AND run_at<\?\)/));
    // The first environment is the index's first row (LIMIT 1): its one scan, which stops there.
    expect(jobSteps.filter((step) => /^SCAN jobs\b/.test(step))).toEqual([expect.stringMatching(/^SCAN jobs USING (COVERING )?INDEX jobs_due_send_by_environment$/)]);
    // Never the due sends in due order, which steps over the left-out backlog.
    expect(jobSteps.filter((step) => /jobs_due_send /.test(step))).toEqual([]);
  });
});

describe.runIf(testDatabaseUrl())('two claims at once on PostgreSQL', () => {
  it('take different jobs, both of them some, none of a left-out environment', async () => {
    const { db } = testDb;
    await db('jobs').delete();
    const now = new Date();
    const job = (environmentId: string, i: number) =>
      jobRow({ environmentId, eventId, notificationId: null, kind: 'step', stepIndex: 0, type: 'chat', status: 'pending', runAt: new Date(now.getTime() - 60_000 + i) }, now);
    await insertRows(db, 'jobs', [...Array.from({ length: 200 }, (_, i) => job(environments[0], i)), ...Array.from({ length: 100 }, (_, i) => job(environments[1 + (i % 3)], i))]);
    for (let round = 0; round < 5; round++) {
      const claim = (owner: string) => claimDueJobs(db, { owner, now, leaseMs: 60_000, limit: 8, lane: 'send', excludeEnvironments: [environments[0]] });
      const [first, second] = await Promise.all([claim('first'), claim('second')]);
      const ids = [...first, ...second].map((taken) => taken.id);
      expect(new Set(ids).size).toBe(ids.length);
      expect(first.length).toBeGreaterThan(0);
      expect(second.length).toBeGreaterThan(0);
      expect([...first, ...second].filter((taken) => taken.environmentId === environments[0])).toEqual([]);
    }
  });
});

describe.runIf(testDatabaseUrl())('its plan on PostgreSQL', () => {
  /** The plans PostgreSQL makes for the statements `claim` sends. */
  async function plansOf(claim: () => Promise<unknown>): Promise<string[]> {
    const recording = recordQueries(testDb.db, /./);
    await claim();
    const sent = recording.stop();
    expect(sent).toHaveLength(2);
    const connection = (await testDb.db.client.acquireConnection()) as pg.Client;
    try {
      const plans: string[] = [];
      for (const { sql, bindings } of sent) plans.push((await connection.query(`EXPLAIN ${sql}`, bindings)).rows.map((row: { 'QUERY PLAN': string }) => row['QUERY PLAN']).join('\n'));
      return plans;
    } finally {
      await testDb.db.client.releaseConnection(connection);
    }
  }

  it('reads the index of due sends by environment, and never the due sends in due order', async () => {
    await backlog();
    await testDb.db.raw('ANALYZE jobs');
    const [read, claim] = await plansOf(() => claimDueJobs(testDb.db, { owner: 'plans', now: new Date(), leaseMs: 60_000, limit: 32, lane: 'send', excludeEnvironments: [environments[0]] }));
    expect(read).toMatch(/Index (Only )?Scan using jobs_due_send_by_environment on jobs/);
    expect(read).not.toMatch(/Seq Scan on jobs|using jobs_due_send on jobs/);
    // How the claimed rows are then found by id is the planner's choice (query-plans.test.ts).
    expect(claim).toMatch(/Index (Only )?Scan using jobs_due_send_by_environment on jobs/);
    expect(claim).not.toMatch(/using jobs_due_send on jobs/);
  });

  it('reads the index of due webhook deliveries by environment, and never the due deliveries in due order', async () => {
    const { db } = testDb;
    await db('webhook_deliveries').delete();
    const now = new Date();
    const delivery = (environmentId: string, i: number) => {
      const at = new Date(now.getTime() - 60_000 + i).toISOString();
      return { id: newId(), environment_id: environmentId, endpoint_id: 'ep', event_id: `msg_${i}`, event_type: 'message.delivered', payload: '{}', status: 'pending', attempts: 0, manual: false, run_at: at, created_at: at, updated_at: at };
    };
    await insertRows(db, 'webhook_deliveries', [...Array.from({ length: 2_000 }, (_, i) => delivery(environments[0], i)), delivery(environments[1], 5_000)]);
    await db.raw('ANALYZE webhook_deliveries');
    const plans = await plansOf(() => claimDueDeliveries(db, { owner: 'plans', now, leaseMs: 60_000, limit: 32, excludeEnvironments: [environments[0]] }));
    for (const plan of plans) {
      expect(plan).toMatch(/Index (Only )?Scan using webhook_deliveries_due_by_environment on webhook_deliveries/);
      expect(plan).not.toMatch(/using webhook_deliveries_due on webhook_deliveries/);
    }
  });
});
