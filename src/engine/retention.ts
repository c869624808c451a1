// Retention: notifications, their jobs, execution details and messages, and their events (and the
// workflow snapshots no event uses any more), are kept
// for their environment's retention (its own, else HERALD_RETENTION_DAYS) and then deleted, a small
// batch a transaction, the event loop free between two; a notification whose work is not over (a
// delay or digest still pending) is kept until it is. The inbox streams' events are kept at least
// a day (what a reconnecting stream can replay), their tickets until they expire. On SQLite the
// pages freed go back to the file system a few at a time; the hours' kept totals that the sweep
// emptied go; on PostgreSQL the notification totals kept per connection (facets and hours) of
// connections that have ended are folded together. Runs in every process that runs jobs, once soon
// after start and then every RETENTION_EVERY_MS.
import { setTimeout as sleep } from 'node:timers/promises';
import type { Deps } from '../deps.js';
import {
  deleteExpiredEvents,
  deleteExpiredWebhookDeliveries,
  deleteExpiredNotifications,
  environmentRetention,
  freeSpace,
  giveBackPages,
  retentionBatchSize,
  SWEEP_START,
  type BeforeDelete,
  type DeletedBatch,
  type SweepPosition,
} from '../db/repos/retention.js';
import { dropEmptyHourTotals, foldEndedCountShards } from '../db/repos/notifications.js';
import { yieldToEventLoop } from '../turns.js';
import { deleteUnusedSnapshots } from '../db/repos/workflow-snapshots.js';
import { forgetMessagesOf } from './inbox.js';
import { pruneEvents as pruneInboxEvents } from '../db/repos/inbox.js';
import { pruneTickets as pruneInboxTickets } from '../db/repos/inbox-access.js';

/**
 * SQLite pages given back a step (4 KiB each). A step moves pages from the end of the file into the
 * free ones, on the event loop; larger steps held it longer (bench/README.md, "Retention batches and
 * page steps").
 */
const PAGES_A_STEP = 50;
/**
 * The pause between two steps. A step writes about as many pages to the write-ahead log as it
 * gives back: back to back, the log outgrew the checkpoint thread's readings (db/checkpointer.ts),
 * reached the writers' backstop, and that backstop's checkpoint held the event loop. Paced, the log
 * grows little between two readings, and a step waits for the thread to copy it once it is long.
 */
const STEP_PAUSE_MS = 10;
const DAY_MS = 86_400_000;
/** How long the inbox streams' events are kept: the contract promises at least 24 hours of replay. */
export const INBOX_EVENTS_KEPT_MS = 25 * 60 * 60_000;
/** Inbox events deleted a statement (small rows, one index). */
const INBOX_EVENTS_A_BATCH = 1_000;
export const RETENTION_EVERY_MS = 60 * 60_000;
const FIRST_SWEEP_MS = 60_000;

export interface Swept {
  notifications: number;
  events: number;
  /** Snapshots of workflows that no event uses any more. */
  workflowSnapshots: number;
  webhookDeliveries: number;
  inboxEvents: number;
  inboxTickets: number;
  /** SQLite: pages given back to the file system. */
  pages: number;
  /** The parts of the pass that failed (each logged); the others ran all the same. */
  failed: string[];
}

/**
 * One pass over every environment: deletes what is past its retention, then gives SQLite's free
 * pages back. Each part (an environment's deletes, the inbox's, the totals' fold, the pages) runs
 * whether or not one before it failed: a table that cannot be pruned today must not keep the others
 * growing, nor the file from shrinking. Once `signal` aborts, it ends at the next batch or step.
 */
