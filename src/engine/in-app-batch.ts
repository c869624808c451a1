// In-app steps in bulk. An in-app send is only rows in our own database, so a topic fan-out's
// thousands of in-app jobs are decided and written a batch at a time: a fixed number of queries
// per batch instead of a dozen per job. The decisions are the ones single delivery makes
// (`suppression`, `inAppMessage`); only the reading and writing are batched.
import type { Knex } from 'knex';
import { isPostgres } from '../db/knex.js';
import { findEvent, type EventRecord } from '../db/repos/events.js';
import { addExecutionDetails, type JobRecord } from '../db/repos/jobs.js';
import { insertMessages, type NewMessage } from '../db/repos/messages.js';
import { subscribersByKey } from '../db/repos/subscribers.js';
import { globalLayers, workflowLayersOf } from '../db/repos/preferences.js';
import { EMPTY_LAYER, type Layer } from './preferences.js';
import { IN_APP_DELIVERED, inAppMessage, suppression, type Recipient } from './deliver.js';
import { continueAfter, nextActiveStep } from './schedule.js';
import type { WorkerContext } from './execute.js';
import type { Step } from '../db/repos/workflows.js';

type ChannelStep = Extract<Step, { template: unknown }>;
const CHUNK = 500;

function chunks<T>(items: T[], size = CHUNK): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size));
  return out;
}

export function isInAppJob(job: JobRecord): boolean {
  return job.kind === 'step' && job.type === 'in_app';
}

export async function executeInAppBatch(ctx: WorkerContext, jobs: JobRecord[]): Promise<void> {
  const { db } = ctx.deps;
  const now = ctx.deps.clock.now();
  const at = now.toISOString();

  const events = new Map<string, EventRecord>();
  for (const eventId of new Set(jobs.map((job) => job.eventId))) {
    const event = await findEvent(db, eventId);
    if (event) events.set(eventId, event);
  }
  const notifications = new Map<string, { subscriber_id: string; subscriber_key: string }>();
  for (const ids of chunks(jobs.map((job) => job.notificationId!))) {
    for (const row of await db('notifications').whereIn('id', ids).select('id', 'subscriber_id', 'subscriber_key')) notifications.set(row.id, row);
  }
  const keys = [...new Set([...notifications.values()].map((n) => n.subscriber_key))];
  const subscribers = await subscribersByKey(db, keys);
  const globals = await globalLayers(db, keys);
  const own = new Map<string, Map<string, Layer>>();
  for (const event of events.values()) {
    if (!own.has(event.workflow.id)) own.set(event.workflow.id, await workflowLayersOf(db, event.workflow.id, keys));
  }

  // Decide every job in memory.
  type Decision =
    | { job: JobRecord; event: EventRecord; status: 'canceled' }
    | { job: JobRecord; event: EventRecord; status: 'skipped'; detail: string }
    | { job: JobRecord; event: EventRecord; status: 'completed'; message: NewMessage };
  const decided = jobs.flatMap((job): Decision[] => {
    const event = events.get(job.eventId);
    if (!event) return [];
    if (event.canceledAt) return [{ job, event, status: 'canceled' }];
    const step = event.workflow.steps[job.stepIndex!] as ChannelStep;
    const notification = notifications.get(job.notificationId!)!;
    const recipient: Recipient = {
      subscriberId: notification.subscriber_id,
      subscriberKey: notification.subscriber_key,
      subscriber: subscribers.get(notification.subscriber_key),
      global: globals.get(notification.subscriber_key) ?? EMPTY_LAYER,
      own: own.get(event.workflow.id)!.get(notification.subscriber_key) ?? EMPTY_LAYER,
    };
    const skip = suppression(event, step, recipient);
    if (skip) return [{ job, event, status: 'skipped', detail: skip }];
    return [{ job, event, status: 'completed', message: inAppMessage(job, event, step, recipient) }];
  });

  await db.transaction(async (trx: Knex.Transaction) => {
    // Only the jobs this worker still holds: one whose lease ran out belongs to someone else now.
    const held = new Set<string>();
    for (const ids of chunks(decided.map((d) => d.job.id))) {
      const query = trx('jobs').whereIn('id', ids).where({ lease_owner: ctx.owner, status: 'running' }).select('id');
      if (isPostgres(db)) query.forUpdate();
      for (const row of await query) held.add(row.id);
    }
    const mine = decided.filter((d) => held.has(d.job.id));
    for (const status of ['completed', 'skipped', 'canceled'] as const) {
      const ids = mine.filter((d) => d.status === status).map((d) => d.job.id);
      for (const part of chunks(ids)) {
        await trx('jobs')
          .whereIn('id', part)
          .update({ status, lease_owner: null, lease_expires_at: null, provider_id: status === 'completed' ? 'herald' : null, updated_at: at });
      }
    }
    await addExecutionDetails(
      trx,
      mine.flatMap((d) =>
        d.status === 'canceled'
          ? []
          : [
              {
                jobId: d.job.id,
                status: d.status === 'completed' ? ('success' as const) : ('warning' as const),
                detail: d.status === 'skipped' ? d.detail : IN_APP_DELIVERED,
                providerId: d.status === 'completed' ? 'herald' : null,
                isRetry: d.job.attempts > 1,
              },
            ],
      ),
      now,
    );
    await insertMessages(trx, mine.flatMap((d) => (d.status === 'completed' ? [d.message] : [])), now);

    // What comes next. The common case (the in-app step was the last one) is settled in bulk;
    // anything else goes through the same path as a single job.
    const locked = new Map<string, EventRecord>();
    for (const eventId of new Set(mine.map((d) => d.event.id))) locked.set(eventId, (await findEvent(trx, eventId, true))!);
    const finished: string[] = [];
    for (const d of mine) {
      const event = locked.get(d.event.id)!;
      if (!event.canceledAt && d.status !== 'canceled' && nextActiveStep(event, d.job.stepIndex!) === -1) finished.push(d.job.notificationId!);
      else await continueAfter(trx, event, d.job, d.job.state, now);
    }
    const failed = new Set<string>();
    for (const part of chunks(finished)) {
      for (const row of await trx('jobs').whereIn('notification_id', part).where('status', 'failed').distinct('notification_id')) failed.add(row.notification_id);
    }
    for (const status of ['completed', 'failed'] as const) {
      const ids = finished.filter((id) => failed.has(id) === (status === 'failed'));
      for (const part of chunks(ids)) {
        await trx('notifications').whereIn('id', part).whereIn('status', ['pending', 'processing']).update({ status, updated_at: at });
      }
    }
  });
}
