// PostgreSQL plans the statements a request makes by the rows it expects. A lookup by key that the
// planner turns into a scan of the environment costs nothing in a test with ten rows and grows with
// every subscriber in production, so these tests read the plan of the statement the code really
// sends, on an environment large enough for the planner to tell the two apart. SQLite's plans
// depend on the text more than on the rows: its test reads the plan of the text the code keeps.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type pg from 'pg';
import { createOrganization } from '../../src/db/repos/accounts.js';
import { findWorkflowWithSubscriberKeys, insertWorkflow } from '../../src/db/repos/workflows.js';
import { findSubscriber, SUBSCRIBER_BY_ID, subscriberKeys } from '../../src/db/repos/subscribers.js';
import { insertRows } from '../../src/db/insert-rows.js';
import { claimDueJobs, countOpenJobsByStatus, jobRow, jobsDue, OPEN_JOBS_BY_STATUS, queueDepth, QUEUE_DEPTH } from '../../src/db/repos/jobs.js';
import { newId } from '../../src/ids.js';
import { fanoutSlice, fanoutsOfTopic, OPEN_FANOUTS } from '../../src/db/repos/topics.js';
import { createTestDb, testDatabaseUrl, type TestDb } from '../helpers/db.js';
import { recordQueries } from '../helpers/queries.js';
import { storedEventRow } from '../helpers/events.js';

const SUBSCRIBERS = 2_000;
const JOBS = 5_000;

let testDb: TestDb;
let environmentId: string;
let topicId: string;
/** The subscribers' internal ids, in order: a topic of all of them is walked in this order. */
let memberKeys: string[];

beforeAll(async () => {
  testDb = await createTestDb();
  const { db } = testDb;
  const now = new Date();
  const { environmentIds } = await createOrganization(db, { name: 'Plans', plan: 'enterprise', environments: ['development'] });
  environmentId = environmentIds.development;
  await insertWorkflow(
    db,
    environmentId,
    'welcome',
    { name: 'Welcome', tags: [], active: true, critical: false, steps: [{ type: 'in_app', template: { content: 'Hi' } }] as never, preferenceSettings: {} as never },
    now,
  );
  const at = now.toISOString();
  const rows = Array.from({ length: SUBSCRIBERS }, (_, i) => ({ id: newId(), environment_id: environmentId, subscriber_id: `subscriber-${i}`, data: '{}', created_at: at, updated_at: at }));
  await insertRows(db, 'subscribers', rows);
  await db.raw('ANALYZE subscribers');
  topicId = newId();
  await insertRows(db, 'topics', [{ id: topicId, environment_id: environmentId, topic_key: 'everyone', name: 'Everyone', created_at: at, updated_at: at }]);
  await insertRows(db, 'topic_subscribers', rows.map((row) => ({ topic_id: topicId, subscriber_id: row.id, created_at: at })));
  await db.raw('ANALYZE topic_subscribers');
  memberKeys = rows.map((row) => row.id).sort();

  // A backlog of due jobs, analyzed, then all done: the statistics still say every job is due,
  // as they do on a server that analyzed the table while a backlog waited.
  const eventId = newId();
  const workflow = { id: newId(), workflowId: 'welcome', name: 'Welcome', critical: false, preferenceSettings: {}, steps: [] } as never;
  await insertRows(db, 'events', [await storedEventRow(db, { id: eventId, environmentId, transactionId: 'backlog', workflow, payload: {}, overrides: {}, createdAt: at })]);
  const jobs = Array.from({ length: JOBS }, () => jobRow({ environmentId, eventId, notificationId: null, kind: 'step', stepIndex: 0, type: 'in_app', status: 'pending', runAt: now }, now));
  await insertRows(db, 'jobs', jobs);
  await db.raw('ANALYZE jobs');
  await db('jobs').update({ status: 'completed' });
});
afterAll(async () => testDb?.close());

/** The claim a worker makes, with nothing due: answers the statement it sent. */
async function claimNothing() {
  const recording = recordQueries(testDb.db, /./);
  expect(await claimDueJobs(testDb.db, { owner: 'plans', now: new Date(), leaseMs: 60_000, limit: 500 })).toEqual([]);
  const sent = recording.stop();
  expect(sent).toHaveLength(1);
  return sent[0];
}

/** Runs `read`, and answers the plan PostgreSQL makes for the one statement it sent. */
async function planOf(read: () => Promise<unknown>): Promise<string> {
  const recording = recordQueries(testDb.db, /./);
  await read();
  const sent = recording.stop();
  expect(sent).toHaveLength(1);
  const connection = (await testDb.db.client.acquireConnection()) as pg.Client;
  try {
    const { rows } = await connection.query(`EXPLAIN ${sent[0].sql}`, sent[0].bindings);
    return rows.map((row: { 'QUERY PLAN': string }) => row['QUERY PLAN']).join('\n');
  } finally {
    await testDb.db.client.releaseConnection(connection);
  }
}