export async function sweepExpired(deps: Pick<Deps, 'db' | 'clock' | 'config' | 'logger'>, batch = retentionBatchSize(deps.db), signal?: AbortSignal): Promise<Swept> {
  const swept: Swept = { notifications: 0, events: 0, workflowSnapshots: 0, webhookDeliveries: 0, inboxEvents: 0, inboxTickets: 0, pages: 0, failed: [] };
  const now = deps.clock.now().getTime();
  const part = async <T>(name: string, run: () => Promise<T>): Promise<T | undefined> => {
    try {
      return await run();
    } catch (err) {
      swept.failed.push(name);
      deps.logger.error({ err, part: name }, 'retention: a part of the pass failed; the rest goes on, and it is tried again at the next pass');
      return undefined;
    }
  };

  const environments = (await part('environments', () => environmentRetention(deps.db))) ?? [];
  for (const environment of environments) {
    if (signal?.aborted) break;
    const days = environment.retentionDays ?? deps.config.retentionDays;
    if (days <= 0) continue;
    const before = new Date(now - days * DAY_MS);
    await part(`environment ${environment.id}`, async () => {
      const forgetMessages: BeforeDelete = (trx, ids) => forgetMessagesOf(trx, ids, deps.clock.now());
      await inBatches(batch, signal, (size, after) => deleteExpiredNotifications(deps.db, environment.id, before, size, after, forgetMessages), (n) => (swept.notifications += n));
      await inBatches(batch, signal, (size, after) => deleteExpiredEvents(deps.db, environment.id, before, size, after), (n) => (swept.events += n));
      await inBatches(batch, signal, async (size) => ({ deleted: await deleteUnusedSnapshots(deps.db, environment.id, before, size) }), (n) => (swept.workflowSnapshots += n));
      await inBatches(batch, signal, (size, after) => deleteExpiredWebhookDeliveries(deps.db, environment.id, before, size, after), (n) => (swept.webhookDeliveries += n));
      await dropEmptyHourTotals(deps.db, environment.id, before);
    });
  }
  const inboxBefore = new Date(now - INBOX_EVENTS_KEPT_MS);
  await part('inbox events', () =>
    inBatches(INBOX_EVENTS_A_BATCH, signal, async (size) => ({ deleted: await pruneInboxEvents(deps.db, inboxBefore, size) }), (n) => (swept.inboxEvents += n)),
  );
  swept.inboxTickets = (await part('inbox tickets', () => pruneInboxTickets(deps.db, new Date(now)))) ?? 0;
  await part('notification totals', () => foldEndedCountShards(deps.db));
  await part('free pages', async () => {
    const space = await freeSpace(deps.db);
    if (space?.incremental) {
      // As many steps as the pages free now need: pages freed meanwhile wait for the next pass.
      for (let step = 0; step < Math.ceil(space.freePages / PAGES_A_STEP) && !signal?.aborted; step++) {
        await giveBackPages(deps.db, PAGES_A_STEP);
        await sleep(STEP_PAUSE_MS);
      }
      swept.pages = Math.max(0, space.freePages - (await freeSpace(deps.db))!.freePages);
    } else if (space && swept.notifications > 0) {
      deps.logger.warn(
        { freePages: space.freePages },
        'retention: this SQLite file was made without auto_vacuum, so it reuses the space freed but does not shrink; see the README (retention) to convert it',
      );
    }
  });
  return swept;
}

/**
 * Deletes a batch of at most `size` at a time, each from where the one before ended (a delete that
 * keeps nothing, and so answers no position, starts over each time), until one comes back short or
 * `signal` aborts, letting the event loop run between two; each batch's count goes to `counted` as
 * it is done, so a later failure keeps it.
 */
async function inBatches(
  size: number,
  signal: AbortSignal | undefined,
  deleteBatch: (size: number, after: SweepPosition) => Promise<DeletedBatch>,
  counted: (deleted: number) => void,
): Promise<void> {
  for (let after: SweepPosition | undefined = SWEEP_START; after && !signal?.aborted; ) {
    const { deleted, last } = await deleteBatch(size, after);
    counted(deleted);
    after = deleted === size ? (last ?? after) : undefined;
    await yieldToEventLoop();
  }
}

/**
 * Runs sweepExpired now and then, until stopped; what fails is logged and tried again at the next
 * pass. Stopping ends a pass under way at its next batch: a long pass must not hold up a shutdown.
 */
export class RetentionSweeper {
  private timer?: NodeJS.Timeout;
  private running?: Promise<void>;
  private stopping = new AbortController();

  constructor(private readonly deps: Pick<Deps, 'db' | 'clock' | 'config' | 'logger'>) {}

  start(firstInMs = FIRST_SWEEP_MS): void {
    this.stopping = new AbortController();
    this.schedule(firstInMs);
  }

  async stop(): Promise<void> {
    clearTimeout(this.timer);
    this.timer = undefined;
    this.stopping.abort();
    await this.running;
  }

  private schedule(ms: number): void {
    this.timer = setTimeout(() => {
      this.running = this.sweep().finally(() => {
        this.running = undefined;
        if (this.timer) this.schedule(RETENTION_EVERY_MS);
      });
    }, ms);
    this.timer.unref();
  }

  private async sweep(): Promise<void> {
    try {
      const swept = await sweepExpired(this.deps, undefined, this.stopping.signal);
      if (swept.notifications + swept.events + swept.webhookDeliveries > 0) this.deps.logger.info(swept, 'retention: deleted what was past its retention');
    } catch (err) {
      this.deps.logger.error({ err }, 'retention: a pass failed; trying again at the next');
    }
  }
}
