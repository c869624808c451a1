// Creating jobs: the first job of each new notification, and the next job when one finishes. A
// job exists only for the step a notification is at; later steps get theirs when it is done, so a
// canceled event simply creates nothing more.
import type { Runner } from '../db/knex.js';
import { insertJobs, type JobRecord, type NewJob } from '../db/repos/jobs.js';
import { addExecutionDetail } from '../db/repos/execution-details.js';
import {
  insertNotifications,
  notificationRecipient,
  settleNotifications,
  type NewNotification,
  type NotificationStatus,
} from '../db/repos/notifications.js';
import { findEvent, type EventRecord } from '../db/repos/events.js';
import { findSubscriber } from '../db/repos/subscribers.js';
import { newId } from '../ids.js';
import { addMs, durationMs, parseInstant, valueAt } from './durations.js';
import { CHANNELS } from '../contract.js';
import { failedCondition } from './conditions.js';
import { jobFacts, recordCanceledNotifications, recordStepEvent } from './webhook-events.js';
import { openOrJoinDigest, passOnClosedDigest, settleDigestRiders, type Heir } from './digests.js';

/** A subscriber a notification is made for: its internal key and its public id. */
export interface SubscriberRef {
  /** The subscriber's internal id. */
  key: string;
  subscriberId: string;
}

/** The index of the next active step after `after` (-1 to start), or -1 when there is none. */
export function nextActiveStep(event: EventRecord, after: number): number {
  const steps = event.workflow.steps;
  for (let index = after + 1; index < steps.length; index++) if (steps[index].active !== false) return index;
  return -1;
}

/** The channels a workflow's active steps use: what a notification shows as its `channels`. */
function eventChannels(event: EventRecord): string[] {
  const types = event.workflow.steps.filter((s) => s.active !== false && (CHANNELS as readonly string[]).includes(s.type)).map((s) => s.type);
  return [...new Set(types)];
}

/**
 * Creates a notification for each recipient the event does not have yet: their ids by subscriber
 * key. `given` names a recipient's notification id and status in advance.
 */
export async function createNotifications(
  trx: Runner,
  event: EventRecord,
  recipients: SubscriberRef[],
  now: Date,
  given?: (recipient: SubscriberRef) => { id: string; status: NotificationStatus },
): Promise<Map<string, string>> {
  const channels = eventChannels(event);
  return insertNotifications(
    trx,
    recipients.map((r) => ({ ...notificationFor(event, r, channels), ...given?.(r) })),
    now,
  );
}

/** An event's notification for one recipient. */
function notificationFor(event: EventRecord, recipient: SubscriberRef, channels: string[]): NewNotification {
  return {
    environmentId: event.environmentId,
    eventId: event.id,
    transactionId: event.transactionId,
    workflowKey: event.workflow.workflowId,
    subscriberKey: recipient.key,
    subscriberId: recipient.subscriberId,
    channels,
  };
}

/** Creates a notification and its first job for each recipient the event does not have yet. */
export async function startNotifications(trx: Runner, event: EventRecord, recipients: SubscriberRef[], now: Date): Promise<number> {
  const created = await createNotifications(trx, event, recipients, now);
  const first = nextActiveStep(event, -1);
  const plain: NewJob[] = [];
  for (const [subscriberKey, notificationId] of created) {
    const job = await stepJob(trx, event, notificationId, subscriberKey, first, {}, now);
    if (job) plain.push(job);
  }
  await insertJobs(trx, plain, now);
  return created.size;
}

