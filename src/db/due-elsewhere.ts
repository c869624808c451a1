// A claim that leaves some environments out (those at their share of the send slots) reads the
// others' due rows by environment instead of in due order, so that it never steps over the
// backlog of the environments it leaves out. Jobs and webhook deliveries claim this way.
import type { Binding, Db } from './knex.js';
import { isPostgres, selectRowsPlannedAfresh } from './knex.js';

/** A table's due rows, also kept by (environment_id, run_at, id) in a partial index of their own. */
export interface DueByEnvironment {
  table: string;
  /** That index. */
  index: string;
  /** Its condition, word for word (a partial index is used only by a query that repeats it). */
  due: string;
}

/** The most environments one claim reads from: SQLite allows 500 terms in a compound SELECT. */
const MAX_ENVIRONMENTS = 256;
/** Pads the per-environment reads to a power of two, so that a claim has few statement texts. */
const NO_ENVIRONMENT = '';

/**
 * The rows a claim may take now, as the body of its `due` CTE (id, run_at): the earliest `limit`
 * due rows of environments other than `excluded`. On PostgreSQL, the earliest `limit` of the first
 * 2 × `limit` that no other claim has locked, so that two workers claiming at once both find some.
 *
 * First a read: every environment with a row in the index, found by seeking from one to the next
 * (a loose index scan, so an environment's backlog is stepped over in one seek, not read), with its
 * first row in due order; of those not left out and due now, the ones whose first rows come first.
 * The earliest N rows of all lie among the first N environments so ordered, the i-th (from 0)
 * holding at most N - i of them: each is read with one seek, up to that many rows. So the number
 * of environments with sends waiting bounds the work, not the number of sends. Nothing read is
 * trusted: the claim checks every row's condition again as it takes it.
 */
export async function dueElsewhere(
  db: Db,
  rows: DueByEnvironment,
  excluded: readonly string[],
  now: string,
  limit: number,
): Promise<{ sql: string; bindings: Binding[] }> {
  const postgres = isPostgres(db);
  const wanted = postgres ? 2 * limit : limit;
  const found = await selectRowsPlannedAfresh<{ environment_id: string }>(db, waitingEnvironmentsSql(db, rows, excluded.length), [
    ...excluded,
    now,
    Math.min(wanted, MAX_ENVIRONMENTS),
  ]);
  if (found.length === 0) return { sql: `SELECT id, run_at FROM ${rows.table} WHERE 1 = 0`, bindings: [] };
  const environments = found.map((row) => row.environment_id);
  while (environments.length & (environments.length - 1)) environments.push(NO_ENVIRONMENT);
  const each = `SELECT id, run_at FROM ${tableOf(db, rows)} WHERE ${rows.due} AND environment_id = ? AND run_at <= ? ORDER BY run_at, id LIMIT ?`;
  const reads = environments.map((_, i) => `SELECT id, run_at FROM (${each}) AS due_${i}`).join(' UNION ALL ');
  const bindings = environments.flatMap((environmentId, i) => [environmentId, now, Math.max(1, wanted - i)]);
  if (!postgres) return { sql: reads, bindings };
  // The reads lock nothing. Of the candidates, the first `limit` not locked by another claim are
  // locked, in order, each checked again once locked.
  return {
    sql: `SELECT id, run_at FROM ${rows.table} WHERE id IN (SELECT id FROM (${reads}) AS waiting ORDER BY run_at, id LIMIT ?)
      AND ${rows.due} AND run_at <= ? ORDER BY run_at, id LIMIT ? FOR UPDATE SKIP LOCKED`,
    bindings: [...bindings, wanted, now, limit],
  };
}

/**
 * dueElsewhere's read: binds the left-out environments, then the time and how many environments.
 * The walk from one environment to the next stops at a NULL: environment_id is NOT NULL in both
 * tables.
 */
export function waitingEnvironmentsSql(db: Db, rows: DueByEnvironment, excluded: number): string {
  const from = tableOf(db, rows);
  const first = (column: string) =>
    `(SELECT ${column} FROM ${from} WHERE ${rows.due} AND environment_id = walk.environment_id ORDER BY run_at, id LIMIT 1)`;
  const notExcluded = excluded > 0 ? ` AND environment_id NOT IN (${Array(excluded).fill('?').join(', ')})` : '';
  return `WITH RECURSIVE walk(environment_id) AS (
       SELECT (SELECT environment_id FROM ${from} WHERE ${rows.due} ORDER BY environment_id LIMIT 1)
       UNION ALL
       SELECT (SELECT environment_id FROM ${from} WHERE ${rows.due} AND environment_id > walk.environment_id ORDER BY environment_id LIMIT 1)
       FROM walk WHERE walk.environment_id IS NOT NULL
     )
     SELECT environment_id FROM (
       SELECT environment_id, ${first('run_at')} AS first_due, ${first('id')} AS first_id
       FROM walk WHERE environment_id IS NOT NULL${notExcluded}
     ) AS waiting WHERE first_due <= ? ORDER BY first_due, first_id LIMIT ?`;
}

/** The table, held to the index on SQLite (which would rather read another and sort). */
function tableOf(db: Db, rows: DueByEnvironment): string {
  return isPostgres(db) ? rows.table : `${rows.table} INDEXED BY ${rows.index}`;
}
