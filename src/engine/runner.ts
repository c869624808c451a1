import { hostname } from 'node:os';
import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Deps } from '../deps.js';
import { FailureLog } from '../logger.js';
import { claimDueJobs, jobsDue, releaseJobs, renewLeases, retryJobsLater, type JobLane, type JobRecord } from '../db/repos/jobs.js';
import { executeJob, retryDelayMs } from './execute.js';
import type { WorkerContext } from './worker-context.js';
import { yieldToEventLoop } from '../turns.js';
import { Wakeup } from './wakeup.js';
import { executeInAppBatch, isInAppJob } from './in-app-batch.js';
import { Destinations } from './destinations.js';
import { forgetFullTurns } from './pacing.js';
import { writeStatement } from '../db/group-commit.js';
import { markNotificationsProcessing } from '../db/repos/notifications.js';
import { environmentsOf, organizationsOf } from '../db/repos/accounts.js';
import { EVERY_KIND_OF_WORK, listenWorkQueued, type QueuedWork } from '../db/work-queued.js';
import { claimDueDeliveries, deliveriesDue, releaseDeliveries, renewDeliveryLeases, type DeliveryRecord } from '../db/repos/webhook-deliveries.js';
import { deliverWebhook, EndpointWaits, SuccessLog, type WebhookRun } from './webhook-sender.js';

export interface RunnerOptions {
  /** In-app jobs, or control steps, claimed at a time; also runBatch's claim. */
  batchSize?: number;
  /** Jobs of one runBatch run at once. */
  concurrency?: number;
  /** Sends in flight at once. */
  slots?: number;
  /** Of those, the most one organization's environments hold together. */
  slotsPerOrganization?: number;
  /** Sends in flight at once to one destination. */
  perDestination?: number;
  /** Timeouts or 5xx in a row that open a destination's breaker, and how long it then waits. */
  breakerFailures?: number;
  breakerCooldownMs?: number;
  breakerMaxCooldownMs?: number;
  /** How long a claimed job stays this worker's; after that another worker may take it over. */
  leaseMs?: number;
  /** The longest wait between two looks for due jobs when there is nothing to do. */
  maxIdleMs?: number;
  /** How long a woken loop waits for more work to arrive before it claims. */
  coalesceMs?: number;
  random?: () => number;
}

/**
 * Triggers a woken local loop waits for before it claims (unless `coalesceMs` runs out first): so
 * that a claim takes about as many jobs at a light load as at a heavy one, and a delivery costs
 * about the same CPU.
 */
const COALESCE_TARGET = 16;

/** A slot freed wakes the send loop: it waits a little for more to free up, and refills them in one claim. */
const SEND_COALESCE = { target: 8, ms: 2 };

/** The least time between a send claim that found nothing and the next. */
const EMPTY_CLAIM_GAP_MS = 50;

/** The longest a claim that left environments out and found nothing holds back the next (leftOutEmpty). */
const LEFT_OUT_GAP_MAX_MS = 1_000;

/**
 * The longest a loop whose claims keep failing (the database down, mostly) waits before it tries
 * again: the wait doubles from `maxIdleMs` with each failure in a row, up to this.
 */
const MAX_RETRY_AFTER_FAILURES_MS = 5_000;

/** How a webhook delivery's id is told from a job's among the sends in flight. */
const WEBHOOK = 'webhook:';

/** The lanes of local work, each claimed by a loop of its own. */
const LOCAL_LANES = ['in_app', 'control'] as const;
type LocalLane = (typeof LOCAL_LANES)[number];

/** Control steps (delay, digest, throttle, fan-out batches) the control loop runs at once. */
const CONTROL_CONCURRENCY = 8;

/**
 * The job runner: claims due jobs under a lease and runs them, continuously, on three paths that
 * never wait for each other. Local work (only rows in our own database) is claimed in bulk, in two
 * lanes: in-app jobs, settled in bulk too, and control steps (delay, digest, throttle, fan-out),
 * run CONTROL_CONCURRENCY at a time. Sends run in a pool of slots, each slot refilled as its
 * send ends; a destination gets a bounded share of them and an environment half of them, and a
 * destination that keeps failing is deferred by its breaker (`destinations.ts`). Wake-ups are
 * coalesced (`pause`), so that work arriving together is claimed together. It runs in the API
 * process by default, or alone with `--role worker`; any number of runners can share one
 * PostgreSQL database.
 */
