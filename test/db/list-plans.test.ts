// Every list of the API reads its page and counts its total through indexes, on an environment
// large enough for the planners to tell an index from a scan (written straight into the database,
// scripts/bench/large-data.ts). A list that scans the notifications table (or the subscribers,
// messages or memberships it lists) costs nothing in a test with ten rows and hundreds of
// milliseconds a million rows: each statement a list sends is planned here and fails on a scan.
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDb, migrate, type Db } from '../../src/db/knex.js';
import { KEPT_FACETS, listNotifications, notificationStats, type NotificationFilters } from '../../src/db/repos/notifications.js';
import { listSubscribers } from '../../src/db/repos/subscribers.js';
import { findTopicRow, listMembers, listTopics } from '../../src/db/repos/topics.js';
import { listMessages } from '../../src/db/repos/messages.js';
import { analyzeLarge, LARGE_WORKFLOWS, seedLarge, type LargeData } from '../../scripts/bench/large-data.js';
import { createTestDb, testDatabaseUrl, type TestDb } from '../helpers/db.js';
import { recordQueries, type RecordedQuery } from '../helpers/queries.js';

const NOTIFICATIONS = 30_000;
const OTHERS = 10_000;
const SUBSCRIBERS = 3_000;

const postgres = testDatabaseUrl() !== undefined;
let testDb: TestDb | undefined;
let db: Db;
let data: LargeData;

beforeAll(async () => {
  if (postgres) {
    testDb = await createTestDb();
    db = testDb.db;
  } else {
    // In memory, every statement goes through knex, where recordQueries sees it; the plans are the file's.
    db = createDb('sqlite::memory:');
    await migrate(db);
  }
  // SQLite's planner first without statistics, as a Herald server's file has none (it never runs
  // ANALYZE), then with them; PostgreSQL's autovacuum gathers them, so it is planned with them.
  data = await seedLarge(db, { notifications: NOTIFICATIONS, subscribers: SUBSCRIBERS, others: OTHERS, analyze: postgres });
}, 120_000);
afterAll(async () => {
  if (testDb) await testDb.close();
  else await db?.destroy();
});

/** A page as the API asks for it: with the answer's reservation of memory, whose measure of the page's large values is planned too. */
const asked = (page: number) => ({ page, limit: 10, reserve: async () => undefined });

/** The tables a list reads from, by their names and aliases: none may be scanned. */
const LISTED = /\b(notifications|n|subscribers|s|messages|topic_subscribers|ts)\b/;

async function planOf(query: RecordedQuery): Promise<string[]> {
  if (postgres) {
    // The statement as sent, with its $n placeholders, on a connection of the pool.
    // PostgreSQL reads a small table (or most of one) faster than its index, and plans so at this
    // size; told to avoid scans, it plans one only when no index can answer the statement at all.
    const connection = (await db.client.acquireConnection()) as pg.Client;
    try {
      await connection.query('BEGIN');
      await connection.query('SET LOCAL enable_seqscan = off');
      const { rows } = await connection.query(`EXPLAIN ${query.sql}`, query.bindings as unknown[]);
      return rows.map((row: { 'QUERY PLAN': string }) => row['QUERY PLAN']);
    } finally {
      await connection.query('ROLLBACK');
      await db.client.releaseConnection(connection);
    }
  }
  const steps = (await db.raw(`EXPLAIN QUERY PLAN ${query.sql}`, query.bindings as never[])) as Array<{ detail: string }>;
  return steps.map((step) => step.detail);
}

/** The scans in a plan of any listed table (a SCAN on SQLite, a Seq Scan on PostgreSQL). */
function scansIn(plan: string[]): string[] {
  return plan.filter((step) => LISTED.test((postgres ? /Seq Scan on (\w+)/.exec(step)?.[1] : /^SCAN (\w+)/.exec(step)?.[1]) ?? ''));
}

