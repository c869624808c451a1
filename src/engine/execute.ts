// Running one claimed job. Each outcome is written in one transaction with what follows from it
// (the next step's job, the in-app message, the notification's status), and only while this worker
// still holds the job's lease: a worker that lost it changes nothing.
import { writeTransaction } from '../db/group-commit.js';
import type { Runner, Transaction } from '../db/knex.js';
import { findEvent, isCanceled, type EventRecord } from '../db/repos/events.js';
import { continueClaimedJob, jobsDue, passSendGate, recordOutcome, updateClaimedJob, type JobRecord, type JobStatus, type JobUpdate } from '../db/repos/jobs.js';
import { addExecutionDetail } from '../db/repos/execution-details.js';
import type { NewMessage } from '../db/repos/messages.js';
import { deliverInboxMessages } from './inbox.js';
import { notificationRecipient } from '../db/repos/notifications.js';
import { ProviderError } from '../providers/types.js';
import { PROVIDERS } from '../providers/catalogue.js';
import type { Schemas } from '../contract.js';
import { CANCELED_BEFORE_RUN, compileStepTemplates, decideStep, loadStepContext, sendDecided, suppression, type ChannelStep, type DecidedSend, type Delivered } from './deliver.js';
import { Undeliverable } from './undeliverable.js';
import { isRateLimited, verdictOf, type Verdict } from './destinations.js';
import { takeTurn } from './pacing.js';
import { continueAfter, nextActiveStep, startNotifications, THROTTLED_STATE, UNMET_CONDITION } from './schedule.js';
import { passThrottle, type ThrottleStep } from './throttle.js';
import { BATCH_MESSAGE_CHARS, startWithInApp } from './in-app-batch.js';
import { closeHeldDigest, DIGEST_EVENTS_BYTES, handOverOpenDigest, markRiders } from './digests.js';
import { newId } from '../ids.js';
import { FANOUT_BATCH_SIZE, fanoutSlice, fanoutSliceSize, type FanoutPosition } from '../db/repos/topics.js';
import { writersWaiting } from '../db/group-commit.js';
import { groupsOf, SLICE_CHARS } from '../db/chunks.js';
import { LeaseLost, type WorkerContext } from './worker-context.js';
import { yieldToEventLoop } from '../turns.js';
import { jobFacts, recordStepEvent, type SentRequest, type StepEvent } from './webhook-events.js';

export const MAX_ATTEMPTS = 5;


/** Exponential backoff with jitter: about 2 s, 4 s, 8 s, 16 s…, capped at 5 minutes. */
export function retryDelayMs(attempt: number, random: () => number): number {
  const ceiling = Math.min(300_000, 2000 * 2 ** (attempt - 1));
  return Math.round(ceiling * (0.5 + random() / 2));
}

/** Where a job counts the 429s it was given back for, and how many it may be. */
const RATE_LIMITED = 'rateLimited';
/** The attempt whose send-limit turn the job holds (pacing.ts): come back, it goes without another. */
const TURN_TAKEN = 'turnTaken';
const MAX_RATE_LIMITED = 20;

/** The shortest a provider's 429 holds its job back, whatever its Retry-After says. */
const MIN_RATE_LIMITED_WAIT_MS = 1_000;
/** The longest a provider's Retry-After holds a retry back. */
const MAX_RETRY_AFTER_MS = 3_600_000;

interface Outcome {
  status: Extract<JobStatus, 'completed' | 'skipped' | 'failed' | 'queued' | 'canceled' | 'pending'>;
  detail?: { status: Schemas['ExecutionDetail']['status']; text: string; raw?: string };
  providerId?: string;
  runAt?: Date;
  state?: Record<string, unknown>;
  message?: NewMessage;
  /** The claim's attempt is given back (a deferral, a provider's 429). */
  refundAttempt?: boolean;
  /** What the outcome tells the webhooks, recorded with it (webhook-events.ts). */
  webhook?: StepEvent;
}