export class JobRunner {
  private readonly ctx: WorkerContext;
  private readonly options: Required<Omit<RunnerOptions, 'random'>>;
  private readonly destinations: Destinations;
  private stopping = false;
  /** Aborted by stop(): ends the waits of loops backing off after failures. */
  private stopped = new AbortController();
  private loops?: Promise<void>;
  /** Work committed in this process wakes the loops that claim it (db/work-queued.ts). */
  private stopListening?: () => void;
  /** Sends or webhook deliveries queued: they end the send loop's gap after an empty claim too. */
  private readonly sendsQueued = new Wakeup();
  private readonly localWakes: Record<LocalLane, Wakeup> = { in_app: new Wakeup(), control: new Wakeup() };
  private readonly sendWake = new Wakeup();
  /** A send of an organization at its share ended: its environments may claim again. */
  private readonly slotFreed = new Wakeup();
  /** Sends in flight: each job's run, by job id, and how many slots each organization holds. */
  private readonly inFlight = new Map<string, Promise<void>>();
  private readonly slotsOf = new Map<string, number>();
  /** The organization of each environment whose sends this worker has run (shareOwner). */
  private readonly organizationOf = new Map<string, string>();
  /** Webhook deliveries share the send slots; which of the two a claim asks first alternates, so neither starves the other. */
  private webhooksFirst = false;
  /**
   * Whether the last claim of each kind of send found any. A kind whose last claim found none is
   * looked for (a read) before it is claimed (a write): while webhooks stream, the send jobs' claim
   * would otherwise come back empty on every refill, and on SQLite each empty claim still takes
   * the file's write lock from the API.
   */
  private readonly sendsFound = { jobs: false, deliveries: false };
  /**
   * After a claim that left organizations out and found nothing: which it left out, and the
   * earliest time to claim again while all of those still are. Such a claim seeks from one
   * environment with sends waiting to the next (dueElsewhere), so it grows with their number: the
   * next waits EMPTY_CLAIM_GAP_MS or ten times as long as this one took, whichever is longer, up to
   * LEFT_OUT_GAP_MAX_MS, so that these reads take at most about a tenth of the loop's time.
   */
  private leftOutEmpty?: { excluded: string[]; after: number };
  private readonly webhooks: WebhookRun;
  /** Each loop's failures, logged as runs (the database down fails every try), not one line a try. */
  private readonly failures: Record<LocalLane | 'send', FailureLog>;

  constructor(private readonly deps: Deps, options: RunnerOptions = {}) {
    const d = deps.config.delivery;
    this.options = {
      batchSize: d.localBatch,
      concurrency: 16,
      slots: d.sendSlots,
      slotsPerOrganization: d.sendSlotsPerOrganization,
      perDestination: d.sendsPerDestination,
      breakerFailures: d.breakerFailures,
      breakerCooldownMs: d.breakerCooldownMs,
      breakerMaxCooldownMs: d.breakerMaxCooldownMs,
      leaseMs: deps.config.jobLeaseMs,
      maxIdleMs: 100,
      coalesceMs: d.coalesceMs,
      ...options,
    };
    const random = options.random ?? Math.random;
    this.destinations = new Destinations(
      {
        perDestination: this.options.perDestination,
        failures: this.options.breakerFailures,
        cooldownMs: this.options.breakerCooldownMs,
        maxCooldownMs: this.options.breakerMaxCooldownMs,
      },
      () => deps.clock.now().getTime(),
      random,
    );
    this.ctx = { deps, owner: `${hostname()}:${process.pid}:${randomBytes(4).toString('hex')}`, random };
    this.webhooks = { ...this.ctx, waits: new EndpointWaits(), successes: new SuccessLog(this.ctx) };
    this.failures = {
      in_app: new FailureLog(deps.logger, 'job runner: local work failed', { lane: 'in_app' }),
      control: new FailureLog(deps.logger, 'job runner: local work failed', { lane: 'control' }),
      send: new FailureLog(deps.logger, 'job runner: claiming sends failed'),
    };
  }

