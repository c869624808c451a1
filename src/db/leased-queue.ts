// A table of work that workers claim under a lease: jobs and webhook deliveries. A claim takes the
// due rows, and the running rows whose worker's lease ran out, in one UPDATE; each kind is read
// from its own partial index in that index's order, so a claim reads about the rows it takes
// whatever the statistics say; on PostgreSQL, SKIP LOCKED lets many workers claim at once without
// waiting on each other or taking the same row. A claim that leaves environments out reads the
// others' due rows by environment (due-elsewhere.ts).
import type { Binding, Db, Runner } from './knex.js';
import { changeRows, inList, isPostgres, selectRowsPlannedAfresh } from './knex.js';
import { readBool } from './json.js';
import { chunks } from './chunks.js';
import { dueElsewhere, type DueByEnvironment } from './due-elsewhere.js';

export interface LeasedQueue {
  table: string;
  /** The partial index of the due rows, in (run_at, id) order, and its condition word for word (or the planner ignores it). */
  dueIndex: string;
  due: string;
  /** The partial index of the running rows, in (lease_expires_at, id) order. */
  leasedIndex: string;
  /** A condition both reads add (the job lanes' types), written as the indexes' conditions write it. */
  also: string;
  /** Where a row whose lease ran out stands in the claim's order: at its own run_at, or when its lease ended. */
  lapsedAt: 'run_at' | 'lease_expires_at';
  /** The due rows by environment, for a claim that leaves environments out. */
  byEnvironment?: DueByEnvironment;
  /**
   * Due rows claimed ahead of the others, whatever their place in due order (a test event someone
   * is waiting for): a partial index of them in (run_at, id) order, and its condition word for word.
   * They are few; a claim takes them first, still leaving out the environments it leaves out.
   */
  first?: { index: string; due: string };
  /** The columns a claim answers with. */
  returning: string;
  /** The status of a row given back. */
  released: string;
}

export interface LeaseClaim {
  owner: string;
  now: Date;
  leaseMs: number;
  limit: number;
  /** Environments whose rows this claim leaves out (at their share of the send slots). */
  excludeEnvironments?: readonly string[];
}

/** The table, held to an index on SQLite (which would rather read another and sort). */
function from(db: Runner, queue: LeasedQueue, index: string): string {
  return isPostgres(db) ? queue.table : `${queue.table} INDEXED BY ${index}`;
}

/**
 * Claims up to `limit` rows that are due, or whose worker's lease ran out, for `owner`: they become
 * `running` under a lease, their attempt counted. Planned afresh each time (never a kept statement):
 * a generic plan made while the queue was nearly empty would scan the whole table once it grew.
 */
