// In-app steps in bulk. An in-app send is only rows in our own database, so a topic fan-out's
// thousands of in-app jobs are decided and written a batch at a time: a fixed number of queries
// per batch instead of a dozen per job. The decisions are the ones single delivery makes
// (`decideStep`), over many contexts; only the reading and writing are batched. A fan-out batch whose
// workflow starts with an in-app step goes further and delivers it as it creates the notifications
// (`startWithInApp`).
import type { Runner, Transaction } from '../db/knex.js';
import { findEvent, type EventRecord } from '../db/repos/events.js';
import { finishInAppJobs, heldJobIds, insertJobs, type JobRecord } from '../db/repos/jobs.js';
import { addExecutionDetails } from '../db/repos/execution-details.js';
import { markNotificationsProcessing, notificationRecipients, settleNotifications } from '../db/repos/notifications.js';
import { newId } from '../ids.js';
import { messageChars, type NewMessage } from '../db/repos/messages.js';
import { groupsOf, SLICE_CHARS } from '../db/chunks.js';
import { deliverInboxMessages } from './inbox.js';
import { writeDeliveryRows, type DeliveryRow } from '../db/repos/webhook-deliveries.js';
import { jobFacts, recordStepEvent, type StepEvent } from './webhook-events.js';
import { subscribersByKey } from '../db/repos/subscribers.js';
import { globalLayers, workflowLayersOf } from '../db/repos/preferences.js';
import { EMPTY_LAYER } from './preferences.js';
import type { Layer } from '../db/repos/preferences.js';
import { CANCELED_BEFORE_RUN, compileStepTemplates, decideStep, IN_APP_DELIVERED, suppression, type ChannelStep, type Recipient } from './deliver.js';
import { Undeliverable } from './undeliverable.js';
import { TemplateOverBudget } from './templates.js';
import { continueAfter, createNotifications, nextActiveStep, type SubscriberRef } from './schedule.js';
import { settleDigestRiders } from './digests.js';
import type { WorkerContext } from './worker-context.js';
import { pacer, yieldToEventLoop } from '../turns.js';


type Decision =
  | { job: JobRecord; event: EventRecord; status: 'canceled' }
  | { job: JobRecord; event: EventRecord; status: 'skipped'; detail: string }
  | { job: JobRecord; event: EventRecord; status: 'failed'; detail: string }
  | { job: JobRecord; event: EventRecord; status: 'completed'; message: NewMessage };

/** Subscribers and their preference layers, read a batch at a time, for the recipients of in-app steps. */
async function audienceOf(db: Runner, keys: string[], workflowIds: string[]) {
  const subscribers = await subscribersByKey(db, keys);
  const globals = await globalLayers(db, keys);
  const own = new Map<string, Map<string, Layer>>();
  for (const workflowId of new Set(workflowIds)) own.set(workflowId, await workflowLayersOf(db, workflowId, keys));
  return {
    recipient: (event: EventRecord, subscriberKey: string, subscriberId: string): Recipient => ({
      subscriberId,
      subscriberKey,
      subscriber: subscribers.get(subscriberKey),
      global: globals.get(subscriberKey) ?? EMPTY_LAYER,
      own: own.get(event.workflow.id)!.get(subscriberKey) ?? EMPTY_LAYER,
    }),
  };
}

/**
 * Templates of a batch that went over their budget, by event and step: the same template and
 * payload for the batch's other recipients fail with the same detail without being rendered, so a
 * template at its budget costs a batch that budget once, not once a recipient.
 */
type OverBudget = Map<string, string>;
/** Why the templates of a batch's event and step could not be compiled (compileStepTemplates), by event and step. */
type Uncompilable = Map<string, string>;

/** Compiles the templates of each event and step of a batch (the thread's, when costly), once each. */
async function compileBatchTemplates(pairs: Iterable<{ event: EventRecord; stepIndex: number }>): Promise<Uncompilable> {
  const uncompilable: Uncompilable = new Map();
  const asked = new Set<string>();
  for (const { event, stepIndex } of pairs) {
    const key = `${event.id}:${stepIndex}`;
    if (asked.has(key)) continue;
    asked.add(key);
    const why = await compileStepTemplates(event, event.workflow.steps[stepIndex] as ChannelStep);
    if (why) uncompilable.set(key, why);
  }
  return uncompilable;
}