  start(): void {
    this.stopping = false;
    if (this.stopped.signal.aborted) this.stopped = new AbortController();
    this.stopListening ??= listenWorkQueued(this.deps.db, (work) => this.wake(work));
    this.loops ??= Promise.all([...LOCAL_LANES.map((lane) => this.localLoop(lane)), this.sendLoop()]).then(() => undefined);
  }

  /** Wakes the loops that claim the work queued. */
  private wake(work: ReadonlySet<QueuedWork>): void {
    for (const lane of LOCAL_LANES) if (work.has(lane)) this.localWakes[lane].notify();
    if (work.has('send') || work.has('webhooks')) {
      this.sendsQueued.notify();
      this.sendWake.notify();
    }
  }

  /** Stops claiming, lets the jobs under way finish, and gives back claimed jobs not yet started. */
  async stop(): Promise<void> {
    this.stopping = true;
    this.stopped.abort();
    this.stopListening?.();
    this.stopListening = undefined;
    // Every loop's idle wait ends now; a loop at work carries on.
    this.wake(EVERY_KIND_OF_WORK);
    await this.loops;
    this.loops = undefined;
  }

  /** Whether a destination's breaker is open in this runner (tests). */
  breakerOpen(destination: string): boolean {
    return this.destinations.isOpen(destination);
  }

  /** Runs due jobs until none is left (tests, with a clock they move by hand). */
  async runUntilIdle(maxBatches = 10_000): Promise<void> {
    for (let i = 0; i < maxBatches; i++) if ((await this.runBatch()) === 0) return;
    throw new Error(`Jobs were still due after ${maxBatches} batches`);
  }

  /**
   * Claims one batch of every lane and runs it to its end, every send at once without the
   * destinations' bounds (tests and tools: the continuous loops are what a server runs). Answers
   * how many jobs it claimed.
   */
  async runBatch(): Promise<number> {
    const jobs = await this.claim('all', this.options.batchSize);
    const deliveries = await this.claimDeliveries(this.options.batchSize);
    await this.runInApp(jobs.filter(isInAppJob));
    const unstarted: string[] = [];
    const queue: JobRecord[] = jobs.filter((job) => !isInAppJob(job));
    const worker = async () => {
      for (let job = queue.shift(); job; job = queue.shift()) {
        if (this.stopping) unstarted.push(job.id);
        else await this.execute(job, false);
      }
    };
    // A batch's last jobs wait for its first: the leases are renewed every third of their length
    // meanwhile, so no other worker takes over a job this one will still send.
    const ids = queue.map((job) => job.id);
    const renewal = ids.length > 0 ? setInterval(() => this.renewLeases(ids), this.options.leaseMs / 3) : undefined;
    try {
      await Promise.all([
        ...Array.from({ length: Math.min(this.options.concurrency, queue.length) }, worker),
        ...deliveries.map((delivery) => this.deliver(delivery, false)),
      ]);
    } finally {
      clearInterval(renewal);
    }
    await releaseJobs(this.deps.db, unstarted, this.ctx.owner, this.deps.clock.now());
    return jobs.length + deliveries.length;
  }

  private claimDeliveries(limit: number, excludeEnvironments?: string[]): Promise<DeliveryRecord[]> {
    return claimDueDeliveries(this.deps.db, { owner: this.ctx.owner, now: this.deps.clock.now(), leaseMs: this.options.leaseMs, limit, excludeEnvironments });
  }

  private async claim(lane: JobLane, limit: number, excludeEnvironments?: string[]): Promise<JobRecord[]> {
    const jobs = await claimDueJobs(this.deps.db, { owner: this.ctx.owner, now: this.deps.clock.now(), leaseMs: this.options.leaseMs, limit, lane, excludeEnvironments });
    // A stopping runner gives its claim back untouched.
    if (!this.stopping) await this.markUnderWay(jobs);
    return jobs;
  }