/**
 * Records a job's outcome and what follows from it, in one transaction. An outcome given as a
 * function is decided inside that transaction (a throttle's count), so a worker that lost the
 * lease leaves no trace of it either. `event` is the job's as read when it started: only whether
 * it is canceled can have changed since, and that is read again with the outcome.
 */
async function settle(
  ctx: WorkerContext,
  job: JobRecord,
  started: EventRecord,
  decided: Outcome | ((trx: Transaction) => Promise<Outcome>),
  also?: (trx: Transaction, event: EventRecord) => Promise<void>,
): Promise<void> {
  const now = ctx.deps.clock.now();
  try {
    // On SQLite the outcomes of the jobs running side by side share a commit (group-commit.ts).
    await writeTransaction(ctx.deps.db, async (trx) => {
      const outcome = typeof decided === 'function' ? await decided(trx) : decided;
      const held = await recordOutcome(
        trx,
        job,
        ctx.owner,
        { status: outcome.status, runAt: outcome.runAt, providerId: outcome.providerId, state: outcome.state, refundAttempt: outcome.refundAttempt },
        outcome.detail && { status: outcome.detail.status, detail: outcome.detail.text, providerId: outcome.providerId, raw: outcome.detail.raw, isRetry: job.attempts > 1 },
        now,
      );
      if (!held) throw new LeaseLost();
      const event = { ...started, canceledAt: held.canceledAt };
      if (outcome.message) await deliverInboxMessages(trx, [outcome.message], now);
      if (outcome.webhook) await recordJobEvent(trx, job, event, outcome, outcome.webhook, now);
      if (also) await also(trx, event);
      if (job.kind === 'step' && ['completed', 'skipped', 'failed', 'canceled'].includes(outcome.status)) {
        // The count of a step's 429s is its own: the next step starts without it.
        const { [RATE_LIMITED]: _, [TURN_TAKEN]: __, ...state } = outcome.state ?? job.state;
        await continueAfter(trx, event, job, state, now, outcome.status === 'canceled');
      }
    });
  } catch (err) {
    if (!(err instanceof LeaseLost)) throw err;
  }
}

/** Records the webhook event of a channel step's outcome, in the outcome's transaction. */
function recordJobEvent(trx: Transaction, job: JobRecord, event: EventRecord, outcome: Outcome, webhook: StepEvent, now: Date): Promise<void> {
  const facts = jobFacts({ ...job, notificationId: job.notificationId!, stepIndex: job.stepIndex! }, event, {
    providerId: outcome.providerId ?? job.providerId,
    subscriberId: outcome.message?.subscriberId,
  });
  return recordStepEvent(trx, facts, webhook, now);
}

/** The event a step's delivered or skipped outcome tells the webhooks, with the message it rendered (`sent`). */
function deliveredEvent(delivered: Delivered, sent: SentRequest | undefined, now: Date): StepEvent {
  if (delivered.status === 'skipped') return { type: 'message.skipped', detail: delivered.detail };
  if (delivered.message) {
    delivered.message.id ??= newId(now.getTime());
    return { type: 'message.delivered', messageId: delivered.message.id, message: delivered.message };
  }
  return { type: 'message.sent', sent };
}

/**
 * The outcome of a failed send: retried later while attempts remain, unless the failure is final.
 * `sent` is the message it had rendered, if it got that far.
 */
