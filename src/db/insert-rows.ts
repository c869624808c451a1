import type { Runner } from './knex.js';

/** Comfortably under SQLite's (32,766) and PostgreSQL's (65,535) bound-variable limits. */
const MAX_VARIABLES = 30_000;

export interface InsertOptions {
  /** Rows that would break this unique key are skipped (ON CONFLICT … DO NOTHING). */
  skipConflictsOn?: string[];
  /** Columns of the rows actually inserted. */
  returning?: string[];
}

const quote = (name: string) => `"${name}"`;

/**
 * A multi-row INSERT … VALUES, as both databases take it. knex writes SQLite's multi-row inserts
 * as `SELECT … UNION ALL SELECT …`, which costs more to build than to run and runs slower; the
 * engine inserts thousands of rows a batch (fan-out). Every row has the first row's columns, which
 * come from our code, never from a request.
 */
export async function insertRows<T = Record<string, unknown>>(
  trx: Runner,
  table: string,
  rows: Array<Record<string, unknown>>,
  options: InsertOptions = {},
): Promise<T[]> {
  if (rows.length === 0) return [];
  const columns = Object.keys(rows[0]);
  const rowPlaceholder = `(${columns.map(() => '?').join(', ')})`;
  const head = `INSERT INTO ${quote(table)} (${columns.map(quote).join(', ')}) VALUES `;
  const tail =
    (options.skipConflictsOn ? ` ON CONFLICT (${options.skipConflictsOn.map(quote).join(', ')}) DO NOTHING` : '') +
    (options.returning ? ` RETURNING ${options.returning.map(quote).join(', ')}` : '');
  const perStatement = Math.max(1, Math.floor(MAX_VARIABLES / columns.length));
  const returned: T[] = [];
  for (let start = 0; start < rows.length; start += perStatement) {
    const chunk = rows.slice(start, start + perStatement);
    const bindings: unknown[] = [];
    for (const row of chunk) for (const column of columns) bindings.push(row[column]);
    const sql = head + Array(chunk.length).fill(rowPlaceholder).join(', ') + tail;
    const result = await trx.raw(sql, bindings as never[]);
    if (options.returning) returned.push(...((Array.isArray(result) ? result : result.rows) as T[]));
  }
  return returned;
}
