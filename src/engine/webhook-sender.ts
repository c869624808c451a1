// Delivering one claimed webhook delivery: signed as Standard Webhooks v1, sent through the
// providers' HTTP path (the outbound guard, its own 15 s bound, no redirects), admitted by the
// runner's destinations (each endpoint one) like any send, and paced by the endpoint's
// rateLimitPerSecond in turns every worker shares (pacing.ts). The try and what follows from it (the next try on Svix's schedule, the
// endpoint's health, its disabling) are written in one transaction, while this worker holds it.
import type { Transaction } from '../db/knex.js';
import { writeStatement, writeTransaction } from '../db/group-commit.js';
import { addAttempt, deferEndpointDeliveries, dropDelivery, failPendingDeliveries, finishDelivery, finishSucceeded, type DeliveryChange, type DeliveryRecord, type NewAttempt } from '../db/repos/webhook-deliveries.js';
import { disableEndpoint, endpointTargets, markEndpointFailing, type EndpointTarget } from '../db/repos/webhook-endpoints.js';
import { subscriptionsChanged } from '../db/webhook-subscriptions.js';
import { post, type HttpAnswer } from '../providers/http.js';
import { ProviderError } from '../providers/types.js';
import { standardWebhookHeaders } from '../providers/standard-webhooks.js';
import type { OutboundPolicy } from '../outbound-guard.js';
import { destinationOf, verdictOf, type Gate, type Verdict } from './destinations.js';
import { takeEndpointTurn } from './pacing.js';
import { recordWebhookEvent } from './webhook-events.js';
import { LeaseLost, type WorkerContext } from './worker-context.js';
import { BoundedMap } from '../bounded-map.js';

/** Svix's schedule: the waits after the 1st, 2nd, … failed try (8 tries over about 27.6 hours). */
export const RETRY_SCHEDULE_MS = [5_000, 300_000, 1_800_000, 7_200_000, 18_000_000, 36_000_000, 36_000_000];
/** Each wait is spread ±20 %, so that the endpoints of one outage do not all come back at once. */
const JITTER = 0.2;
/** The longest an endpoint's Retry-After holds a try back. */
const MAX_RETRY_AFTER_MS = 36_000_000;
/** A whole try, connecting and reading the answer included. */
export const WEBHOOK_TIMEOUT_MS = 15_000;
/** An endpoint whose every try failed this long is disabled. */
export const DISABLE_AFTER_MS = 5 * 24 * 3_600_000;
/** The part of an answer kept with its try. */
const RESPONSE_CHARS = 1024;

/** The wait after failed try `attempt` (from 1), or undefined when the schedule is over. */
export function retryWaitMs(attempt: number, random: () => number): number | undefined {
  const wait = RETRY_SCHEDULE_MS[attempt - 1];
  return wait === undefined ? undefined : Math.round(wait * (1 - JITTER + 2 * JITTER * random()));
}

/**
 * The furthest ahead a delivery over its endpoint's rate is given its turn: a backlog past it asks
 * again then. Far enough that few ask twice; near enough that a rate raised since holds nothing
 * back for long.
 */
const PACED_AHEAD_MS = 5 * 60_000;

/**
 * When each endpoint's backlog was last sent back to (putBack): the other deliveries of one claim,
 * turned away before that time has come, go back to that same time, so none moves the rows the
 * last one moved again to a later random time of its own, and rows put back together come due
 * together, for one claim to take. A send admitted to the endpoint (its hang over, its breaker
 * closed) forgets it.
 */
export class EndpointWaits {
  private readonly until = new BoundedMap<string, number>(10_000);

  /** The time the endpoint's backlog waits for: the one set before while it is to come, else `until`. */
  settle(endpointId: string, until: Date, now: number): Date {
    const set = this.until.get(endpointId);
    if (set !== undefined && set > now) return new Date(set);
    this.until.set(endpointId, until.getTime());
    return until;
  }