function failure(ctx: WorkerContext, job: JobRecord, err: unknown, sent?: SentRequest): Outcome {
  const permanent = err instanceof Undeliverable || (err instanceof ProviderError && err.permanent);
  const text = err instanceof Error ? err.message : String(err);
  const raw = err instanceof ProviderError ? err.raw : undefined;
  // A 429 is the provider pacing us, not the send failing: the job comes back at its Retry-After
  // (else after a backoff of its own) and spends no attempt, up to MAX_RATE_LIMITED times a job, so
  // that a provider answering nothing else still ends it.
  const paced = Number(job.state[RATE_LIMITED] ?? 0);
  if (isRateLimited(err) && paced < MAX_RATE_LIMITED) {
    // At least a second: a provider answering `Retry-After: 0` to each try would take its twenty at once.
    const waitMs = err.retryAfterMs !== undefined ? Math.min(Math.max(err.retryAfterMs, MIN_RATE_LIMITED_WAIT_MS), MAX_RETRY_AFTER_MS) : retryDelayMs(paced + 1, ctx.random);
    const runAt = new Date(ctx.deps.clock.now().getTime() + waitMs);
    const detail = { status: 'warning' as const, text: `${text}: rate limited; trying again at ${runAt.toISOString()} (no attempt spent)`, raw };
    return { status: 'queued', runAt, refundAttempt: true, state: { ...job.state, [RATE_LIMITED]: paced + 1 }, detail };
  }
  const error = raw === undefined ? { message: text } : { message: text, providerStatus: raw };
  if (permanent || job.attempts >= MAX_ATTEMPTS) {
    const why = permanent ? text : `${text} (gave up after ${job.attempts} attempts)`;
    return { status: 'failed', detail: { status: 'failed', text: why, raw }, webhook: { type: 'message.failed', attempts: job.attempts, error: { ...error, message: why }, sent } };
  }
  // A provider that said how long to wait (Retry-After) is waited for, up to an hour.
  const asked = err instanceof ProviderError ? Math.min(err.retryAfterMs ?? 0, MAX_RETRY_AFTER_MS) : 0;
  const runAt = new Date(ctx.deps.clock.now().getTime() + Math.max(retryDelayMs(job.attempts, ctx.random), asked));
  return {
    status: 'queued',
    runAt,
    detail: { status: 'failed', text: `${text}; retrying at ${runAt.toISOString()}`, raw },
    webhook: { type: 'message.attempt_failed', attempt: job.attempts, maxAttempts: MAX_ATTEMPTS, nextAttemptAt: runAt, error, sent },
  };
}

/**
 * A topic fan-out, one batch at a time, each in one transaction with the notifications and jobs it
 * creates. After a batch that is not the last, the job is due again at once, from where the batch
 * ended, and is claimed again with whatever else is due. From the runner's control loop (`ctx.loop`),
 * while that loop takes work and no other control step is due when a batch ends, it goes on under the
 * same claim instead, its lease renewed, after letting the event loop run: a read that finds
 * nothing due costs less than handing the job back and claiming it again, two writes through the
 * due jobs' indexes (bench/README.md, "A fan-out keeps its claim", has the A/B). A batch run twice
 * (after a crash) creates nothing twice: notifications are unique per (event, subscriber).
 */
async function runFanout(ctx: WorkerContext, job: JobRecord, event: EventRecord): Promise<void> {
  // Its first in-app step's templates are compiled before its transactions, which would hold them
  // (startWithInApp finds them compiled, unless the cache let them go meanwhile).
  const first = event.workflow.steps[nextActiveStep(event, -1)];
  if (first?.type === 'in_app' && !event.canceledAt) await compileStepTemplates(event, first as ChannelStep);
  let position: FanoutPosition | undefined = job.state as unknown as FanoutPosition;
  while ((position = await runFanoutBatch(ctx, job, position))) await yieldToEventLoop();
}

