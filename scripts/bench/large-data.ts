// A large environment written straight into the database with the app's own schema (its migrations)
// and row shapes: what `npm run bench -- --large` lists and fans out over, and what the list-plan
// test (test/db/list-plans.test.ts) plans its queries on. Going through the API would take hours
// for a million notifications; these inserts take seconds to a few minutes.
import type { Db } from '../../src/db/knex.js';
import { insertRows } from '../../src/db/insert-rows.js';
import { createOrganization } from '../../src/db/repos/accounts.js';
import { eventRow } from '../../src/db/repos/events.js';
import { storeSnapshotOf } from '../../src/db/repos/workflow-snapshots.js';
import { jobRow } from '../../src/db/repos/jobs.js';
import { notificationRow } from '../../src/db/repos/notifications.js';
import { insertWorkflow } from '../../src/db/repos/workflows.js';
import { newId } from '../../src/ids.js';

export interface LargeData {
  environmentId: string;
  organizationId: string;
  /** The workflow keys the notifications are spread over. */
  workflows: string[];
  /** The subscriberIds, in the order of their internal ids. */
  subscriberIds: string[];
  /** The internal id of one subscriber with messages. */
  subscriberKey: string;
  topicKey: string;
  /** The transactionId of the environment's newest notification. */
  transactionId: string;
}

export const LARGE_WORKFLOWS: Array<{ key: string; channels: string[] }> = [
  { key: 'welcome', channels: ['in_app'] },
  { key: 'receipt', channels: ['email'] },
  { key: 'digest', channels: ['in_app', 'email'] },
  { key: 'alert', channels: ['chat'] },
  { key: 'otp', channels: ['sms'] },
  { key: 'nudge', channels: ['push'] },
];

/** A spread of statuses like a live server's: mostly completed, a few of each other. */
const STATUSES = [...Array(90).fill('completed'), ...Array(5).fill('failed'), 'pending', 'pending', 'processing', 'canceled', 'canceled'];

/** A deterministic stream of numbers in [0, 1), so two runs seed the same data. */
function random(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (Math.imul(state ^ (state >>> 15), 0x2c1b3c6d) + 0x9e3779b9) >>> 0;
    state ^= state >>> 12;
    return (state >>> 0) / 4_294_967_296;
  };
}

/**
 * An organization with a `production` environment holding `subscribers` subscribers (all in one
 * topic, a tenth in another), `notifications` notifications over the last `days` days (oldest first), each with its
 * event and its one job, and the in-app ones with a message; `others` notifications in another
 * environment besides, so that no query gets to read one environment as if it were the table.
 */