/** What the detail of a job failed from OverBudget ends with. */
export const AS_FOR_ANOTHER = ' (found rendering it for another recipient of this event: not rendered again)';

/** The decision single delivery makes (decideStep), for this job's context: skipped (why) or completed (the message). */
function decide(job: JobRecord, event: EventRecord, recipient: Recipient, overBudget: OverBudget, uncompilable: Uncompilable): Decision {
  const template = `${event.id}:${job.stepIndex}`;
  const known = overBudget.get(template);
  if (known !== undefined) return { job, event, status: 'failed', detail: `${known}${AS_FOR_ANOTHER}` };
  const step = event.workflow.steps[job.stepIndex!] as ChannelStep;
  const notCompiled = uncompilable.get(template);
  if (notCompiled !== undefined && !suppression(event, step, recipient)) return { job, event, status: 'failed', detail: notCompiled };
  let decided: ReturnType<typeof decideStep>;
  try {
    decided = decideStep({ job, event, step, recipient });
  } catch (err) {
    // A template that cannot render, or is over its budget: the job fails, as a single one would.
    if (!(err instanceof Undeliverable)) throw err;
    if (err instanceof TemplateOverBudget) overBudget.set(template, err.message);
    return { job, event, status: 'failed', detail: err.message };
  }
  if ('destination' in decided || (decided.status === 'completed' && !decided.message)) throw new Error(`Job ${job.id} is not an in-app step`);
  return decided.status === 'skipped' ? { job, event, status: 'skipped', detail: decided.detail } : { job, event, status: 'completed', message: decided.message! };
}

/**
 * The execution detail of each decided job, and the message of each delivered one, in groups whose
 * messages add up to about SLICE_CHARS with the event loop turning between: a hundred messages of
 * 150 KB, each written to `messages` and to the inbox's events, held it 0.7 s as one.
 */
async function writeOutcomes(trx: Runner, decided: Decision[], now: Date): Promise<void> {
  const groups = groupsOf(decided, messageCharsOf, SLICE_CHARS);
  for (const [i, group] of groups.entries()) {
    if (i > 0) await yieldToEventLoop();
    await writeOutcomesTogether(trx, group, now);
  }
}

/** The characters of a decision's message, if it has one. */
function messageCharsOf(d: Decision): number {
  return d.status === 'completed' ? messageChars(d.message) : 0;
}

async function writeOutcomesTogether(trx: Runner, decided: Decision[], now: Date): Promise<void> {
  await addExecutionDetails(
    trx,
    decided.map((d) => ({
      jobId: d.job.id,
      status: d.status === 'completed' ? ('success' as const) : d.status === 'failed' ? ('failed' as const) : ('warning' as const),
      detail: d.status === 'skipped' || d.status === 'failed' ? d.detail : d.status === 'canceled' ? CANCELED_BEFORE_RUN : IN_APP_DELIVERED,
      providerId: d.status === 'completed' ? 'herald' : null,
      isRetry: d.job.attempts > 1,
    })),
    now,
  );
  // Ids given here, so the message.delivered events below can name the messages they stored.
  for (const d of decided) if (d.status === 'completed') d.message.id ??= newId(now.getTime());
  await deliverInboxMessages(trx, decided.flatMap((d) => (d.status === 'completed' ? [d.message] : [])), now);
  // The group's webhook deliveries in one statement, as its messages: one each was a statement a recipient.
  const outbox: DeliveryRow[] = [];
  for (const d of decided) {
    if (d.status === 'canceled') continue;
    const job = { ...d.job, notificationId: d.job.notificationId!, stepIndex: d.job.stepIndex! };
    const facts = jobFacts(job, d.event, { subscriberId: d.status === 'completed' ? d.message.subscriberId : undefined });
    const webhook: StepEvent =
      d.status === 'completed'
        ? { type: 'message.delivered', messageId: d.message.id!, message: d.message }
        : d.status === 'skipped'
          ? { type: 'message.skipped', detail: d.detail }
          : { type: 'message.failed', attempts: d.job.attempts, error: { message: d.detail } };
    await recordStepEvent(trx, facts, webhook, now, outbox);
  }
  await writeDeliveryRows(trx, outbox);
}

export function isInAppJob(job: JobRecord): boolean {
  return job.kind === 'step' && job.type === 'in_app';
}

