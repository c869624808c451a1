import type { Knex } from 'knex';
import { isPostgres, type Db, type Runner } from './knex.js';
import { runInSqliteTransaction } from './sqlite.js';
import { pacer } from '../turns.js';
import { SLICE_CHARS } from './chunks.js';

type Work<T> = (trx: Knex.Transaction) => Promise<T>;

interface Pending {
  work: Work<unknown>;
  /** The characters of text it writes, as its caller counted them (0: a few small rows). */
  chars: number;
  resolve(value: unknown): void;
  reject(error: unknown): void;
}

interface Queue {
  pending: Pending[];
  committing: boolean;
  /** Lets the loop turn between commits that follow each other (pacer). */
  pace: () => Promise<void>;
}

const queues = new WeakMap<Db, Queue>();

/**
 * Runs `work` in a transaction of its own and settles once that work is committed, or rolled back.
 *
 * On SQLite a commit costs more than the few inserts a request makes (every index touched is a
 * page written to the log), and one connection commits one transaction at a time. So writes that
 * arrive together (in the same turn of the event loop, or while a commit is under way) are
 * committed together: each in a savepoint of its own, so one that fails is undone alone, and each
 * caller is answered only after the commit that holds its work. A commit that fails fails every
 * work in it.
 *
 * A commit writes and syncs all of its transaction's pages on the event loop, so the works of one
 * commit write at most about SLICE_CHARS characters of text together (`chars`, each work's as its
 * caller counts them; one larger work is committed alone): the events of bulk requests with large
 * payloads, arriving together, go in several commits, the loop turning between them.
 *
 * PostgreSQL commits concurrent transactions side by side already, and inside a transaction the
 * work simply nests in it: both take the ordinary path.
 */
export function writeTransaction<T>(db: Db, work: Work<T>, chars = 0): Promise<T> {
  if (db.isTransaction || isPostgres(db)) return db.transaction(work);
  let queue = queues.get(db);
  if (!queue) queues.set(db, (queue = { pending: [], committing: false, pace: pacer() }));
  const settled = new Promise<T>((resolve, reject) => {
    queue.pending.push({ work: work as Work<unknown>, chars, resolve: resolve as (value: unknown) => void, reject });
  });
  if (!queue.committing) {
    // Wait one turn of the event loop before beginning, so that the writes of requests being
    // handled right now share this commit instead of each waiting for the next.
    queue.committing = true;
    setImmediate(() => commitNext(db, queue));
  }
  return settled;
}

/**
 * Runs a single write statement outside any transaction of the caller's, as cheaply as each
 * database commits one: on SQLite through writeTransaction, so that such writes arriving together
 * (the notifications of each claim marked under way) share a commit and its sync to disk
 * instead of paying one each; on PostgreSQL as the statement alone, its own implicit transaction,
 * with no BEGIN and COMMIT round trips. Inside a transaction, it runs in it.
 */
export function writeStatement<T>(db: Db, work: (runner: Runner) => Promise<T>): Promise<T> {
  if (db.isTransaction || isPostgres(db)) return work(db);
  return writeTransaction(db, work);
}

function commitNext(db: Db, queue: Queue): void {
  const batch = queue.pending.splice(0, worksWithin(queue.pending, SLICE_CHARS));
  queue.committing = batch.length > 0;
  if (batch.length === 0) return;
  // Alone in its commit, a work needs no savepoint: its transaction is its own.
  const outcomes = batch.length === 1 ? db.transaction(batch[0].work).then((value) => [{ ok: true as const, value }]) : commitTogether(db, batch, queue.pace);
  outcomes
    .then(
      (settled) => batch.forEach((item, i) => {
        const outcome = settled[i];
        if (outcome.ok) item.resolve(outcome.value);
        else item.reject(outcome.error);
      }),
      async (error: unknown) => {
        // A rollback that fails too (a closed pool at shutdown) must not leave the callers waiting:
        // each is answered with the first error.
        await rollBackOpenTransaction(db).catch(() => undefined);
        batch.forEach((item) => item.reject(error));
      },
    )
    // A caller answered here may queue its next write before this commit is over, and that one
    // follows at once: one caller's writes in a row (a digest's riders marked a thousand a
    // transaction) would hold the loop for all of them but for this.
    .finally(async () => {
      await queue.pace();
      commitNext(db, queue);
    });
}

/** How many of the first works of `pending` write at most `chars` characters together; at least one. */
function worksWithin(pending: readonly Pending[], chars: number): number {
  let n = 0;
  for (let written = 0; n < pending.length && (n === 0 || written + pending[n].chars <= chars); n++) written += pending[n].chars;
  return n;
}

type Outcome = { ok: true; value: unknown } | { ok: false; error: unknown };

/**
 * One transaction, a savepoint per work; rejects only when the transaction itself fails. The loop
 * turns between works once TURN_MS has passed: better-sqlite3 answers each statement within the
 * same turn, so a group of many works (a bulk trigger's events each joining a digest) would
 * otherwise hold the loop for all of them. A write that arrives meanwhile waits for the next
 * group, and reads go to the read connection, as during any commit. `pace` is the queue's: with
 * a pacer of its own, a commit that follows another at once would start its TURN_MS afresh while
 * the loop has not turned since the one before.
 */
async function commitTogether(db: Db, batch: Pending[], pace: () => Promise<void>): Promise<Outcome[]> {
  const outcomes: Outcome[] = [];
  await db.transaction(async (trx) => {
    // Plain savepoints: knex's nested transactions would build a knex instance for each work.
    for (const { work } of batch) {
      await pace();
      await runInSqliteTransaction(trx, 'SAVEPOINT work');
      try {
        outcomes.push({ ok: true, value: await work(trx) });
      } catch (error) {
        await runInSqliteTransaction(trx, 'ROLLBACK TO SAVEPOINT work');
        outcomes.push({ ok: false, error });
      }
      await runInSqliteTransaction(trx, 'RELEASE SAVEPOINT work');
    }
  });
  return outcomes;
}

/**
 * A COMMIT that SQLite refuses (a deferred constraint) leaves its transaction open on the
 * connection, and knex does not roll it back: the next batch would fail to begin.
 */
async function rollBackOpenTransaction(db: Db): Promise<void> {
  const conn = (await db.client.acquireConnection()) as { inTransaction: boolean; exec(sql: string): void };
  try {
    if (conn.inTransaction) conn.exec('ROLLBACK');
  } finally {
    await db.client.releaseConnection(conn);
  }
}

/**
 * SQLite: whether other work waits for the writing connection, queued for a group commit or for
 * the pool's one connection, so that a long transaction that may end early can make way for it.
 */
export function writersWaiting(db: Db): boolean {
  if ((queues.get(db)?.pending.length ?? 0) > 0) return true;
  // knex's pool is tarn's, whose count of acquires waiting for a connection is public.
  const pool = (db.client as { pool?: { numPendingAcquires(): number } }).pool;
  return (pool?.numPendingAcquires() ?? 0) > 0;
}
