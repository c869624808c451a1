// Retention deletes what is past its environment's retention, with everything that hangs off it,
// a batch at a time; it keeps what a pending delay or an open digest still needs, and what an
// environment keeps longer (or for ever); the kept count of notifications follows.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createOrganization } from '../../src/db/repos/accounts.js';
import { jobRow, type JobStatus } from '../../src/db/repos/jobs.js';
import { addExecutionDetails } from '../../src/db/repos/execution-details.js';
import { countNotifications, notificationRow } from '../../src/db/repos/notifications.js';
import { deleteExpiredNotifications, freeSpace, setEnvironmentRetention } from '../../src/db/repos/retention.js';
import { insertRows } from '../../src/db/insert-rows.js';
import { loadConfig } from '../../src/config.js';
import { createLogger } from '../../src/logger.js';
import { INBOX_EVENTS_KEPT_MS, sweepExpired } from '../../src/engine/retention.js';
import { bumpCounts, insertEvents, readCounts } from '../../src/db/repos/inbox.js';
import { insertTicket } from '../../src/db/repos/inbox-access.js';
import { newId } from '../../src/ids.js';
import { createTestDb, testDatabaseUrl, type TestDb } from '../helpers/db.js';
import { storedEventRow } from '../helpers/events.js';

const NOW = new Date('2026-11-25T12:00:00.000Z');
/** The token a ticket below was made with (its secret need not exist: the sweep does not look). */
const credential = { kid: 'ik_000000000000000000000000', expiresAt: NOW.getTime() + 3_600_000 };
const daysAgo = (days: number) => new Date(NOW.getTime() - days * 86_400_000);

let testDb: TestDb;
let environments: { production: string; development: string };
let subscriberKey: string;

beforeEach(async () => {
  testDb = await createTestDb();
  const { environmentIds } = await createOrganization(testDb.db, { name: 'Retention', plan: 'enterprise', environments: ['production', 'development'] });
  environments = { production: environmentIds.production, development: environmentIds.development };
  subscriberKey = newId();
  for (const environmentId of Object.values(environments)) {
    const key = environmentId === environments.production ? subscriberKey : newId();
    await insertRows(testDb.db, 'subscribers', [{ id: key, environment_id: environmentId, subscriber_id: 'ada', data: '{}', created_at: NOW.toISOString(), updated_at: NOW.toISOString() }]);
  }
});
afterEach(async () => testDb?.close());

/**
 * A notification of its own event created `days` ago, with one job in `status` (and an execution
 * detail), an in-app message, and a fan-out job of its event; answers the ids.
 */
async function notification(environmentId: string, days: number, status: JobStatus = 'completed', extra: { mergedInto?: string } = {}) {
  const at = daysAgo(days);
  const eventId = newId(at.getTime());
  const workflow = { id: 'w', workflowId: 'welcome', name: 'Welcome', critical: false, preferenceSettings: {}, steps: [] } as never;
  const row = notificationRow({ environmentId, eventId, transactionId: eventId, workflowKey: 'welcome', subscriberKey, subscriberId: 'ada', channels: ['in_app'] }, at);
  const job = jobRow({ environmentId, eventId, notificationId: row.id as string, kind: 'step', stepIndex: 0, type: 'in_app', status, runAt: at, mergedInto: extra.mergedInto }, at);
  const fanout = jobRow({ environmentId, eventId, notificationId: null, kind: 'fanout', type: 'fanout' as never, status: 'completed', runAt: at }, at);
  await testDb.db.transaction(async (trx) => {
    await insertRows(trx, 'events', [await storedEventRow(trx, { id: eventId, environmentId, transactionId: eventId, workflow, payload: {}, overrides: {}, createdAt: at.toISOString() } as never)]);
    await insertRows(trx, 'notifications', [row]);
    await insertRows(trx, 'jobs', [job, fanout]);
    await addExecutionDetails(trx, [{ jobId: job.id, status: 'success', detail: 'done', isRetry: false }], at);
    await insertRows(trx, 'messages', [
      {
        id: newId(at.getTime()),
        environment_id: environmentId,
        subscriber_key: subscriberKey,
        subscriber_id: 'ada',
        notification_id: row.id,
        job_id: job.id,
        transaction_id: eventId,
        workflow_key: 'welcome',
        content: 'Hi',
        seen: false,
        read: false,
        created_at: at.toISOString(),
      },
    ]);
  });
  return { notificationId: row.id as string, jobId: job.id, eventId };
}