/** The job for step `index` of a notification, as any step but a digest has it: a delay waits. */
function plainStepJob(event: EventRecord, notificationId: string, index: number, state: Record<string, unknown>, now: Date): NewJob {
  const step = event.workflow.steps[index];
  const job: NewJob = {
    environmentId: event.environmentId,
    eventId: event.id,
    notificationId,
    kind: 'step',
    stepIndex: index,
    stepId: step.stepId,
    type: step.type,
    status: 'pending',
    runAt: now,
    state,
  };
  if (step.type === 'delay') {
    const until = step.delayPath ? parseInstant(valueAt(event.payload, step.delayPath)) : undefined;
    // A time in the payload is clamped like a duration (addMs): `9999-12-31T23:59-14:00` is in the year 10000.
    const at = step.delayPath ? (until ? addMs(until, 0) : now) : addMs(now, durationMs(step.amount!, step.unit!));
    return { ...job, status: 'delayed', runAt: at > now ? at : now };
  }
  return job;
}

/**
 * A new event's notifications and their first jobs, decided without the database: what
 * `startNotifications` would write for recipients the event has none for yet. Undefined when the
 * first active step is a digest, which opens or joins a digest in the database as it is written.
 */
export function plannedStart(event: EventRecord, recipients: SubscriberRef[], now: Date): { notifications: NewNotification[]; jobs: NewJob[] } | undefined {
  const first = nextActiveStep(event, -1);
  if (event.workflow.steps[first].type === 'digest' || waitsOnConditions(event.workflow.steps[first])) return undefined;
  const channels = eventChannels(event);
  const notifications = recipients.map((r) => ({ ...notificationFor(event, r, channels), id: newId(now.getTime()) }));
  return { notifications, jobs: notifications.map((n) => plainStepJob(event, n.id!, first, {}, now)) };
}

/**
 * The job for step `index` of a notification. Delay and digest jobs wait (`delayed`); a digest job
 * either opens the digest for its key or joins the one already open (`merged`), in which case it
 * is written here and nothing is returned.
 */
async function stepJob(
  trx: Runner,
  event: EventRecord,
  notificationId: string,
  subscriberKey: string,
  index: number,
  state: Record<string, unknown>,
  now: Date,
): Promise<NewJob | undefined> {
  const step = event.workflow.steps[index];
  const job = plainStepJob(event, notificationId, index, state, now);
  if (waitsOnConditions(step)) {
    const unmet = await unmetCondition(trx, event, notificationId, step);
    // Due now, not waiting: it is settled as skipped when it runs (execute.ts), and the next step follows.
    if (unmet) return { ...job, status: 'pending', runAt: now, state: { ...state, [UNMET_CONDITION]: `Step condition not met: ${unmet}` } };
  }
  if (step.type === 'digest') {
    await openOrJoinDigest(trx, event, job, step, subscriberKey, now);
    return undefined;
  }
  return job;
}

/**
 * Where a delay, digest or throttle job whose conditions did not hold when its step was reached says
 * why, in its state. Channel steps check theirs when they run (deliver.ts); a wait cannot, as it
 * would have waited first, nor a throttle, which would have counted.
 */
export const UNMET_CONDITION = 'unmetCondition';

/**
 * A delay, digest or throttle step with conditions: they are checked when the step is reached,
 * before any wait or count.
 */
function waitsOnConditions(step: EventRecord['workflow']['steps'][number]): boolean {
  return (step.type === 'delay' || step.type === 'digest' || step.type === 'throttle') && (step.conditions?.length ?? 0) > 0;
}

async function unmetCondition(trx: Runner, event: EventRecord, notificationId: string, step: EventRecord['workflow']['steps'][number]): Promise<string | undefined> {
  const { subscriber_id: subscriberId } = (await notificationRecipient(trx, notificationId))!;
  const subscriber = await findSubscriber(trx, event.environmentId, subscriberId);
  return failedCondition(step.conditions, { payload: event.payload, subscriber });
}

/**
 * The heir of a closed digest's send goes on with it from step `from`: the step after the one the
 * canceled carrier ran, or, when `rerun`, the step it was taken for and did not run, whose wait (if
 * any) was over, so it is due now.
 */