export async function seedLarge(
  db: Db,
  options: {
    notifications: number;
    subscribers: number;
    others?: number;
    days?: number;
    now?: Date;
    /** Gather the planners' statistics at the end (default): a server that has run a while has them on PostgreSQL. */
    analyze?: boolean;
    progress?: (done: number) => void;
  },
): Promise<LargeData> {
  const now = options.now ?? new Date();
  const days = options.days ?? 60;
  const next = random(25);
  const { organization, environmentIds } = await createOrganization(db, { name: 'Large', plan: 'enterprise', environments: ['production', 'development'] });
  const environmentId = environmentIds.production;
  for (const environment of [environmentId, environmentIds.development]) {
    for (const workflow of LARGE_WORKFLOWS) {
      await insertWorkflow(
        db,
        environment,
        workflow.key,
        {
          name: workflow.key,
          tags: [],
          active: true,
          critical: false,
          steps: workflow.channels.map((type) => ({ type, template: { content: 'Hi {{subscriber.firstName}}' } })) as never,
          preferenceSettings: {} as never,
        },
        now,
      );
    }
  }
  const at = now.toISOString();
  const subscriberRows = Array.from({ length: options.subscribers }, (_, i) => ({
    id: newId(now.getTime() - options.subscribers + i),
    environment_id: environmentId,
    subscriber_id: `subscriber-${i}`,
    email: `subscriber-${i}@example.com`,
    first_name: `Sub ${i}`,
    data: '{}',
    created_at: at,
    updated_at: at,
  }));
  await inChunks(db, 'subscribers', subscriberRows);
  const topicId = newId();
  await insertRows(db, 'topics', [{ id: topicId, environment_id: environmentId, topic_key: 'everyone', name: 'Everyone', created_at: at, updated_at: at }]);
  // and a tenth of them in another, so that a topic is not the whole table of memberships.
  const tenthId = newId();
  await insertRows(db, 'topics', [{ id: tenthId, environment_id: environmentId, topic_key: 'tenth', name: 'A tenth', created_at: at, updated_at: at }]);
  await inChunks(db, 'topic_subscribers', [
    ...subscriberRows.map((row) => ({ topic_id: topicId, subscriber_id: row.id, created_at: at })),
    ...subscriberRows.filter((_, i) => i % 10 === 0).map((row) => ({ topic_id: tenthId, subscriber_id: row.id, created_at: at })),
  ]);

  // Each workflow as its events keep it, and its snapshot, which they name (as a trigger stores it).
  const snapshotOf = (key: string) => ({ id: 'w', workflowId: key, name: key, critical: false, preferenceSettings: {}, steps: [] }) as never;
  const snapshots = new Map<string, string>();
  for (const environment of [environmentId, environmentIds.development]) {
    for (const workflow of LARGE_WORKFLOWS) snapshots.set(`${environment} ${workflow.key}`, await storeSnapshotOf(db, environment, snapshotOf(workflow.key), now));
  }

  const span = days * 86_400_000;
  const write = async (environment: string, count: number) => {
    const chunk = 5_000;
    for (let start = 0; start < count; start += chunk) {
      const events: Array<Record<string, unknown>> = [];
      const notifications: Array<Record<string, unknown>> = [];
      const jobs: Array<Record<string, unknown>> = [];
      const messages: Array<Record<string, unknown>> = [];
      for (let i = start; i < Math.min(count, start + chunk); i++) {
        const created = new Date(now.getTime() - span + Math.floor((span * i) / count));
        const workflow = LARGE_WORKFLOWS[Math.floor(next() * LARGE_WORKFLOWS.length)];
        const s = Math.floor(next() * subscriberRows.length);
        const subscriber = subscriberRows[s];
        const eventId = newId(created.getTime());
        const transactionId = `txn-${environment.slice(-6)}-${i}`;
        events.push(
          eventRow({
            id: eventId,
            environmentId: environment,
            transactionId,
            workflow: snapshotOf(workflow.key),
            payload: { order: i },
            overrides: {},
            createdAt: created.toISOString(),
          } as never, snapshots.get(`${environment} ${workflow.key}`)!),
        );
        const status = STATUSES[Math.floor(next() * STATUSES.length)];
        const notification = notificationRow(
          {
            environmentId: environment,
            eventId,
            transactionId,
            workflowKey: workflow.key,
            subscriberKey: subscriber.id,
            subscriberId: subscriber.subscriber_id,
            channels: workflow.channels,
            status: status as never,
          },
          created,
        );
        notifications.push(notification);
        // A notification still open waits on a long delay (a year): a server runs none of it meanwhile.
        const open = status === 'pending' || status === 'processing';
        const job = jobRow(
          {
            environmentId: environment,
            eventId,
            notificationId: notification.id as string,
            kind: 'step',
            stepIndex: 0,
            type: (open ? 'delay' : workflow.channels[0]) as never,
            status: open ? 'delayed' : status === 'failed' ? 'failed' : 'completed',
            runAt: open ? new Date(created.getTime() + 365 * 86_400_000) : created,
          },
          created,
        );
        jobs.push(job);
        if (workflow.channels[0] === 'in_app') {
          messages.push({
            id: newId(created.getTime()),
            environment_id: environment,
            subscriber_key: subscriber.id,
            subscriber_id: subscriber.subscriber_id,
            notification_id: notification.id,
            job_id: job.id,
            transaction_id: transactionId,
            workflow_key: workflow.key,
            subject: null,
            content: `Hi ${subscriber.first_name}`,
            url: null,
            seen: false,
            read: false,
            seen_at: null,
            read_at: null,
            created_at: created.toISOString(),
          });
        }
      }
      await db.transaction(async (trx) => {
        await insertRows(trx, 'events', events);
        await insertRows(trx, 'notifications', notifications);
        await insertRows(trx, 'jobs', jobs);
        await insertRows(trx, 'messages', messages);
      });
      options.progress?.(Math.min(count, start + chunk));
    }
  };
  await write(environmentId, options.notifications);
  if (options.others) await write(environmentIds.development, options.others);
  if (options.analyze !== false) await analyzeLarge(db);
  const messageOwner = await db('messages').where('environment_id', environmentId).first('subscriber_key');
  return {
    environmentId,
    organizationId: organization.id,
    workflows: LARGE_WORKFLOWS.map((workflow) => workflow.key),
    subscriberIds: subscriberRows.map((row) => row.subscriber_id),
    subscriberKey: (messageOwner?.subscriber_key as string | undefined) ?? subscriberRows[0].id,
    topicKey: 'everyone',
    transactionId: `txn-${environmentId.slice(-6)}-${options.notifications - 1}`,
  };
}

/** Fresh statistics for the planners, as a PostgreSQL server that has run for a while has them (autovacuum). */
export async function analyzeLarge(db: Db): Promise<void> {
  for (const table of ['subscribers', 'topic_subscribers', 'events', 'notifications', 'jobs', 'messages']) await db.raw(`ANALYZE ${table}`);
  if (db.client.config.client === 'pg') await db.raw('VACUUM (ANALYZE) notifications');
}

async function inChunks(db: Db, table: string, rows: Array<Record<string, unknown>>): Promise<void> {
  for (let start = 0; start < rows.length; start += 20_000) {
    const part = rows.slice(start, start + 20_000);
    await db.transaction((trx) => insertRows(trx, table, part));
  }
}