/** The lines of a plan under `header` (those indented deeper than it). */
function partOf(plan: string, header: string): string {
  const lines = plan.split('\n');
  const start = lines.findIndex((line) => line.trim() === header);
  expect(start).toBeGreaterThanOrEqual(0);
  const depth = lines[start].search(/\S/);
  const end = lines.findIndex((line, i) => i > start && line.search(/\S/) <= depth);
  return lines.slice(start + 1, end === -1 ? undefined : end).join('\n');
}

describe.runIf(testDatabaseUrl())('query plans on PostgreSQL', () => {
  it("looks a trigger's subscribers up by their index, not by scanning the environment", async () => {
    const read = () => findWorkflowWithSubscriberKeys(testDb.db, environmentId, 'welcome', ['subscriber-7', 'nobody']);
    const found = await read();
    expect(found.workflow?.workflowId).toBe('welcome');
    expect([...found.keys.keys()]).toEqual(['subscriber-7']);

    const plan = await planOf(read);
    expect(plan).not.toMatch(/Seq Scan on subscribers/);
    expect(plan).toMatch(/Index Cond: .*subscriber_id\)::text = ANY/);
  });

  it('looks a list of subscriberIds up by their index (inList), not by scanning the environment', async () => {
    const read = () => subscriberKeys(testDb.db, environmentId, ['subscriber-3', 'subscriber-9', 'nobody']);
    expect([...(await read()).keys()].sort()).toEqual(['subscriber-3', 'subscriber-9']);
    const plan = await planOf(read);
    expect(plan).not.toMatch(/Seq Scan on subscribers/);
    expect(plan).toMatch(/Index Cond: .*subscriber_id\)::text = ANY/);
  });

  it('looks a subscriber up by its index, with its channels', async () => {
    const read = () => findSubscriber(testDb.db, environmentId, 'subscriber-7');
    expect((await read())?.subscriberId).toBe('subscriber-7');
    const plan = await planOf(read);
    expect(plan).not.toMatch(/Seq Scan on subscribers/);
    expect(plan).toMatch(/Index Cond: .*subscriber_id\)::text = /);
  });

  it('claims jobs from their partial indexes in order, even when the statistics say every job is due', async () => {
    const plan = await planOf(claimNothing);
    // How the claimed rows are then found by id is the planner's choice (a scan, in a table this small).
    for (const [part, index] of [['CTE due', 'jobs_due'], ['CTE lapsed', 'jobs_leased']]) {
      const lines = partOf(plan, part);
      expect(lines).toMatch(new RegExp(`Index Scan using ${index} on jobs`));
      expect(lines).not.toMatch(/Seq Scan|Sort/);
    }
  });

  it("looks for due jobs in each lane's partial index in order, even when the statistics say every job is due", async () => {
    for (const [lane, index] of [['in_app', 'jobs_due_in_app'], ['control', 'jobs_due_control'], ['send', 'jobs_due_send']] as const) {
      const plan = await planOf(async () => expect(await jobsDue(testDb.db, lane, new Date())).toBe(false));
      expect(plan).toMatch(new RegExp(`Index (Only )?Scan using ${index} on jobs`));
      expect(plan).toMatch(/Index (Only )?Scan using jobs_leased on jobs/);
      expect(plan).not.toMatch(/Seq Scan|Sort/);
    }
  });

  it('plans every claim afresh, so no plan made for a smaller queue outlives it', async () => {
    // A statement kept prepared soon runs one generic plan, made for the table as it was then: one
    // made while the queue was nearly empty scanned every job on each claim once there were many.
    const kept = await testDb.db.transaction(async (trx) => {
      for (let i = 0; i < 8; i++) await claimDueJobs(trx, { owner: 'plans', now: new Date(), leaseMs: 60_000, limit: 500 });
      return (await trx.raw(`SELECT name FROM pg_prepared_statements WHERE statement LIKE 'WITH due AS%'`)).rows;
    });
    expect(kept).toEqual([]);
  });

  it("reads a fan-out batch's subscribers from the cursor on, not from the first one", async () => {
    const cursor = memberKeys[1_499];
    const read = () => fanoutSlice(testDb.db, { topicIds: [topicId], exclude: [], cursor });
    expect((await read()).members.map((member) => member.key)).toEqual(memberKeys.slice(1_500));
    // Every read of subscribers is bounded: by the cursor, or by the member it is joined to.
    const lines = (await planOf(read)).split('\n');
    const reads = lines.flatMap((line, i) => (/ on subscribers s\b/.test(line) ? [`${line}\n${lines[i + 1]}`] : []));
    expect(reads.length).toBeGreaterThan(0);
    for (const scan of reads) expect(scan).toMatch(/Index (Only )?Scan .*\n\s*Index Cond: /);
  });

  it('counts the queue for /metrics from the same partial indexes', async () => {
    // A count has no limit to stop its read early, so its plan follows the statistics: fresh ones here.
    await testDb.db.raw('ANALYZE jobs');
    const plan = await planOf(() => queueDepth(testDb.db, new Date()));
    expect(plan).not.toMatch(/Seq Scan on jobs/);
    expect(plan).toMatch(/Index Only Scan using jobs_due on jobs|Index Scan using jobs_due on jobs/);
    expect(plan).toMatch(/Index Only Scan using jobs_leased on jobs|Index Scan using jobs_leased on jobs/);
  });

  it("asks for a topic's open fan-outs through their own index, not the queue's", async () => {
    expect(await fanoutsOfTopic(testDb.db, environmentId, topicId)).toBe(0);
    const plan = await planOf(() => fanoutsOfTopic(testDb.db, environmentId, topicId));
    expect(plan).toMatch(/using jobs_open_fanouts on jobs/);
    expect(plan).not.toMatch(/Seq Scan on jobs/);
  });

  it('counts the jobs not yet done for /metrics from the same partial indexes, never the whole table', async () => {
    await testDb.db.raw('ANALYZE jobs');
    const plan = await planOf(() => countOpenJobsByStatus(testDb.db));
    expect(plan).not.toMatch(/Seq Scan on jobs/);
    expect(plan.match(/using jobs_due on jobs/g)).toHaveLength(3);
    expect(plan).toMatch(/using jobs_leased on jobs/);
  });
});

