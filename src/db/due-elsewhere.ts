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

/**
 * The rows a claim may take now, as the body of its `due` CTE (id, run_at): at most `limit`, the
 * earliest due, of environments other than `excluded`.
 *
 * First a read: every environment with a row in the index, found by seeking from one to the next
 * (a loose index scan, so an environment's backlog is stepped over in one seek, not read), with
 * its first row in due order; of those not left out and due now, the `limit` whose first rows come
 * first. The `limit` earliest rows of all lie among these environments' first `limit` each, read
 * by one seek each. The number of environments with sends waiting bounds the read, not the number
 * of sends.
 */
export async function dueElsewhere(
  db: Db,
  rows: DueByEnvironment,
  excluded: readonly string[],
  now: string,
  limit: number,
): Promise<{ sql: string; bindings: Binding[] }> {
  const from = tableOf(db, rows);
  const environments = await selectRowsPlannedAfresh<{ environment_id: string }>(db, waitingEnvironmentsSql(db, rows, excluded.length), [...excluded, now, limit]);
  if (environments.length === 0) return { sql: `SELECT id, run_at FROM ${rows.table} WHERE 1 = 0`, bindings: [] };
  const lock = isPostgres(db) ? ' FOR UPDATE SKIP LOCKED' : '';
  const each = `SELECT id, run_at FROM ${from} WHERE ${rows.due} AND environment_id = ? AND run_at <= ? ORDER BY run_at, id LIMIT ?${lock}`;
  return {
    sql: environments.map((_, i) => `SELECT id, run_at FROM (${each}) AS due_${i}`).join(' UNION ALL '),
    bindings: environments.flatMap(({ environment_id }) => [environment_id, now, limit]),
  };
}

/** dueElsewhere's read: binds the left-out environments, then the time and the limit. */
export function waitingEnvironmentsSql(db: Db, rows: DueByEnvironment, excluded: number): string {
  const from = tableOf(db, rows);
  const notExcluded = excluded > 0 ? ` AND environment_id NOT IN (${Array(excluded).fill('?').join(', ')})` : '';
  return `WITH RECURSIVE environments(environment_id) AS (
       SELECT (SELECT environment_id FROM ${from} WHERE ${rows.due} ORDER BY environment_id LIMIT 1)
       UNION ALL
       SELECT (SELECT environment_id FROM ${from} WHERE ${rows.due} AND environment_id > environments.environment_id ORDER BY environment_id LIMIT 1)
       FROM environments WHERE environments.environment_id IS NOT NULL
     )
     SELECT environment_id FROM (
       SELECT environment_id,
         (SELECT run_at FROM ${from} WHERE ${rows.due} AND environment_id = environments.environment_id ORDER BY run_at, id LIMIT 1) AS first_due,
         (SELECT id FROM ${from} WHERE ${rows.due} AND environment_id = environments.environment_id ORDER BY run_at, id LIMIT 1) AS first_id
       FROM environments WHERE environment_id IS NOT NULL${notExcluded}
     ) AS waiting WHERE first_due <= ? ORDER BY first_due, first_id LIMIT ?`;
}

/** The table, held to the index on SQLite (which would rather read another and sort). */
function tableOf(db: Db, rows: DueByEnvironment): string {
  return isPostgres(db) ? rows.table : `${rows.table} INDEXED BY ${rows.index}`;
}