/** One batch; answers where the fan-out goes on from when it keeps its claim. */
async function runFanoutBatch(ctx: WorkerContext, job: JobRecord, position: FanoutPosition): Promise<FanoutPosition | undefined> {
  const now = ctx.deps.clock.now();
  let next: FanoutPosition | undefined;
  try {
    await ctx.deps.db.transaction(async (trx) => {
      const event = await findEvent(trx, job.eventId, true);
      if (!event) return; // Its environment was deleted meanwhile, and the job with it.
      let change: JobUpdate = { status: 'canceled' };
      if (!event.canceledAt) {
        const { state, more } = await notifySlices(ctx, trx, event, position, now);
        // Due by now, not by the batch's start: a job that came while a long batch ran is due too.
        if (more && ctx.loop?.taking() && !(await jobsDue(trx, 'control', ctx.deps.clock.now()))) {
          const leaseUntil = new Date(now.getTime() + ctx.loop.leaseMs);
          if (!(await continueClaimedJob(trx, job.id, ctx.owner, state, leaseUntil, now))) throw new LeaseLost();
          next = state;
          return;
        }
        change = more ? { status: 'pending', runAt: now, state } : { status: 'completed' };
      }
      if (!(await updateClaimedJob(trx, job.id, ctx.owner, change, now))) throw new LeaseLost();
      if (change.status === 'completed') await addExecutionDetail(trx, { jobId: job.id, status: 'success', detail: 'Fan-out finished', isRetry: false }, now);
      // A fan-out under way when its event is canceled: cancelEvent leaves a taken job to its worker.
      if (change.status === 'canceled') await addExecutionDetail(trx, { jobId: job.id, status: 'warning', detail: `Canceled with event ${event.transactionId}`, isRetry: false }, now);
    });
  } catch (err) {
    if (!(err instanceof LeaseLost)) throw err;
    return undefined;
  }
  return next;
}

/**
 * Notifies a batch's members, a slice at a time, giving the event loop back between two slices; a
 * writer waiting for the connection then (SQLite) ends the batch early, for its commit to come next,
 * and so does BATCH_MESSAGE_CHARS written, within a slice too (startWithInApp takes its members
 * only until their messages pass it). A slice whose first step is in-app reads its members'
 * subscribers whole: it takes those whose `data` fits in SLICE_CHARS together (at least one), the
 * rest waiting for the next (a hundred subscribers of 1 MiB read and parsed at once held the loop
 * 370 ms).
 */
async function notifySlices(ctx: WorkerContext, trx: Transaction, event: EventRecord, position: FanoutPosition, now: Date) {
  const startsWithInApp = event.workflow.steps[nextActiveStep(event, -1)]?.type === 'in_app';
  let state = { ...position };
  let more = true;
  let written = 0;
  for (let done = 0; more && done < FANOUT_BATCH_SIZE && written < BATCH_MESSAGE_CHARS; ) {
    if (done > 0) {
      await yieldToEventLoop();
      if (writersWaiting(ctx.deps.db)) break;
    }
    const size = Math.min(FANOUT_BATCH_SIZE - done, startsWithInApp ? sliceSizeOf(trx, state.memberChars, BATCH_MESSAGE_CHARS - written) : fanoutSliceSize(trx));
    const slice = await fanoutSlice(trx, state, size);
    let members = startsWithInApp ? (groupsOf(slice.members, (member) => member.dataBytes, SLICE_CHARS)[0] ?? []) : slice.members;
    if (startsWithInApp) {
      const { taken, chars } = await startWithInApp(trx, event, members, now, BATCH_MESSAGE_CHARS - written);
      members = members.slice(0, taken);
      written += chars;
      if (taken > 0) state.memberChars = Math.ceil(chars / taken);
    } else await startNotifications(trx, event, members, now);
    state = { ...state, cursor: members.at(-1)?.key ?? state.cursor };
    done += members.length;
    more = slice.more || members.length < slice.members.length;
  }
  return { state, more };
}

/**
 * How many members a slice starting with in-app messages takes: as many as fanoutSliceSize, or
 * fewer when the last slice's messages say more would pass the `left` of the batch's
 * BATCH_MESSAGE_CHARS. (Slices growing from one member ran PostgreSQL's whole fan-out at a quarter
 * of its speed, most likely with plans settled on small lists.)
 */
function sliceSizeOf(db: Runner, memberChars: number | undefined, left: number): number {
  if (memberChars === undefined) return fanoutSliceSize(db);
  return Math.max(1, Math.min(fanoutSliceSize(db), Math.floor(left / Math.max(1, memberChars))));
}