  /** A send to the endpoint was admitted: nothing holds its backlog back. */
  forget(endpointId: string): void {
    this.until.delete(endpointId);
  }
}

/** A successful try waiting for its batch, and how to tell its sender the batch's fate. */
interface WaitingTry {
  attempt: NewAttempt;
  settle: (err?: unknown) => void;
}

/** Batches of successes written at once: one held by a row lock (PostgreSQL) does not hold up the rest. */
const SUCCESS_WRITERS = 4;

/**
 * Successful tries, recorded together: the tries that end while a batch is being written go in
 * the next, so under load a batch of them costs a few statements (finishSucceeded) instead of
 * three each. Each try is settled only once its batch is committed. A batch that fails is written
 * again one try at a time, so one bad row fails (and is sent again after its lease) alone.
 */
export class SuccessLog {
  private readonly waiting: WaitingTry[] = [];
  private writers = 0;

  constructor(private readonly ctx: WorkerContext) {}

  add(attempt: NewAttempt): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      this.waiting.push({ attempt, settle: (err) => (err === undefined ? resolve() : reject(err)) });
      if (this.writers < SUCCESS_WRITERS) {
        this.writers++;
        // The tries answered in this turn of the event loop join the batch.
        setImmediate(() => void this.write());
      }
    });
  }

  private async write(): Promise<void> {
    try {
      for (let batch = this.waiting.splice(0); batch.length > 0; batch = this.waiting.splice(0)) {
        try {
          await this.finish(batch.map((item) => item.attempt));
          for (const item of batch) item.settle();
        } catch {
          for (const item of batch) await this.finishAlone(item);
        }
      }
    } finally {
      this.writers--;
    }
  }

  private async finishAlone(item: WaitingTry): Promise<void> {
    try {
      await this.finish([item.attempt]);
      item.settle();
    } catch (err) {
      item.settle(err ?? new Error('recording a webhook try failed'));
    }
  }

  private finish(attempts: NewAttempt[]): Promise<unknown> {
    const { db, clock } = this.ctx.deps;
    return writeTransaction(db, (trx) => finishSucceeded(trx, attempts, this.ctx.owner, clock.now()));
  }
}

export interface WebhookRun extends WorkerContext {
  waits: EndpointWaits;
  successes: SuccessLog;
}

interface Tried {
  statusCode?: number;
  durationMs: number;
  response?: string;
  error?: string;
  retryAfterMs?: number;
  ok: boolean;
  gone: boolean;
  refused: boolean;
}

/**
 * A try has WEBHOOK_TIMEOUT_MS to be answered, as the README promises the endpoint's owner; the
 * providers' own first-byte and send timeouts (10 and 20 s by default) do not shorten it. Their
 * connect timeout, a bound on an unreachable host, does.
 */
function policyOf(outbound: OutboundPolicy): OutboundPolicy {
  return {
    ...outbound,
    timeouts: { connectMs: Math.min(outbound.timeouts.connectMs, WEBHOOK_TIMEOUT_MS), firstByteMs: WEBHOOK_TIMEOUT_MS, sendMs: WEBHOOK_TIMEOUT_MS },
  };
}

async function tryOnce(ctx: WebhookRun, delivery: DeliveryRecord, endpoint: EndpointTarget): Promise<Tried> {
  const started = performance.now();
  const headers = { ...standardWebhookHeaders(endpoint.secrets, delivery.eventId, ctx.deps.clock.now(), delivery.payload), 'herald-event-type': delivery.eventType };
  let answer: HttpAnswer;
  try {
    answer = await post({ url: endpoint.url, body: delivery.payload, headers, anyStatus: true }, { deliveryId: delivery.id, outbound: policyOf(ctx.deps.config.outbound) });
  } catch (err) {
    const durationMs = Math.round(performance.now() - started);
    const refused = err instanceof ProviderError && err.kind === 'refused';
    return { durationMs, error: err instanceof Error ? err.message : String(err), ok: false, gone: false, refused };
  }
  const durationMs = Math.round(performance.now() - started);
  const ok = answer.status >= 200 && answer.status < 300;
  const tried: Tried = { statusCode: answer.status, durationMs, response: answer.text.slice(0, RESPONSE_CHARS), ok, gone: answer.status === 410, refused: false };
  if (!ok) tried.error = answer.status >= 300 && answer.status < 400 ? `answered ${answer.status}, a redirect, which Herald does not follow` : `answered ${answer.status}`;
  if (answer.retryAfterMs !== undefined) tried.retryAfterMs = answer.retryAfterMs;
  return tried;
}