/**
 * Characters of in-app messages one transaction writes at most (the one that passes it is the
 * last): a SQLite commit of 500 messages of 150 KB, each also an inbox event, held the event loop
 * 460 ms, and a batch's messages are all in memory until it commits.
 */
export const BATCH_MESSAGE_CHARS = 2 * SLICE_CHARS;

/**
 * Settles claimed in-app jobs in bulk: in parts whose subscribers' `data` fits in SLICE_CHARS
 * together (a part's subscribers are read and parsed at once), the event loop turning between two,
 * each decided and settled in transactions of about BATCH_MESSAGE_CHARS of messages.
 */
export async function executeInAppBatch(ctx: WorkerContext, jobs: JobRecord[]): Promise<void> {
  const { db } = ctx.deps;
  const now = ctx.deps.clock.now();

  const events = new Map<string, EventRecord>();
  for (const eventId of new Set(jobs.map((job) => job.eventId))) {
    const event = await findEvent(db, eventId);
    if (event) events.set(eventId, event);
  }
  const notifications = await notificationRecipients(db, jobs.map((job) => job.notificationId!));
  const live = jobs.flatMap((job) => {
    const event = events.get(job.eventId);
    return event && !event.canceledAt ? [{ event, stepIndex: job.stepIndex! }] : [];
  });
  const uncompilable = await compileBatchTemplates(live);
  const pause = pacer();
  const overBudget: OverBudget = new Map();
  for (const [i, part] of groupsOf(jobs, (job) => notifications.get(job.notificationId!)?.data_bytes ?? 0, SLICE_CHARS).entries()) {
    if (i > 0) await yieldToEventLoop();
    const keys = [...new Set(part.map((job) => notifications.get(job.notificationId!)?.subscriber_key).filter((key) => key !== undefined))];
    const audience = await audienceOf(db, keys, [...events.values()].map((event) => event.workflow.id));
    // Decide every job in memory, letting the event loop run between holds.
    let decided: Decision[] = [];
    let chars = 0;
    for (const job of part) {
      const event = events.get(job.eventId);
      if (!event) continue;
      if (event.canceledAt) {
        decided.push({ job, event, status: 'canceled' });
        continue;
      }
      const notification = notifications.get(job.notificationId!)!;
      const decision = decide(job, event, audience.recipient(event, notification.subscriber_key, notification.subscriber_id), overBudget, uncompilable);
      decided.push(decision);
      chars += messageCharsOf(decision);
      if (chars >= BATCH_MESSAGE_CHARS) {
        await settleDecided(ctx, decided, now);
        decided = [];
        chars = 0;
      }
      await pause();
    }
    await settleDecided(ctx, decided, now);
  }
}

/** Records the outcomes of decided in-app jobs, and what comes after each, in one transaction. */
async function settleDecided(ctx: WorkerContext, decided: Decision[], now: Date): Promise<void> {
  if (decided.length === 0) return;
  await ctx.deps.db.transaction(async (trx: Transaction) => {
    // Only the jobs this worker still holds: one whose lease ran out belongs to someone else now.
    const held = await heldJobIds(trx, decided.map((d) => d.job.id), ctx.owner);
    // Then their events, held against a cancel until this commits (jobs, then event: recordOutcome's
    // order). A cancel that came since the events were read above stops these jobs before anything
    // of theirs is written: it counted them as under way (localJobsUnderWay).
    const locked = new Map<string, EventRecord>();
    for (const eventId of new Set(decided.filter((d) => held.has(d.job.id)).map((d) => d.event.id))) {
      const event = await findEvent(trx, eventId, true);
      if (event) locked.set(eventId, event);
    }
    const mine = decided.flatMap((d): Decision[] => {
      const event = locked.get(d.event.id);
      if (!event || !held.has(d.job.id)) return [];
      return event.canceledAt && d.status !== 'canceled' ? [{ job: d.job, event, status: 'canceled' }] : [d];
    });
    for (const status of ['completed', 'skipped', 'canceled', 'failed'] as const) {
      await finishInAppJobs(trx, mine.filter((d) => d.status === status).map((d) => d.job.id), status, now);
    }
    await writeOutcomes(trx, mine, now);

    // What comes next. The common case (the in-app step was the last one) is settled in bulk;
    // anything else goes through the same path as a single job.
    const finished: Array<{ event: EventRecord; notificationId: string }> = [];
    const goingOn: string[] = [];
    for (const d of mine) {
      const event = locked.get(d.event.id)!;
      const notificationId = d.job.notificationId!;
      const goesOn = !event.canceledAt && d.status !== 'canceled';
      if (goesOn && nextActiveStep(event, d.job.stepIndex!) === -1) {
        finished.push({ event, notificationId });
        continue;
      }
      if (goesOn) goingOn.push(notificationId);
      await continueAfter(trx, event, d.job, d.job.state, now, d.status === 'canceled');
    }
    // A step done and another to come: the notification is under way.
    await markNotificationsProcessing(trx, goingOn, now);
    await settleNotifications(trx, finished.map((f) => f.notificationId), now);
    for (const { event, notificationId } of finished) await settleDigestRiders(trx, event, notificationId, now);
  });
}