  /**
   * The notifications of claimed steps are under way (`processing`), marked in one statement a
   * claim rather than one a job: on PostgreSQL a commit of its own each. In-app jobs set their
   * notification's status in their batch. A mark that fails is logged, not thrown: the jobs are
   * this worker's now, and their outcome settles the status anyway.
   */
  private async markUnderWay(jobs: JobRecord[]): Promise<void> {
    const ids = jobs.filter((job) => job.kind === 'step' && !isInAppJob(job) && job.notificationId !== null).map((job) => job.notificationId!);
    if (ids.length === 0) return;
    try {
      await writeStatement(this.deps.db, (runner) => markNotificationsProcessing(runner, ids, this.deps.clock.now()));
    } catch (err) {
      this.deps.logger.warn({ err, notifications: ids.length }, 'job runner: marking notifications under way failed');
    }
  }

  /**
   * Waits for a wake-up or `idleMs`. Woken, it waits on, up to `coalesceMs`, until `target` wake-ups
   * came since the last claim, so that what arrives together is claimed together. It waits on only
   * while wake-ups come more often than `coalesceMs`: a lone trigger, with nothing to share its
   * claim, is claimed at once.
   */
  private async pause(wake: Wakeup, idleMs: number, target: number, coalesceMs: number): Promise<void> {
    if (!(await wake.wait(idleMs)) || this.stopping) return;
    const until = Date.now() + coalesceMs;
    while (wake.arrived < target && wake.expectsMoreWithin(coalesceMs) && !this.stopping) {
      const left = until - Date.now();
      if (left <= 0) return;
      await wake.wait(left);
    }
  }

  // ── local work ────────────────────────────────────────────────────────────────────────────

  /**
   * Claims and runs one lane of local work, continuously: in-app jobs in bulk, control steps a few
   * at a time. Each lane has a loop of its own, so an in-app delivery never waits for a control
   * step under way (a fan-out's batch, a digest closing). What one lane's jobs queue next may be
   * another's: that wakes the other loop once it commits (db/work-queued.ts).
   */
  private async localLoop(lane: LocalLane): Promise<void> {
    const wake = this.localWakes[lane];
    let idleMs = 10;
    let claimed = 0;
    while (!this.stopping) {
      await yieldToEventLoop();
      let goOn = false;
      let failures = 0;
      try {
        wake.arrived = 0;
        // After a claim that found nothing, a read first: an idle look, or a wake for work that
        // another process claimed first, then costs no write.
        const look = claimed === 0;
        claimed = 0;
        const jobs = look && !(await jobsDue(this.deps.db, lane, this.deps.clock.now())) ? [] : await this.claim(lane, this.options.batchSize);
        claimed = jobs.length;
        if (this.stopping) {
          await releaseJobs(this.deps.db, jobs.map((job) => job.id), this.ctx.owner, this.deps.clock.now());
          break;
        }
        if (lane === 'in_app') {
          await this.runInApp(jobs);
        } else {
          goOn = jobs.some((job) => job.kind === 'fanout');
          const unstarted = await this.runControl(jobs);
          await releaseJobs(this.deps.db, unstarted, this.ctx.owner, this.deps.clock.now());
        }
        this.failures[lane].succeeded();
      } catch (err) {
        failures = this.failures[lane].failed(err);
      }
      if (failures > 0) {
        await this.retryAfterFailures(failures, wake);
        continue;
      }
      // A full claim leaves more behind, and a fan-out that handed its job back is due again at once: go on.
      if (claimed >= this.options.batchSize || goOn) continue;
      idleMs = claimed > 0 ? 10 : Math.min(this.options.maxIdleMs, idleMs * 2);
      await this.pause(wake, idleMs, COALESCE_TARGET, this.options.coalesceMs);
    }
  }