/** A throttle step's outcome: counted in, or throttled, when its job's outcome is recorded. */
async function throttleOutcome(trx: Transaction, ctx: WorkerContext, job: JobRecord, event: EventRecord, step: ThrottleStep): Promise<Outcome> {
  const { subscriber_key: subscriberKey } = (await notificationRecipient(trx, job.notificationId!))!;
  const decision = await passThrottle(trx, event, step, subscriberKey, ctx.deps.clock.now());
  return {
    status: 'completed',
    detail: { status: decision.throttled ? 'warning' : 'success', text: decision.detail },
    state: decision.throttled ? { ...job.state, [THROTTLED_STATE]: decision.detail } : job.state,
  };
}

async function fireDigest(ctx: WorkerContext, job: JobRecord, event: EventRecord): Promise<void> {
  const closed = await closeHeldDigest(ctx.deps.db, job, ctx.owner, event.payload);
  if (!closed) return;
  await markRiders(ctx.deps.db, closed.riders, ctx.deps.clock.now());
  await settle(ctx, job, event, { status: 'completed', state: closed.state, detail: { status: 'success', text: digestClosed(closed.count, closed.shown) } });
}

/** The execution detail of a closed digest: how many events it gathered, and how many `step.events` holds when fewer. */
function digestClosed(count: number, shown: number): string {
  const closed = `Digest closed with ${count} event(s)`;
  return shown === count ? closed : `${closed}; step.events has the first ${shown}, whose payloads fit in ${DIGEST_EVENTS_BYTES.toLocaleString('en')} bytes together`;
}

export async function executeJob(ctx: WorkerContext, job: JobRecord): Promise<void> {
  const event = await findEvent(ctx.deps.db, job.eventId);
  if (!event) return; // Its environment was deleted, and the job with it.
  if (job.kind === 'fanout') return runFanout(ctx, job, event);
  if (event.canceledAt) {
    // A digest a worker closed and then died before recording it (its key dropped, its riders
    // marked): it closes again and is recorded as that worker would have, so that its send goes on
    // for its other events (continueAfter, passOnClosedDigest).
    // (A digest step's job waiting only to be skipped, its condition unmet, opened no digest.)
    const closedDigest = job.kind === 'step' && job.digestKey === null && typeof job.state[UNMET_CONDITION] !== 'string';
    if (closedDigest && event.workflow.steps[job.stepIndex!]?.type === 'digest') return fireDigest(ctx, job, event);
    // A digest still open, whose leader was claimed before the cancel could hand it over: this hands it over.
    const digestKey = job.digestKey;
    const handOver = digestKey === null ? undefined : (trx: Transaction) => handOverOpenDigest(trx, { id: job.id, digestKey, runAt: job.runAt }, ctx.deps.clock.now());
    return settle(ctx, job, event, { status: 'canceled', detail: { status: 'warning', text: CANCELED_BEFORE_RUN } }, handOver);
  }
  const step = event.workflow.steps[job.stepIndex!];
  const unmet = job.state[UNMET_CONDITION];
  if (typeof unmet === 'string') {
    const { [UNMET_CONDITION]: _, ...state } = job.state;
    return settle(ctx, job, event, { status: 'skipped', state, detail: { status: 'warning', text: unmet }, webhook: { type: 'message.skipped', detail: unmet, reason: 'condition' } });
  }
  if (step.type === 'delay') return settle(ctx, job, event, { status: 'completed', detail: { status: 'success', text: 'Delay over' } });
  if (step.type === 'digest') return fireDigest(ctx, job, event);
  if (step.type === 'throttle') return settle(ctx, job, event, (trx) => throttleOutcome(trx, ctx, job, event, step));
  let outcome: Outcome;
  // A send keeps its place at its destination until its outcome is recorded: a worker that dies
  // can have sent no more unrecorded sends there than the destination's bound.
  const place: { release?: () => void } = {};
  // The message as rendered for the send, once decided: its events' content (webhook-events.ts),
  // and the provider it goes through, which a failure names as a success does.
  let sent: SentRequest | undefined;
  let providerId: string | undefined;
  try {
    // Read, decide, send; the outcome is recorded below, in one transaction (settle).
    const context = await loadStepContext(ctx.deps, job, event, step);
    if (!suppression(event, context.step, context.recipient)) {
      const uncompilable = await compileStepTemplates(event, context.step);
      if (uncompilable) throw new Undeliverable(uncompilable);
    }
    const decided = decideStep(context);
    if ('destination' in decided) {
      sent = decided.request;
      providerId = decided.target.providerId;
    }
    const delivered = 'destination' in decided ? await sendThroughGate(ctx, job, event, decided, place) : decided;
    if (delivered === 'deferred') return;
    if (delivered === 'lost') {
      // Another worker may hold the job now: it is that worker's to run and record.
      place.release?.();
      return;
    }
    if (delivered === 'canceled') {
      place.release?.();
      return settle(ctx, job, event, { status: 'canceled', detail: { status: 'warning', text: CANCELED_BEFORE_RUN } });
    }
    outcome = {
      status: delivered.status,
      providerId: delivered.providerId,
      message: delivered.message,
      detail: { status: delivered.status === 'completed' ? 'success' : 'warning', text: delivered.detail, raw: delivered.raw },
      webhook: deliveredEvent(delivered, sent, ctx.deps.clock.now()),
    };
  } catch (err) {
    if (!(err instanceof Undeliverable) && !(err instanceof ProviderError)) {
      ctx.deps.logger.error({ err, jobId: job.id }, 'delivery failed unexpectedly');
    }
    outcome = { ...failure(ctx, job, err, sent), providerId };
  }
  try {
    await settle(ctx, job, event, outcome);
  } finally {
    place.release?.();
  }
}