/** What a try says of its destination's health, for the breaker: as for any send. */
function verdictOfTry(tried: Tried): Verdict {
  if (tried.statusCode === undefined) return tried.refused ? 'neutral' : verdictOf(new ProviderError(tried.error ?? '', false));
  if (tried.statusCode === 429) return 'neutral';
  return tried.statusCode >= 500 || tried.statusCode === 408 ? 'failed' : 'ok';
}

/** Delivers one claimed delivery and records the try. */
export async function deliverWebhook(ctx: WebhookRun, delivery: DeliveryRecord, gate?: Gate): Promise<void> {
  const { db, clock, config } = ctx.deps;
  const endpoint = (await endpointTargets(db, [delivery.endpointId], config.secret, clock.now())).get(delivery.endpointId);
  if (!endpoint) return dropDelivery(db, delivery.id, ctx.owner); // deleted since the event was recorded
  if (endpoint.disabled && delivery.eventType !== 'webhook.test') {
    await record(ctx, delivery, { status: 'failed' }, { durationMs: 0, error: 'The endpoint is disabled', ok: false, gone: false, refused: false }, endpoint);
    return;
  }
  const rate = endpoint.rateLimitPerSecond;
  // A test event, someone waiting for it, goes outside the endpoint's rate (a person sends few);
  // a delivery back at the turn it took under this rate goes without taking another.
  if (rate !== null && delivery.eventType !== 'webhook.test' && delivery.pacedAtRate !== rate) {
    const turn = await takeEndpointTurn(ctx.deps, endpoint.id, rate, PACED_AHEAD_MS);
    // Alone, with its own turn: the backlog of an endpoint over its rate is not all due again at
    // one time (deferred together, a large one would come due and be moved again every turn).
    if (turn) return putBack(ctx, delivery, turn.at, false, turn.taken ? rate : undefined);
  }
  // Each endpoint is a destination of its own, its tenant's: endpoints of several tenants often
  // share a host (a receiving service), and one tenant's failing or hanging endpoint there must
  // not take the others' places or open their breaker.
  const destination = destinationOf('webhook', endpoint.id, endpoint.url);
  let tried: Tried;
  if (gate) {
    const admission = await gate.admit(destination);
    if (!admission.go) return putBack(ctx, delivery, admission.until, admission.allUntil === true);
    ctx.waits.forget(endpoint.id);
    let verdict: Verdict = 'neutral';
    try {
      tried = await tryOnce(ctx, delivery, endpoint);
      verdict = verdictOfTry(tried);
    } finally {
      // The destination is free again once its answer is in; recording the try is ours to do.
      gate.finished(destination, verdict, admission.started);
    }
  } else {
    tried = await tryOnce(ctx, delivery, endpoint);
  }
  // Most tries succeed: they are written with others.
  if (tried.ok && !endpoint.disabled) return ctx.successes.add(attemptOf(delivery, tried));
  await record(ctx, delivery, nextStep(ctx, delivery, tried), tried, endpoint);
}

function attemptOf(delivery: DeliveryRecord, tried: Tried): NewAttempt {
  return {
    deliveryId: delivery.id,
    attempt: delivery.attempts,
    trigger: delivery.manual ? 'manual' : 'scheduled',
    statusCode: tried.statusCode,
    durationMs: tried.durationMs,
    response: tried.response,
    error: tried.error,
  };
}