async function continueForHeir(trx: Runner, heir: Heir, from: number, rerun: boolean, state: Record<string, unknown>, now: Date): Promise<void> {
  if (from <= heir.digestStep) return;
  const event = (await findEvent(trx, heir.eventId))!;
  const carried = heir.strip(state);
  if (rerun) {
    await insertJobs(trx, [{ ...plainStepJob(event, heir.notificationId, from, carried, now), status: 'pending', runAt: now }], now);
    return;
  }
  const { subscriber_key: subscriberKey } = (await notificationRecipient(trx, heir.notificationId))!;
  const next = await stepJob(trx, event, heir.notificationId, subscriberKey, from, carried, now);
  if (next) await insertJobs(trx, [next], now);
}

/**
 * After a job is done: the job for the notification's next step, or, when there is none, the
 * notification's final status. A canceled event goes no further, but for a closed digest's send
 * it carried, which goes on for another event of the digest (digests.ts): from the step after this
 * job, or from this job's own step when it was canceled rather than run.
 */
export async function continueAfter(
  trx: Runner,
  event: EventRecord,
  job: JobRecord,
  state: Record<string, unknown>,
  now: Date,
  jobCanceled = false,
): Promise<void> {
  const notificationId = job.notificationId!;
  if (event.canceledAt) {
    const from = jobCanceled ? job.stepIndex! : nextActiveStep(event, job.stepIndex!);
    const passed = from !== -1 && (await passOnClosedDigest(trx, notificationId, now, (heir) => continueForHeir(trx, heir, from, jobCanceled, state, now)));
    // The cancel came while this job ran (its send had begun): the steps after it are shown as canceled.
    if (!passed && !jobCanceled && from !== -1) {
      await recordRemainingSteps(trx, event, notificationId, job.stepIndex!, 'canceled', `Canceled with event ${event.transactionId} while step ${job.stepId} ran; not run`, now);
    }
    await recordCanceledNotifications(trx, event, now, () => settleNotifications(trx, [notificationId], now), notificationId);
    if (!passed) await settleDigestRiders(trx, event, notificationId, now);
    return;
  }
  const throttled = state[THROTTLED_STATE];
  if (typeof throttled === 'string') await recordRemainingSteps(trx, event, notificationId, job.stepIndex!, 'skipped', throttled, now);
  const next = typeof throttled === 'string' ? -1 : nextActiveStep(event, job.stepIndex!);
  if (next === -1) {
    await settleNotifications(trx, [notificationId], now);
    await settleDigestRiders(trx, event, notificationId, now);
    return;
  }
  const { subscriber_key: subscriberKey } = (await notificationRecipient(trx, notificationId))!;
  const nextJob = await stepJob(trx, event, notificationId, subscriberKey, next, state, now);
  if (nextJob) await insertJobs(trx, [nextJob], now);
}

/** Where a throttle step's job tells continueAfter that the notification goes no further, and why. */
export const THROTTLED_STATE = 'throttled';

/**
 * Records every active step after `after` as not run (`skipped` by a throttle, with its
 * `message.skipped`; or `canceled` with its event), each with the reason, so the notification shows
 * what it did not do. Nothing runs for them.
 */
async function recordRemainingSteps(
  trx: Runner,
  event: EventRecord,
  notificationId: string,
  after: number,
  status: 'skipped' | 'canceled',
  reason: string,
  now: Date,
): Promise<void> {
  const remaining: NewJob[] = [];
  for (let index = nextActiveStep(event, after); index !== -1; index = nextActiveStep(event, index)) {
    remaining.push({ ...plainStepJob(event, notificationId, index, {}, now), id: newId(now.getTime()), status, runAt: now });
  }
  await insertJobs(trx, remaining, now);
  for (const job of remaining) {
    await addExecutionDetail(trx, { jobId: job.id!, status: 'warning', detail: reason, isRetry: false }, now);
    if (status !== 'skipped') continue;
    const facts = jobFacts({ ...job, id: job.id!, notificationId, stepId: job.stepId ?? null, stepIndex: job.stepIndex! }, event);
    await recordStepEvent(trx, facts, { type: 'message.skipped', detail: reason, reason: 'throttled' }, now);
  }
}