/**
 * Sends once its turn under the send limits has come (pacing.ts) and the destination admits it;
 * a turn still to come puts the job back until then; a destination that is busy or whose breaker is open
 * defers the job instead (back in the queue at a later run_at, its attempt given back; a breaker's
 * deferral with an execution detail saying why). Right before it sends, it passes the job's send
 * gate (repos/jobs.ts): a cancel that came first closed it (`canceled`), or the lease was lost
 * (`lost`, the job may be another worker's now); either way it sends nothing.
 */
async function sendThroughGate(ctx: WorkerContext, job: JobRecord, event: EventRecord, decided: DecidedSend, place: { release?: () => void }): Promise<Delivered | 'deferred' | 'canceled' | 'lost'> {
  const turn = job.state[TURN_TAKEN] === job.attempts ? undefined : await takeTurn(ctx.deps, decided);
  if (turn) {
    const text = `Waiting for its turn under ${PROVIDERS[decided.target.providerId].displayName}'s send limits: goes at ${turn.toISOString()} (no attempt spent)`;
    const state = { ...job.state, [TURN_TAKEN]: job.attempts };
    await settle(ctx, job, event, { status: 'queued', runAt: turn, refundAttempt: true, state, detail: { status: 'queued', text } });
    return 'deferred';
  }
  const sendUnlessStopped = async () => {
    if (await passSendGate(ctx.deps.db, job.id, ctx.owner)) return sendDecided(decided, { deliveryId: job.id, outbound: ctx.deps.config.outbound });
    return (await isCanceled(ctx.deps.db, job.eventId)) ? ('canceled' as const) : ('lost' as const);
  };
  const gate = ctx.gate;
  if (!gate) return sendUnlessStopped();
  const admission = await gate.admit(decided.destination);
  if (!admission.go) {
    const detail = admission.why ? { status: 'warning' as const, text: `Deferred: ${admission.why} (no attempt spent)` } : undefined;
    await settle(ctx, job, event, { status: 'queued', runAt: admission.until, refundAttempt: true, detail });
    return 'deferred';
  }
  let verdict: Verdict = 'neutral';
  place.release = () => gate.finished(decided.destination, verdict, admission.started);
  try {
    const delivered = await sendUnlessStopped();
    if (typeof delivered !== 'string') verdict = 'ok';
    return delivered;
  } catch (err) {
    verdict = verdictOf(err);
    throw err;
  }
}