/**
 * Back to the queue without a try (the endpoint's pace, a busy or broken destination). When each
 * of the endpoint's deliveries would be turned away alike until then (`all`: its breaker is open,
 * its sends hang), those due before then go back with it, 500 a write, rather than a claim and a
 * write each, ahead of the other endpoints' deliveries.
 */
async function putBack(ctx: WebhookRun, delivery: DeliveryRecord, until: Date, all: boolean, pacedAtRate?: number): Promise<void> {
  const now = ctx.deps.clock.now();
  // Through writeStatement: on SQLite the put-backs of a claim share a commit (a sync to disk each,
  // on the event loop, held it tens of ms per claim over a paced backlog).
  const alone: DeliveryChange = { status: 'pending', runAt: until, refundAttempt: true, pacedAtRate };
  if (!all) return void (await writeStatement(ctx.deps.db, (db) => finishDelivery(db, delivery.id, ctx.owner, alone, now)));
  const backlogUntil = ctx.waits.settle(delivery.endpointId, until, now.getTime());
  await writeTransaction(ctx.deps.db, async (trx) => {
    const change: DeliveryChange = { status: 'pending', runAt: backlogUntil, refundAttempt: true };
    if (await finishDelivery(trx, delivery.id, ctx.owner, change, now)) await deferEndpointDeliveries(trx, delivery.endpointId, backlogUntil, now);
  });
}

function nextStep(ctx: WebhookRun, delivery: DeliveryRecord, tried: Tried): DeliveryChange {
  if (tried.ok) return { status: 'succeeded' };
  // A 410 disables the endpoint; a refused address stays refused whenever it is tried.
  if (tried.gone || tried.refused) return { status: 'failed' };
  const wait = retryWaitMs(delivery.attempts, ctx.random);
  if (wait === undefined) return { status: 'failed' };
  const asked = Math.min(tried.retryAfterMs ?? 0, MAX_RETRY_AFTER_MS);
  return { status: 'pending', runAt: new Date(ctx.deps.clock.now().getTime() + Math.max(wait, asked)) };
}

async function record(ctx: WebhookRun, delivery: DeliveryRecord, change: DeliveryChange, tried: Tried, endpoint: EndpointTarget): Promise<void> {
  const now = ctx.deps.clock.now();
  try {
    // On SQLite the tries ending together share a commit (group-commit.ts), as jobs' outcomes do.
    await writeTransaction(ctx.deps.db, async (trx) => {
      if (!(await finishDelivery(trx, delivery.id, ctx.owner, change, now))) throw new LeaseLost();
      await addAttempt(trx, attemptOf(delivery, tried), now);
      // A success here is a test event to a disabled endpoint (the others go through SuccessLog).
      if (endpoint.disabled || tried.ok) return;
      const failingSince = await markEndpointFailing(trx, endpoint.id, now);
      if (tried.gone) return disable(trx, endpoint, 'The endpoint answered 410 Gone', failingSince, now);
      if (now.getTime() - Date.parse(failingSince) >= DISABLE_AFTER_MS) {
        return disable(trx, endpoint, 'Every delivery to the endpoint failed for 5 days', failingSince, now);
      }
    });
  } catch (err) {
    if (!(err instanceof LeaseLost)) throw err;
  }
}

/** Herald disables an endpoint: its waiting deliveries fail, and the environment's other endpoints are told. */
async function disable(trx: Transaction, endpoint: EndpointTarget, reason: string, failingSince: string, now: Date): Promise<void> {
  if (!(await disableEndpoint(trx, endpoint.id, reason, now))) return;
  await failPendingDeliveries(trx, endpoint.id, now);
  await subscriptionsChanged(trx, endpoint.environmentId);
  const data = { endpointId: endpoint.id, url: endpoint.url, reason, failingSince };
  await recordWebhookEvent(trx, endpoint.environmentId, 'webhook_endpoint.disabled', data, now, { only: (id) => id !== endpoint.id });
}