  /**
   * The wait after `failures` failed tries in a row, doubling from `maxIdleMs`: a database that is
   * down is not asked ten times a second by each loop. Past `maxIdleMs`, the loop's wake ends it
   * (work committed: the database answers again), and stop() ends it at any time.
   */
  private async retryAfterFailures(failures: number, wake: Wakeup): Promise<void> {
    const ms = Math.min(MAX_RETRY_AFTER_FAILURES_MS, this.options.maxIdleMs * 2 ** Math.min(failures - 1, 20));
    await sleep(Math.min(ms, this.options.maxIdleMs), undefined, { signal: this.stopped.signal }).catch(() => undefined);
    if (ms > this.options.maxIdleMs && !this.stopping) await wake.wait(ms - this.options.maxIdleMs);
  }

  /** Settles claimed in-app jobs in bulk. */
  private async runInApp(jobs: JobRecord[]): Promise<void> {
    if (jobs.length === 0) return;
    try {
      await executeInAppBatch(this.ctx, jobs);
    } catch (err) {
      this.deps.logger.error({ err, jobs: jobs.length }, 'in-app batch failed unexpectedly');
      await this.retryLater(jobs);
    }
  }

  /**
   * Runs claimed control steps (no network either) CONTROL_CONCURRENCY at a time. Answers those it
   * did not start. A fan-out goes on to its next batch without being claimed again while no other
   * control step is due, this claim's included.
   */
  private async runControl(jobs: JobRecord[]): Promise<string[]> {
    const queue = [...jobs];
    const unstarted: string[] = [];
    const loop = { leaseMs: this.options.leaseMs, taking: () => !this.stopping && queue.length === 0 };
    const worker = async () => {
      for (let job = queue.shift(); job; job = queue.shift()) {
        if (this.stopping) unstarted.push(job.id);
        else await this.execute(job, false, loop);
      }
    };
    await Promise.all(Array.from({ length: Math.min(CONTROL_CONCURRENCY, queue.length) }, worker));
    return unstarted;
  }

  // ── sends ─────────────────────────────────────────────────────────────────────────────────

  private async sendLoop(): Promise<void> {
    // Only sends in flight are renewed: every claimed send starts at once, so none waits unrenewed.
    const renewal = setInterval(() => {
      this.renewLeases([...this.inFlight.keys()]);
      forgetFullTurns(this.deps).catch((err: unknown) => this.deps.logger.warn({ err }, 'job runner: forgetting full send-limit windows failed'));
    }, this.options.leaseMs / 3);
    let idleMs = 10;
    let claimed = 0;
    try {
      while (!this.stopping) {
        const free = this.options.slots - this.inFlight.size;
        claimed = 0;
        let limit = 0;
        let leftOut = false;
        if (free > 0) {
          try {
            this.sendWake.arrived = 0;
            this.sendsQueued.clear();
            ({ claimed, limit, leftOut } = await this.claimSends(free));
            this.failures.send.succeeded();
          } catch (err) {
            await this.retryAfterFailures(this.failures.send.failed(err), this.sendWake);
            continue;
          }
        }
        // A full claim may leave more behind, for the slots still free.
        if (limit > 0 && claimed >= limit && this.inFlight.size < this.options.slots) {
          await yieldToEventLoop();
          continue;
        }
        idleMs = claimed > 0 ? 10 : Math.min(this.options.maxIdleMs, idleMs * 2);
        // A send ending wakes this loop to refill its slot, whether or not anything is due: after
        // a claim that found nothing, the next waits a little, so a stream of sends ending costs
        // few empty claims, unless sends or webhook deliveries are queued meanwhile. A claim that
        // left out an organization at its share may have found nothing for that reason alone: it
        // claims again as soon as one of the sends in flight ends (for the organizations no longer
        // at their share; the others' wait out leftOutEmpty).
        if (free > 0 && claimed === 0) {
          if (leftOut) await this.slotFreed.wait(EMPTY_CLAIM_GAP_MS);
          else await this.sendsQueued.wait(EMPTY_CLAIM_GAP_MS);
        }
        // A send ending, or sends or deliveries queued, wake this wait.
        await this.pause(this.sendWake, idleMs, SEND_COALESCE.target, Math.min(SEND_COALESCE.ms, this.options.coalesceMs));
      }
      await Promise.all(this.inFlight.values());
    } finally {
      clearInterval(renewal);
    }
  }

