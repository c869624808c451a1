// Tells job runners which kinds of work a transaction queued for now (in-app jobs, control steps,
// sends, webhook deliveries), once it commits: each of a runner's loops is woken by its own kind
// alone, at once instead of at its next idle look (up to 100 ms later), and never for work it would
// not find yet or that was rolled back. One signal per database handle, as inbox-bus.ts has one bus.
//
// Between processes (PostgreSQL): a process that runs no runner (`--role api`) announces the work it
// queues with a NOTIFY, and each process that runs one LISTENs and wakes its loops as for its own
// (shareQueuedWork). Processes sharing a SQLite file find each other's work at their next look.
import type { Db, Runner } from './knex.js';
import { isPostgres, selectRows } from './knex.js';
import { databaseOf, tellAfterCommit } from './after-commit.js';
import { listenOn } from './pg-listen.js';

/** The job lanes of repos/jobs.ts that a loop claims from, and webhook deliveries. */
export type QueuedWork = 'in_app' | 'control' | 'send' | 'webhooks';
/** Every kind of queued work: what a runner looks for when it may have missed some. */
export const EVERY_KIND_OF_WORK: ReadonlySet<QueuedWork> = new Set(['in_app', 'control', 'send', 'webhooks']);

type Listener = (work: ReadonlySet<QueuedWork>) => void;

const listeners = new WeakMap<object, Set<Listener>>();
/** What each open transaction has queued so far, told together at its commit. */
const queuedBy = new WeakMap<object, Set<QueuedWork>>();

/** Calls `listener` after each commit that queued work, with its kinds; until the returned function is called. */
export function listenWorkQueued(db: Runner, listener: Listener): () => void {
  const database = databaseOf(db);
  let set = listeners.get(database);
  if (!set) listeners.set(database, (set = new Set()));
  set.add(listener);
  return () => set.delete(listener);
}

/** Says that `trx` queued work of this kind, due now: its database's listeners hear once it commits. */
export function tellWorkQueued(trx: Runner, work: QueuedWork): void {
  tellAfterCommit(queuedBy, trx, [work], (kinds) => {
    tellListeners(trx, kinds);
    announcers.get(databaseOf(trx))?.add(kinds);
  });
}

function tellListeners(db: Runner, kinds: ReadonlySet<QueuedWork>): void {
  for (const listener of listeners.get(databaseOf(db)) ?? []) listener(kinds);
}

// ── between processes ───────────────────────────────────────────────────────────────────────

const CHANNEL = 'herald_work';

/**
 * The least time between two NOTIFYs of one process: the commits of a burst are announced together
 * (their kinds gathered), so a busy API sends at most 40 a second, whatever its rate of triggers;
 * work that comes alone is announced at once. A runner woken by a stream of work waits about as
 * long to claim it together anyway (HERALD_RUNNER_COALESCE_MS). One every 5 ms cost the API a tenth
 * more CPU per trigger in `npm run bench` (bench/README.md, "Wake-ups").
 */
export const NOTIFY_GAP_MS = 25;

/** Gathers the kinds of work committed, and NOTIFYs them: one NOTIFY at a time, NOTIFY_GAP_MS apart. */
class Announcer {
  private readonly kinds = new Set<QueuedWork>();
  private timer?: NodeJS.Timeout;
  private sending = false;
  private lastSent = 0;
  /** A failure is reported once, until a NOTIFY goes through again. */
  private failing = false;

  constructor(
    private readonly db: Db,
    private readonly onError: (err: unknown) => void,
  ) {}

  add(kinds: Iterable<QueuedWork>): void {
    for (const kind of kinds) this.kinds.add(kind);
    this.schedule();
  }

  stop(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    this.kinds.clear();
  }

  private schedule(): void {
    if (this.sending || this.timer || this.kinds.size === 0) return;
    this.timer = setTimeout(() => void this.send(), Math.max(0, this.lastSent + NOTIFY_GAP_MS - Date.now()));
  }

  private async send(): Promise<void> {
    this.timer = undefined;
    const payload = [...this.kinds].join(',');
    this.kinds.clear();
    this.sending = true;
    this.lastSent = Date.now();
    try {
      await selectRows(this.db, 'SELECT pg_notify(?, ?)', [CHANNEL, payload]);
      this.failing = false;
    } catch (err) {
      // Best effort: the runners find the work at their next look anyway.
      if (!this.failing) this.onError(err);
      this.failing = true;
    } finally {
      this.sending = false;
      this.schedule();
    }
  }
}

const announcers = new WeakMap<object, Announcer>();

/**
 * Shares queued work with the other processes of a PostgreSQL database, until closed: a process
 * that runs no job runner `announce`s what it queues (NOTIFY); one that runs one `hear`s what the
 * others announce (LISTEN, pg-listen.ts) and wakes its loops as for its own work, and
 * all of them whenever the connection was lost meanwhile. NOTIFY is best effort: a runner still
 * looks for due work at least every 100 ms. SQLite: nothing.
 */
export function shareQueuedWork(db: Db, side: 'announce' | 'hear', onError: (err: unknown) => void): { close(): Promise<void> } {
  if (!isPostgres(db)) return { close: async () => undefined };
  if (side === 'announce') {
    const announcer = new Announcer(db, onError);
    announcers.set(databaseOf(db), announcer);
    return {
      close: async () => {
        announcer.stop();
        announcers.delete(databaseOf(db));
      },
    };
  }
  return listenOn(db, CHANNEL, {
    heard(payload) {
      const kinds = new Set(payload.split(',').filter((kind): kind is QueuedWork => EVERY_KIND_OF_WORK.has(kind as QueuedWork)));
      if (kinds.size > 0) tellListeners(db, kinds);
    },
    missed: () => tellListeners(db, EVERY_KIND_OF_WORK),
    error: onError,
  });
}