/** Runs a list, and answers each statement it sent with its plan. */
async function plansOf(list: () => Promise<unknown>): Promise<Array<{ sql: string; plan: string[] }>> {
  const recording = recordQueries(db, /^select/i);
  await list();
  const sent = recording.stop();
  expect(sent.length).toBeGreaterThan(0);
  return Promise.all(sent.map(async (query) => ({ sql: query.sql, plan: await planOf(query) })));
}

async function expectNoScan(list: () => Promise<unknown>) {
  for (const { sql, plan } of await plansOf(list)) {
    expect({ sql, scans: scansIn(plan) }).toEqual({ sql, scans: [] });
    // Nor a sort of every matching row to find a page: the index gives the order.
    if (!postgres && /from [`"]notifications[`"]/.test(sql) && !/transaction_id/.test(sql)) {
      expect({ sql, plan }).toEqual({ sql, plan: plan.filter((step) => !step.includes('TEMP B-TREE')) });
    }
  }
}

function checkEveryList() {
  it('lists notifications, first page and deep, unfiltered, with their exact total from the kept count', async () => {
    const first = await listNotifications(db, data.environmentId, asked(0), {});
    expect(first.totalCount).toBe(NOTIFICATIONS);
    expect(first.data).toHaveLength(10);
    const deep = await listNotifications(db, data.environmentId, asked(2_000), {});
    expect(deep.data.map((n) => n.notificationId)).toHaveLength(10);
    expect(deep.data[0].createdAt <= first.data[9].createdAt).toBe(true);
    await expectNoScan(() => listNotifications(db, data.environmentId, asked(0), {}));
    await expectNoScan(() => listNotifications(db, data.environmentId, asked(2_000), {}));
  });

  // Each filter, and the index its reads must go through: one of the environment's whole index
  // would walk every notification of the environment to find the few that pass.
  const filters: Array<[string, NotificationFilters, RegExp]> = [
    ['status failed', { status: 'failed' }, /notifications_status/],
    // Most notifications pass this one: PostgreSQL may count them through the environment's index
    // as well (not a scan of the table: expectNoScan still holds), so either index will do there.
    ['status completed', { status: 'completed' }, postgres ? /notifications_status|notifications_environment_id/ : /notifications_status/],
    ['a workflow', { workflowId: 'alert' }, /notifications_workflow/],
    ['a subscriber', { subscriberId: 'subscriber-7' }, /notifications_subscriber/],
    ['a transaction', { transactionId: 'newest' }, /transaction_id/],
    ['created after', { createdAfter: new Date(Date.now() - 86_400_000).toISOString() }, /created_at ?>/],
    ...LARGE_WORKFLOWS.flatMap((w) => w.channels)
      .filter((c, i, all) => all.indexOf(c) === i)
      .map((channel): [string, NotificationFilters, RegExp] => [`channel ${channel}`, { channel: channel as never }, new RegExp(`notifications_channel_${channel}`)]),
    ['status and workflow', { status: 'failed', workflowId: 'receipt' }, /notifications_status|notifications_workflow/],
  ];
  for (const [name, filter, index] of filters) {
    it(`filters notifications by ${name} through an index, counting exactly`, async () => {
      if (filter.transactionId) filter.transactionId = data.transactionId;
      const page = await listNotifications(db, data.environmentId, asked(1), filter);
      // The exact total, as a plain count over the table says.
      const plain = db('notifications').where('environment_id', data.environmentId);
      if (filter.status) plain.where('status', filter.status);
      if (filter.workflowId) plain.where('workflow_key', filter.workflowId);
      if (filter.subscriberId) plain.where('subscriber_id', filter.subscriberId);
      if (filter.transactionId) plain.where('transaction_id', filter.transactionId);
      if (filter.createdAfter) plain.where('created_at', '>=', filter.createdAfter);
      if (filter.channel) plain.where('channels', 'like', `%"${filter.channel}"%`);
      const [{ n }] = await plain.count({ n: '*' });
      expect(page.totalCount).toBe(Number(n));
      expect(Number(n)).toBeGreaterThan(0);
      await expectNoScan(() => listNotifications(db, data.environmentId, asked(1), filter));
      // The count and the page's ids (not the read of the page's rows by id) go through the filter's
      // index; one status, channel or workflow alone takes its total from the kept counts instead.
      const filtered = (await plansOf(() => listNotifications(db, data.environmentId, asked(0), filter))).filter(({ sql }) => !/n[`"]?\.[`"]?id[`"]? in/i.test(sql));
      expect(filtered).toHaveLength(2);
      const kept = Object.keys(filter).length === 1 && Object.keys(filter)[0] in KEPT_FACETS;
      expect(filtered.some(({ sql }) => sql.includes('notification_facet_counts'))).toBe(kept);
      // (PostgreSQL may read a page by walking the environment's index in order instead, for a
      // filter most rows pass; its count still goes through the filter's index.)
      for (const { sql, plan } of filtered) {
        if (sql.includes('notification_facet_counts')) continue;
        if (postgres && !/count\(\*\)/.test(sql)) continue;
        expect({ sql, plan: plan.join('\n') }).toEqual({ sql, plan: expect.stringMatching(index) });
      }
    });
  }

  it('answers the stats from kept totals and one hour of rows a window, exactly, without scanning', async () => {
    const now = new Date();
    const stats = await notificationStats(db, data.environmentId, now);
    const since = (days: number) => new Date(now.getTime() - days * 86_400_000).toISOString();
    const plain = () => db('notifications').where('environment_id', data.environmentId);
    const count = async (query: ReturnType<typeof plain>) => Number((await query.count({ n: '*' }))[0].n);
    expect(stats.weeklySent).toBe(await count(plain().where('created_at', '>=', since(7))));
    expect(stats.monthlySent).toBe(await count(plain().where('created_at', '>=', since(30))));
    expect(stats.monthlySent).toBeGreaterThan(stats.weeklySent);
    expect(stats.byStatus.completed).toBe(await count(plain().where('status', 'completed')));
    expect(stats.byChannel.email).toBe(await count(plain().where('channels', 'like', '%"email"%')));
    await expectNoScan(() => notificationStats(db, data.environmentId, now));
    // It reads notifications only in the hour each window starts in: bounded on both sides.
    const [{ plan }] = await plansOf(() => notificationStats(db, data.environmentId, now));
    const reads = postgres ? plan.filter((step) => /Index Cond: .*created_at/.test(step)) : plan.filter((step) => /SEARCH notifications /.test(step));
    expect(reads).toHaveLength(2);
    for (const read of reads) expect(read).toMatch(postgres ? /created_at >= .*created_at < / : /created_at>\? AND created_at<\?/);
  });

  it('lists subscribers, topics, a topic’s members and a subscriber’s messages without scanning', async () => {
    expect((await listSubscribers(db, data.environmentId, asked(5))).totalCount).toBe(SUBSCRIBERS);
    await expectNoScan(() => listSubscribers(db, data.environmentId, asked(5)));
    await expectNoScan(() => listTopics(db, data.environmentId, asked(0)));
    const topic = await findTopicRow(db, data.environmentId, data.topicKey);
    expect((await listMembers(db, topic!.id, asked(3))).totalCount).toBe(SUBSCRIBERS);
    await expectNoScan(() => listMembers(db, topic!.id, asked(3)));
    await expectNoScan(() => listMessages(db, data.subscriberKey, asked(0), { read: false }));
  });
}

describe.runIf(!postgres)('list query plans on a large environment, without statistics', () => {
  checkEveryList();
});

describe('list query plans on a large environment, with statistics', () => {
  beforeAll(async () => {
    if (!postgres) await analyzeLarge(db);
  });
  checkEveryList();
});
