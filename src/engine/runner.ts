import { hostname } from 'node:os';
import { randomBytes } from 'node:crypto';
import type { Deps } from '../deps.js';
import { claimDueJobs, releaseJobs, renewLeases, type JobRecord } from '../db/repos/jobs.js';
import { executeJob } from './execute.js';
import type { WorkerContext } from './worker-context.js';
import { executeInAppBatch, isInAppJob } from './in-app-batch.js';

export interface RunnerOptions {
  /** Jobs claimed at a time. */
  batchSize?: number;
  /** Jobs of a batch run at once (sends wait on the network). */
  concurrency?: number;
  /** How long a claimed job stays this worker's; after that another worker may take it over. */
  leaseMs?: number;
  /** The longest wait between two looks for due jobs when there is nothing to do. */
  maxIdleMs?: number;
  random?: () => number;
}

/**
 * The job runner: claims due jobs under a lease and runs them. It runs in the API process by
 * default, or alone with `--role worker`; any number of runners can share one PostgreSQL database.
 */
export class JobRunner {
  private readonly ctx: WorkerContext;
  private readonly options: Required<Omit<RunnerOptions, 'random'>>;
  private stopping = false;
  private loop?: Promise<void>;
  private wake?: () => void;
  private stopListening?: () => void;

  constructor(private readonly deps: Deps, options: RunnerOptions = {}) {
    this.options = { batchSize: 500, concurrency: 16, leaseMs: 60_000, maxIdleMs: 100, ...options };
    this.ctx = { deps, owner: `${hostname()}:${process.pid}:${randomBytes(4).toString('hex')}`, random: options.random ?? Math.random };
  }

  start(): void {
    this.stopping = false;
    this.stopListening ??= this.deps.workQueued.listen(() => this.wakeUp());
    this.loop ??= this.run();
  }

  /** Ends an idle wait now; a runner at work carries on. */
  wakeUp(): void {
    this.wake?.();
  }

  /** Stops claiming, lets the jobs under way finish, and gives back claimed jobs not yet started. */
  async stop(): Promise<void> {
    this.stopping = true;
    this.stopListening?.();
    this.stopListening = undefined;
    this.wake?.();
    await this.loop;
    this.loop = undefined;
  }

  /** Runs due jobs until none is left (tests, with a clock they move by hand). */
  async runUntilIdle(maxBatches = 10_000): Promise<void> {
    for (let i = 0; i < maxBatches; i++) if ((await this.runBatch()) === 0) return;
    throw new Error(`Jobs were still due after ${maxBatches} batches`);
  }

  private async run(): Promise<void> {
    let idleMs = 10;
    while (!this.stopping) {
      let ran = 0;
      try {
        ran = await this.runBatch();
      } catch (err) {
        this.deps.logger.error({ err }, 'job runner: claiming failed');
      }
      if (ran > 0) {
        idleMs = 10;
        continue;
      }
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, idleMs);
        this.wake = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      idleMs = Math.min(this.options.maxIdleMs, idleMs * 2);
    }
  }

  /** Claims one batch and runs it; answers how many jobs it claimed. */
  async runBatch(): Promise<number> {
    const jobs = await claimDueJobs(this.deps.db, {
      owner: this.ctx.owner,
      now: this.deps.clock.now(),
      leaseMs: this.options.leaseMs,
      limit: this.options.batchSize,
    });
    // In-app jobs are only rows in our own database: they go in bulk, the others one by one.
    const inApp = jobs.filter(isInAppJob);
    if (inApp.length > 0 && !this.stopping) {
      try {
        await executeInAppBatch(this.ctx, inApp);
      } catch (err) {
        this.deps.logger.error({ err, jobs: inApp.length }, 'in-app batch failed unexpectedly');
      }
    }
    const queue: JobRecord[] = jobs.filter((job) => !isInAppJob(job));
    const unstarted: string[] = [];
    const lane = async () => {
      for (let job = queue.shift(); job; job = queue.shift()) {
        if (this.stopping) {
          unstarted.push(job.id);
          continue;
        }
        try {
          await executeJob(this.ctx, job);
        } catch (err) {
          // Left running under its lease: another worker (or this one) takes it over when the lease ends.
          this.deps.logger.error({ err, jobId: job.id }, 'job failed unexpectedly');
        }
      }
    };
    // Sends wait on the network, and a batch's last jobs wait for its first: the leases are renewed
    // every third of their length meanwhile, so no other worker takes over a job this one will still send.
    const sends = queue.map((job) => job.id);
    const renewal = sends.length > 0 ? setInterval(() => this.renewLeases(sends), this.options.leaseMs / 3) : undefined;
    try {
      await Promise.all(Array.from({ length: Math.min(this.options.concurrency, jobs.length) }, lane));
    } finally {
      clearInterval(renewal);
    }
    await releaseJobs(this.deps.db, unstarted, this.ctx.owner, this.deps.clock.now());
    return jobs.length;
  }

  private renewLeases(ids: string[]): void {
    const until = new Date(this.deps.clock.now().getTime() + this.options.leaseMs);
    renewLeases(this.deps.db, this.ctx.owner, ids, until).catch((err: unknown) => this.deps.logger.error({ err }, 'job runner: renewing leases failed'));
  }
}