/** SQLite: the steps of the plan it makes for a text (EXPLAIN QUERY PLAN's details). */
async function sqlitePlanOf(sql: string, bindings: readonly unknown[]): Promise<string[]> {
  const plan = (await testDb.db.raw(`EXPLAIN QUERY PLAN ${sql}`, bindings as never[])) as Array<{ detail: string }>;
  return plan.map((step) => step.detail);
}

describe.runIf(process.env.HERALD_TEST_DB === 'sqlite')('query plans on SQLite', () => {
  it('looks a subscriber and its channels up by their indexes, scanning and copying no table', async () => {
    expect((await findSubscriber(testDb.db, environmentId, 'subscriber-7'))?.subscriberId).toBe('subscriber-7');
    const steps = await sqlitePlanOf(SUBSCRIBER_BY_ID, [environmentId, 'subscriber-7']);
    expect(steps.filter((step) => step.startsWith('SEARCH'))).toHaveLength(4);
    expect(steps.filter((step) => !step.startsWith('SEARCH') && step !== 'USE TEMP B-TREE FOR ORDER BY')).toEqual([]);
  });

  it("asks for a topic's open fan-outs through their own index, not the queue's", async () => {
    expect(await fanoutsOfTopic(testDb.db, environmentId, topicId)).toBe(0);
    expect(await sqlitePlanOf(OPEN_FANOUTS, [environmentId])).toEqual([expect.stringMatching(/^SEARCH jobs USING INDEX jobs_open_fanouts /)]);
  });

  it('claims jobs from their partial indexes, scanning no table', async () => {
    const claim = await claimNothing();
    const steps = await sqlitePlanOf(claim.sql, claim.bindings);
    expect(steps).toContainEqual(expect.stringMatching(/^SEARCH jobs USING INDEX jobs_due /));
    expect(steps).toContainEqual(expect.stringMatching(/^SEARCH jobs USING INDEX jobs_leased /));
    expect(steps.filter((step) => /^SCAN jobs\b/.test(step))).toEqual([]);
  });

  it('counts jobs for /metrics through indexes, scanning no table', async () => {
    // A count has no limit to stop its read early, so its plan follows the statistics: fresh ones here.
    await testDb.db.raw('ANALYZE jobs');
    const depth = await sqlitePlanOf(QUEUE_DEPTH, [new Date().toISOString()]);
    expect(depth.filter((step) => / jobs\b/.test(step))).toEqual([
      'SEARCH jobs USING COVERING INDEX jobs_status_run_at_index (status=? AND run_at<?)',
      'SEARCH jobs USING COVERING INDEX jobs_status_run_at_index (status=?)',
    ]);
    const open = await sqlitePlanOf(OPEN_JOBS_BY_STATUS, []);
    expect(open.filter((step) => / jobs\b/.test(step))).toEqual(Array(4).fill('SEARCH jobs USING COVERING INDEX jobs_status_run_at_index (status=?)'));
  });
});