  /**
   * Claims sends for the free slots and starts each. Organizations whose share of the slots is
   * taken have their environments left out, and a claim takes no more than the smallest share left
   * of those holding slots, so that whichever organization its jobs are of, none goes over its
   * share: one tenant's slow destinations, in however many environments, leave the others theirs.
   * A kind of send (jobs, webhook deliveries) whose last claim found nothing is first looked for,
   * and claimed only when some is due (`sendsFound`): a send ending wakes this loop whatever is due.
   * With environments left out there is no look (it would count their sends too), and after such a
   * claim that found nothing the next waits a while (`leftOutEmpty`).
   */
  private async claimSends(free: number): Promise<{ claimed: number; limit: number; leftOut: boolean }> {
    const share = this.options.slotsPerOrganization;
    // A send of a left-out organization that ends from here on is a reason to claim again.
    this.slotFreed.clear();
    const full = [...this.slotsOf].filter(([, n]) => n >= share).map(([organizationId]) => organizationId);
    const leftOut = full.length > 0;
    const left = [...this.slotsOf.values()].filter((n) => n < share).map((n) => share - n);
    const limit = Math.min(free, share, ...left);
    // Nothing was found leaving out these organizations, or fewer, a moment ago: no other can be claimed yet.
    const empty = this.leftOutEmpty;
    if (leftOut && empty && Date.now() < empty.after && empty.excluded.every((id) => full.includes(id))) return { claimed: 0, limit, leftOut };
    const started = Date.now();
    this.webhooksFirst = !this.webhooksFirst;
    const now = this.deps.clock.now();
    // With environments left out the look cannot tell (it counts theirs too): claim.
    const found = this.sendsFound;
    const [jobsMayBeDue, deliveriesMayBeDue, excluded] = await Promise.all([
      found.jobs || leftOut || jobsDue(this.deps.db, 'send', now),
      found.deliveries || leftOut || deliveriesDue(this.deps.db, now),
      // A share owner may be an environment whose organization could not be read (shareOwner).
      leftOut ? environmentsOf(this.deps.db, full).then((ids) => [...full, ...ids]) : [],
    ]);
    let deliveries: DeliveryRecord[] = [];
    let jobs: JobRecord[] = [];
    const takeDeliveries = async (n: number) => {
      deliveries = await this.claimDeliveries(n, excluded);
      found.deliveries = deliveries.length > 0;
    };
    // Should the second claim fail, what the first took is this worker's now: it is started (or
    // given back) below before the failure is thrown, not left to wait out its lease.
    let failure: { err: unknown } | undefined;
    try {
      if (this.webhooksFirst && deliveriesMayBeDue) await takeDeliveries(limit);
      if (jobsMayBeDue && deliveries.length < limit) {
        jobs = await this.claim('send', limit - deliveries.length, excluded);
        found.jobs = jobs.length > 0;
      }
      if (!this.webhooksFirst && deliveriesMayBeDue && jobs.length < limit) await takeDeliveries(limit - jobs.length);
      await this.learnOrganizations([...jobs, ...deliveries].map((send) => send.environmentId));
    } catch (err) {
      failure = { err };
    }
    const claimed = jobs.length + deliveries.length;
    if (leftOut) {
      const gapMs = Math.min(LEFT_OUT_GAP_MAX_MS, Math.max(EMPTY_CLAIM_GAP_MS, 10 * (Date.now() - started)));
      this.leftOutEmpty = claimed === 0 ? { excluded: full, after: Date.now() + gapMs } : undefined;
    }
    if (this.stopping) {
      await releaseJobs(this.deps.db, jobs.map((job) => job.id), this.ctx.owner, this.deps.clock.now());
      await releaseDeliveries(this.deps.db, deliveries.map((delivery) => delivery.id), this.ctx.owner, this.deps.clock.now());
    } else {
      for (const job of jobs) this.startSend(job.id, job.environmentId, () => this.execute(job, true));
      for (const delivery of deliveries) this.startSend(WEBHOOK + delivery.id, delivery.environmentId, () => this.deliver(delivery, true));
    }
    if (failure) throw failure.err;
    return { claimed, limit, leftOut };
  }