/**
 * A fan-out batch whose workflow starts with an in-app step delivers that step at once, in the
 * batch's own transaction: each new notification is written with its in-app job already done,
 * its message and its execution detail (and settled, when nothing follows), instead of being
 * queued, claimed and settled by a later batch. The decisions are the ones a claimed job gets; a
 * batch run twice creates nothing twice, since an event has one notification per subscriber.
 *
 * Members are taken in order until their messages pass `charsLeft` (the first always): a slice of
 * a hundred (five hundred on PostgreSQL) messages of up to 1 MiB each is in memory until it is
 * written. Answers how many members it took, and the characters of their messages (messageChars).
 */
export async function startWithInApp(trx: Runner, event: EventRecord, slice: SubscriberRef[], now: Date, charsLeft = Infinity): Promise<{ taken: number; chars: number }> {
  if (slice.length === 0) return { taken: 0, chars: 0 };
  const index = nextActiveStep(event, -1);
  const step = event.workflow.steps[index];
  const last = nextActiveStep(event, index) === -1;
  const at = now.toISOString();
  // Compiled already, nearly always: runFanout compiles them before its transactions.
  const uncompilable = await compileBatchTemplates([{ event, stepIndex: index }]);
  const audience = await audienceOf(trx, slice.map((member) => member.key), [event.workflow.id]);
  const decisions = new Map<string, Decision>();
  const overBudget: OverBudget = new Map();
  const pause = pacer();
  let chars = 0;
  const members: SubscriberRef[] = [];
  for (const member of slice) {
    if (chars >= charsLeft) break;
    const job: JobRecord = {
      id: newId(now.getTime()),
      environmentId: event.environmentId,
      eventId: event.id,
      notificationId: newId(now.getTime()),
      kind: 'step',
      stepIndex: index,
      stepId: step.stepId ?? null,
      type: step.type,
      status: 'running',
      providerId: null,
      attempts: 1,
      runAt: at,
      digestKey: null,
      mergedInto: null,
      state: {},
      createdAt: at,
    };
    const decision = decide(job, event, audience.recipient(event, member.key, member.subscriberId), overBudget, uncompilable);
    decisions.set(member.key, decision);
    members.push(member);
    chars += messageCharsOf(decision);
    await pause();
  }
  // The slice's reads and decisions held the loop in this turn (on SQLite every statement runs on
  // it), and its writes would hold it as long again: they get a turn of their own. A new process's
  // first slice, its code and its statements not compiled yet, held the loop longest.
  await yieldToEventLoop();
  const created = await createNotifications(trx, event, members, now, (member) => ({
    id: decisions.get(member.key)!.job.notificationId!,
    status: last ? (decisions.get(member.key)!.status === 'failed' ? 'failed' : 'completed') : 'processing',
  }));
  const decided = [...created.keys()].map((subscriberKey) => decisions.get(subscriberKey)!);
  await insertJobs(
    trx,
    decided.map(({ job, status }) => ({
      id: job.id,
      environmentId: job.environmentId,
      eventId: job.eventId,
      notificationId: job.notificationId,
      kind: job.kind,
      stepIndex: index,
      stepId: step.stepId,
      type: step.type,
      status,
      attempts: job.attempts,
      providerId: status === 'completed' ? 'herald' : null,
      runAt: now,
    })),
    now,
  );
  await writeOutcomes(trx, decided, now);
  if (!last) for (const d of decided) await continueAfter(trx, event, d.job, d.job.state, now);
  return { taken: members.length, chars };
}