function sweep(retentionDays = 30, batch = 3) {
  const deps = { db: testDb.db, clock: { now: () => NOW }, config: { ...loadConfig({}), retentionDays }, logger: createLogger('silent') };
  return sweepExpired(deps, batch);
}

const count = async (table: string, where: Record<string, string> = {}) => Number((await testDb.db(table).where(where).count({ n: '*' }).first())!.n);

describe('retention', () => {
  it('deletes notifications past the retention with their jobs, execution details, messages and events, a batch at a time', async () => {
    const old = [];
    for (let i = 0; i < 8; i++) old.push(await notification(environments.production, 31 + i));
    const recent = await notification(environments.production, 29);
    expect(await countNotifications(testDb.db, environments.production)).toBe(9);

    const swept = await sweep();
    expect(swept).toMatchObject({ notifications: 8, events: 8, failed: [] });
    expect(await testDb.db('notifications').pluck('id')).toEqual([recent.notificationId]);
    expect(await testDb.db('events').pluck('id')).toEqual([recent.eventId]);
    // The step job and the fan-out job of the recent one, nothing of the others.
    expect(await count('jobs')).toBe(2);
    expect(await testDb.db('execution_details').pluck('job_id')).toEqual([recent.jobId]);
    expect(await testDb.db('messages').pluck('notification_id')).toEqual([recent.notificationId]);
    // The kept count follows the deletes, in their transactions.
    expect(await countNotifications(testDb.db, environments.production)).toBe(1);
    // A second pass finds nothing.
    expect(await sweep()).toMatchObject({ notifications: 0, events: 0 });
  });

  it("takes the deleted in-app messages out of their subscriber's inbox counts, with a counts event, in the same transaction", async () => {
    for (let i = 0; i < 3; i++) await notification(environments.production, 31 + i);
    await notification(environments.production, 29);
    // One of the old messages read (and so seen), one archived: the counts as the inbox keeps them.
    const [read, archived] = await testDb.db('messages').orderBy('created_at').limit(2).pluck('id');
    await testDb.db('messages').where({ id: read }).update({ seen: true, read: true });
    await testDb.db('messages').where({ id: archived }).update({ archived: true });
    await testDb.db.transaction((trx) => bumpCounts(trx, [{ subscriberKey, environmentId: environments.production, unread: 2, unseen: 2, total: 3, archived: 1, events: 0, newMessages: 0 }], NOW));
    expect(await readCounts(testDb.db, subscriberKey)).toEqual({ unread: 2, unseen: 2, total: 3, archived: 1, seq: 0 });

    expect(await sweep()).toMatchObject({ notifications: 3 });
    // What is left is the recent message, unread.
    expect(await readCounts(testDb.db, subscriberKey)).toEqual({ unread: 1, unseen: 1, total: 1, archived: 0, seq: 1 });
    const [event] = await testDb.db('inbox_events').where({ subscriber_key: subscriberKey });
    expect(JSON.parse(event.payload)).toEqual({ type: 'counts', counts: { unread: 1, unseen: 1, total: 1, archived: 0 } });
  });

  it('keeps a notification whose delay or digest is still pending, and one merged into a digest still open', async () => {
    const delayed = await notification(environments.production, 40, 'delayed');
    const digest = await notification(environments.production, 10, 'pending');
    const rider = await notification(environments.production, 40, 'merged', { mergedInto: digest.jobId });
    const done = await notification(environments.production, 40);
    await sweep();
    expect((await testDb.db('notifications').pluck('id')).sort()).toEqual([delayed.notificationId, digest.notificationId, rider.notificationId].sort());
    expect((await testDb.db('events').pluck('id')).sort()).toEqual([delayed.eventId, digest.eventId, rider.eventId].sort());
    expect(await count('notifications', { id: done.notificationId })).toBe(0);

    // Once the digest has closed, its rider goes at the next pass.
    await testDb.db('jobs').where('id', digest.jobId).update({ status: 'completed' });
    await sweep();
    expect(await count('notifications', { id: rider.notificationId })).toBe(0);
    expect(await count('notifications', { id: delayed.notificationId })).toBe(1);
  });

  it('reads on from where each batch ended: rows it keeps, and rows created at the same instant, across batch boundaries', async () => {
    // Ten notifications created at one instant (ordered by id alone), every third kept by a pending delay.
    const made = [];
    for (let i = 0; i < 10; i++) made.push(await notification(environments.production, 40, i % 3 === 0 ? 'delayed' : 'completed'));
    const kept = made.filter((_, i) => i % 3 === 0).map((m) => m.notificationId);
    const swept = await sweep(30, 2);
    expect(swept).toMatchObject({ notifications: 6, events: 6, failed: [] });
    expect((await testDb.db('notifications').pluck('id')).sort()).toEqual(kept.sort());
  });

  it('deletes a batch from the position it is given on, not from the oldest', async () => {
    const made: Array<{ notificationId: string }> = [];
    for (let i = 0; i < 6; i++) made.push(await notification(environments.production, 40 - i));
    const at = (i: number) => ({ createdAt: daysAgo(40 - i).toISOString(), id: made[i].notificationId });
    const batch = await deleteExpiredNotifications(testDb.db, environments.production, daysAgo(30), 2, at(2));
    expect(batch).toEqual({ deleted: 2, last: at(4) });
    expect(await testDb.db('notifications').orderBy('created_at').pluck('id')).toEqual([0, 1, 2, 5].map((i) => made[i].notificationId));
  });

  it('ends a pass at its next batch once told to stop, and the next pass goes on', async () => {
    for (let i = 0; i < 8; i++) await notification(environments.production, 31 + i);
    // Looked at once before the environment, once before each batch: aborted from the second batch on.
    let looks = 0;
    const signal = { get aborted() { return ++looks > 2; } } as AbortSignal;
    const deps = { db: testDb.db, clock: { now: () => NOW }, config: { ...loadConfig({}), retentionDays: 30 }, logger: createLogger('silent') };
    expect(await sweepExpired(deps, 3, signal)).toMatchObject({ notifications: 3, events: 0, pages: 0 });
    expect(await count('notifications')).toBe(5);
    expect(await sweep()).toMatchObject({ notifications: 5, events: 8 });
  });

  it("follows an environment's own retention over the server's, and keeps everything when either is 0", async () => {
    const production = await notification(environments.production, 40);
    const development = await notification(environments.development, 40);
    await setEnvironmentRetention(testDb.db, environments.development, 60);
    await sweep();
    expect(await testDb.db('notifications').pluck('id')).toEqual([development.notificationId]);

    await setEnvironmentRetention(testDb.db, environments.development, 0);
    await notification(environments.production, 400);
    expect(await sweep(0)).toMatchObject({ notifications: 0 });
    await setEnvironmentRetention(testDb.db, environments.development, 10);
    expect(await sweep(0)).toMatchObject({ notifications: 1 });
    expect(await count('notifications', { id: production.notificationId })).toBe(0);
    expect(await count('notifications', { environment_id: environments.production })).toBe(1);
  });

  it.runIf(!testDatabaseUrl())('gives the pages it freed back to the file system on SQLite', async () => {
    for (let i = 0; i < 200; i++) await notification(environments.production, 31 + (i % 5));
    expect((await freeSpace(testDb.db))?.incremental).toBe(true);
    const swept = await sweep(30, 50);
    expect(swept.notifications).toBe(200);
    expect(swept.pages).toBeGreaterThan(0);
    expect((await freeSpace(testDb.db))?.freePages).toBe(0);
  });
  it('deletes webhook deliveries past the retention once they are over, with their attempts, and keeps those still to be tried', async () => {
    const delivery = (status: string, daysOld: number) => {
      const at = daysAgo(daysOld).toISOString();
      return { id: newId(), environment_id: environments.production, endpoint_id: newId(), event_id: `msg_${newId()}`, event_type: 'message.sent', payload: '{}', status, attempts: 1, manual: false, run_at: at, created_at: at, updated_at: at };
    };
    const rows = [delivery('succeeded', 40), delivery('failed', 35), delivery('pending', 40), delivery('succeeded', 5)];
    await insertRows(testDb.db, 'webhook_deliveries', rows);
    await insertRows(testDb.db, 'webhook_attempts', [{ id: newId(), delivery_id: rows[0].id, attempt: 1, trigger: 'scheduled', status_code: 200, duration_ms: 3, response: 'ok', created_at: rows[0].created_at }]);

    expect(await sweep()).toMatchObject({ webhookDeliveries: 2 });
    expect((await testDb.db('webhook_deliveries').pluck('id')).sort()).toEqual([rows[2].id, rows[3].id].sort());
    expect(await count('webhook_attempts')).toBe(0);
  });

  it('goes on past a part that fails, and tries that part again at the next pass', async () => {
    const old = await notification(environments.production, 40);
    const environmentId = environments.production;
    // The message's counts, and the event that told of it, as delivering it left them.
    await testDb.db.transaction((trx) => bumpCounts(trx, [{ subscriberKey, environmentId, unread: 1, unseen: 1, total: 1, archived: 0, events: 1, newMessages: 0 }], NOW));
    await insertEvents(testDb.db, [{ subscriberKey, environmentId, seq: 1, type: 'notification.created', payload: '{}' }], new Date(NOW.getTime() - INBOX_EVENTS_KEPT_MS - 1));
    await insertTicket(testDb.db, { ticketHash: 'expired', environmentId, organizationId: newId(), subscriberId: 'ada', expiresAt: new Date(NOW.getTime() - 1), credential });
    // A real failure of one part: the inbox's tickets cannot be read while their table is away.
    await testDb.db.schema.renameTable('inbox_tickets', 'inbox_tickets_away');

    expect(await sweep()).toMatchObject({ notifications: 1, events: 1, inboxEvents: 1, inboxTickets: 0, failed: ['inbox tickets'] });
    expect(await count('notifications', { id: old.notificationId })).toBe(0);
    // The old event is gone; the counts event of the deleted message is new.
    expect(await testDb.db('inbox_events').pluck('seq')).toEqual([2]);

    await testDb.db.schema.renameTable('inbox_tickets_away', 'inbox_tickets');
    expect(await sweep()).toMatchObject({ inboxTickets: 1, failed: [] });
    expect(await count('inbox_tickets')).toBe(0);
  });

  it('forgets the inbox streams\' events once past their keeping time, and tickets once expired, whether or not a stream is open', async () => {
    const environmentId = environments.production;
    const event = (seq: number) => ({ subscriberKey, environmentId, seq, type: 'notification.created' as const, payload: '{}' });
    await insertEvents(testDb.db, [event(1), event(2)], new Date(NOW.getTime() - INBOX_EVENTS_KEPT_MS - 1));
    await insertEvents(testDb.db, [event(3)], new Date(NOW.getTime() - INBOX_EVENTS_KEPT_MS + 60_000));
    const ticket = (hash: string, expiresAt: Date) => insertTicket(testDb.db, { ticketHash: hash, environmentId, organizationId: newId(), subscriberId: 'ada', expiresAt, credential });
    await ticket('expired', new Date(NOW.getTime() - 1));
    await ticket('live', new Date(NOW.getTime() + 30_000));

    // Kept at least the 24 hours of replay the contract promises, whatever the notifications' retention.
    expect(INBOX_EVENTS_KEPT_MS).toBeGreaterThanOrEqual(24 * 3_600_000);
    expect(await sweep(0)).toMatchObject({ inboxEvents: 2, inboxTickets: 1 });
    expect(await testDb.db('inbox_events').pluck('seq')).toEqual([3]);
    expect(await testDb.db('inbox_tickets').pluck('ticket_hash')).toEqual(['live']);
  });
});