export async function claimLeased(db: Db, queue: LeasedQueue, options: LeaseClaim): Promise<Record<string, unknown>[]> {
  const now = options.now.toISOString();
  const leaseEnd = new Date(options.now.getTime() + options.leaseMs).toISOString();
  const skipLocked = isPostgres(db) ? 'FOR UPDATE SKIP LOCKED' : '';
  const excluded = options.excludeEnvironments ?? [];
  if (excluded.length > 0 && !queue.byEnvironment) throw new Error(`A claim from ${queue.dueIndex} cannot leave environments out`);
  const due =
    excluded.length > 0
      ? await dueElsewhere(db, queue.byEnvironment!, excluded, now, options.limit)
      : {
          sql: `SELECT id, run_at FROM ${from(db, queue, queue.dueIndex)} WHERE ${queue.due}${queue.also} AND run_at <= ? ORDER BY run_at, id LIMIT ? ${skipLocked}`,
          bindings: [now, options.limit] as Binding[],
        };
  // Running rows whose lease ran out are few (at most the slots of the workers that died).
  const exclude = excluded.length > 0 ? ` AND environment_id NOT IN (${excluded.map(() => '?').join(', ')})` : '';
  const lapsedAt = queue.lapsedAt === 'run_at' ? 'run_at' : 'lease_expires_at AS run_at';
  // A row both first and due is listed twice: the claim then takes one row fewer, never one twice.
  const first = queue.first
    ? {
        sql: `, first AS (
       SELECT id, run_at FROM ${from(db, queue, queue.first.index)} WHERE ${queue.first.due} AND run_at <= ?${exclude} ORDER BY run_at, id LIMIT ? ${skipLocked}
     )`,
        union: `SELECT id, 0 AS rank, run_at FROM first UNION ALL `,
        bindings: [now, ...excluded, options.limit] as Binding[],
      }
    : { sql: '', union: '', bindings: [] as Binding[] };
  const result = await db.raw(
    `WITH due AS (
       ${due.sql}
     ), lapsed AS (
       SELECT id, ${lapsedAt} FROM ${from(db, queue, queue.leasedIndex)} WHERE status = 'running' AND lease_expires_at < ?${queue.also}${exclude} ORDER BY lease_expires_at, id LIMIT ? ${skipLocked}
     )${first.sql}
     UPDATE ${queue.table} SET status = 'running', lease_owner = ?, lease_expires_at = ?, attempts = attempts + 1, updated_at = ?
     WHERE id IN (SELECT id FROM (${first.union}SELECT id, 1 AS rank, run_at FROM due UNION ALL SELECT id, 1 AS rank, run_at FROM lapsed) AS claimable ORDER BY rank, run_at, id LIMIT ?)
     RETURNING ${queue.returning}`,
    [...due.bindings, now, ...excluded, options.limit, ...first.bindings, options.owner, leaseEnd, now, options.limit],
  );
  return Array.isArray(result) ? result : result.rows;
}

/**
 * Whether a claim would find a row now: a read of the same partial indexes in the same order, no
 * write. An empty claim is an UPDATE (on SQLite it takes the write lock; on PostgreSQL it locks and
 * plans); a runner whose last claim found nothing looks with this first.
 */
export async function anyLeasedDue(db: Runner, queue: LeasedQueue, now: Date): Promise<boolean> {
  const at = now.toISOString();
  // Each part reads its partial index in order up to its first row, as the claim reads it.
  const [row] = await selectRowsPlannedAfresh<{ due: unknown }>(
    db,
    `SELECT (SELECT 1 FROM ${from(db, queue, queue.dueIndex)} WHERE ${queue.due}${queue.also} AND run_at <= ? ORDER BY run_at, id LIMIT 1) IS NOT NULL
         OR (SELECT 1 FROM ${from(db, queue, queue.leasedIndex)} WHERE status = 'running' AND lease_expires_at < ?${queue.also} ORDER BY lease_expires_at, id LIMIT 1) IS NOT NULL AS due`,
    [at, at],
  );
  return readBool(row?.due);
}

/**
 * Extends the lease of the rows `owner` claimed and still holds, of those given, until `until`: a
 * worker at work keeps what it claimed however long it takes, so only one that stopped (crashed,
 * or stuck) loses it.
 */
export async function renewLeased(db: Db, queue: LeasedQueue, owner: string, ids: readonly string[], until: Date): Promise<number> {
  let renewed = 0;
  for (const part of chunks([...ids])) {
    const list = inList(db, 'id', part);
    renewed += await changeRows(db, `UPDATE ${queue.table} SET lease_expires_at = ? WHERE lease_owner = ? AND status = 'running' AND ${list.sql}`, [until.toISOString(), owner, ...list.bindings]);
  }
  return renewed;
}

/** Gives rows `owner` holds back, untouched (their attempt too), for another worker to claim now. */
export async function releaseLeased(db: Db, queue: LeasedQueue, ids: readonly string[], owner: string, now: Date): Promise<void> {
  for (const part of chunks([...ids])) {
    const list = inList(db, 'id', part);
    await changeRows(
      db,
      `UPDATE ${queue.table} SET status = ?, lease_owner = NULL, lease_expires_at = NULL, attempts = attempts - 1, updated_at = ? WHERE lease_owner = ? AND status = 'running' AND ${list.sql}`,
      [queue.released, now.toISOString(), owner, ...list.bindings],
    );
  }
}