  /** Reads the organizations of environments whose sends this worker has not run before. */
  private async learnOrganizations(environmentIds: string[]): Promise<void> {
    const unknown = [...new Set(environmentIds)].filter((id) => !this.organizationOf.has(id));
    if (unknown.length === 0) return;
    // Environments deleted over a long run would otherwise stay: forgetting all costs one read each.
    if (this.organizationOf.size > 10_000) this.organizationOf.clear();
    for (const [environmentId, organizationId] of await organizationsOf(this.deps.db, unknown)) this.organizationOf.set(environmentId, organizationId);
  }

  /**
   * Whose share of the slots a send of this environment takes: its organization's. Should reading
   * it have failed (learnOrganizations), the environment's own, a share as large, until it is known.
   */
  private shareOwner(environmentId: string): string {
    return this.organizationOf.get(environmentId) ?? environmentId;
  }

  private startSend(id: string, environmentId: string, send: () => Promise<void>): void {
    const owner = this.shareOwner(environmentId);
    this.slotsOf.set(owner, (this.slotsOf.get(owner) ?? 0) + 1);
    const run = send().finally(() => {
      this.inFlight.delete(id);
      const left = this.slotsOf.get(owner)! - 1;
      if (left > 0) this.slotsOf.set(owner, left);
      else this.slotsOf.delete(owner);
      if (left + 1 >= this.options.slotsPerOrganization) this.slotFreed.notify();
      this.sendWake.notify();
    });
    this.inFlight.set(id, run);
  }

  private async deliver(delivery: DeliveryRecord, gated: boolean): Promise<void> {
    try {
      await deliverWebhook(this.webhooks, delivery, gated ? this.destinations : undefined);
    } catch (err) {
      // Left running under its lease: another worker (or this one) takes it over when the lease ends.
      this.deps.logger.error({ err, deliveryId: delivery.id }, 'webhook delivery failed unexpectedly');
    }
  }

  private async execute(job: JobRecord, gated: boolean, loop?: WorkerContext['loop']): Promise<void> {
    try {
      await executeJob({ ...this.ctx, gate: gated ? this.destinations : undefined, loop }, job);
    } catch (err) {
      this.deps.logger.error({ err, jobId: job.id }, 'job failed unexpectedly');
      await this.retryLater([job]);
    }
  }

  /**
   * Jobs whose run failed unexpectedly go back in the queue after their backoff (a busy database,
   * a bug), not at the end of their lease. Should even that fail, the lease still ends.
   */
  private async retryLater(jobs: JobRecord[]): Promise<void> {
    const now = this.deps.clock.now();
    const attempts = Math.max(1, ...jobs.map((job) => job.attempts));
    try {
      await retryJobsLater(this.deps.db, jobs.map((job) => job.id), this.ctx.owner, now, new Date(now.getTime() + retryDelayMs(attempts, this.ctx.random)));
    } catch (err) {
      this.deps.logger.error({ err, jobs: jobs.length }, 'job runner: putting failed jobs back failed; their leases will end');
    }
  }

  private renewLeases(ids: string[]): void {
    if (ids.length === 0) return;
    const until = new Date(this.deps.clock.now().getTime() + this.options.leaseMs);
    const failed = (err: unknown) => this.deps.logger.error({ err }, 'job runner: renewing leases failed');
    const jobs = ids.filter((id) => !id.startsWith(WEBHOOK));
    const deliveries = ids.filter((id) => id.startsWith(WEBHOOK)).map((id) => id.slice(WEBHOOK.length));
    if (jobs.length > 0) renewLeases(this.deps.db, this.ctx.owner, jobs, until).catch(failed);
    if (deliveries.length > 0) renewDeliveryLeases(this.deps.db, this.ctx.owner, deliveries, until).catch(failed);
  }
}
