import type { Knex } from 'knex';
import { isPostgres, type Db, type Runner } from './knex.js';
import { queryPostgres } from './postgres.js';
import { runInSqliteTransaction } from './sqlite.js';
import { writeTransaction } from './group-commit.js';
import { textOf } from './chunks.js';

/** SQLite: comfortably under its limit of 32,766 bound variables a statement. */
const MAX_VARIABLES = 30_000;
/** PostgreSQL: rows a statement, sent as one JSON parameter. */
const MAX_JSON_ROWS = 5_000;

export interface InsertOptions {
  /** Rows that would break this unique key are skipped (ON CONFLICT … DO NOTHING). */
  skipConflictsOn?: string[];
  /** Columns of the rows actually inserted. */
  returning?: string[];
}

const quote = (name: string) => `"${name}"`;

/** PostgreSQL: an INSERT of the rows given as one JSON array (a column a row lacks is NULL). */
const jsonInsert = (table: string, names: string, alias = '') =>
  `INSERT INTO ${quote(table)} (${names}) SELECT ${names} FROM json_populate_recordset(NULL::${quote(table)}, ?)${alias && ` AS ${alias}`}`;

/** jsonInsert with the columns of `rows` (the first row's), the set read under `alias` if given. */
export const jsonInsertOf = (table: string, rows: Array<Record<string, unknown>>, alias?: string) =>
  jsonInsert(table, Object.keys(rows[0]).map(quote).join(', '), alias);

/**
 * Many rows of one table in as few INSERTs as the database takes: the engine writes thousands a
 * fan-out batch.
 * knex writes SQLite's multi-row inserts as `SELECT … UNION ALL SELECT …`, which costs more to
 * build than to run and runs slower; SQLite gets a plain `VALUES` list instead. PostgreSQL parses
 * and plans thousands of bound values slowly: it gets the rows as one JSON parameter, unpacked by
 * `json_populate_recordset` into the table's own column types.
 * Every row has the first row's columns, which come from our code, never from a request.
 */
export async function insertRows<T = Record<string, unknown>>(
  trx: Runner,
  table: string,
  rows: Array<Record<string, unknown>>,
  options: InsertOptions = {},
): Promise<T[]> {
  if (rows.length === 0) return [];
  const columns = Object.keys(rows[0]);
  const names = columns.map(quote).join(', ');
  const tail =
    (options.skipConflictsOn ? ` ON CONFLICT (${options.skipConflictsOn.map(quote).join(', ')}) DO NOTHING` : '') +
    (options.returning ? ` RETURNING ${options.returning.map(quote).join(', ')}` : '');
  const postgres = isPostgres(trx as Db);
  const rowPlaceholder = `(${columns.map(() => '?').join(', ')})`;
  const perStatement = postgres ? MAX_JSON_ROWS : Math.max(1, Math.floor(MAX_VARIABLES / columns.length));
  const returned: T[] = [];
  for (let start = 0; start < rows.length; start += perStatement) {
    const chunk = rows.slice(start, start + perStatement);
    let inserted: unknown[];
    if (postgres) {
      inserted = (await queryPostgres(trx, `${jsonInsert(table, names)}${tail}`, [JSON.stringify(chunk)])).rows;
    } else {
      const bindings: unknown[] = [];
      for (const row of chunk) for (const column of columns) bindings.push(row[column]);
      const sql = `INSERT INTO ${quote(table)} (${names}) VALUES ${Array(chunk.length).fill(rowPlaceholder).join(', ')}${tail}`;
      const result = trx.isTransaction ? await runInSqliteTransaction(trx as Knex.Transaction, sql, bindings, options.returning !== undefined) : await trx.raw(sql, bindings as never[]);
      inserted = Array.isArray(result) ? result : [];
    }
    if (options.returning) returned.push(...(inserted as T[]));
  }
  return returned;
}

/**
 * New rows for several tables, all or none: parents first (a row's foreign keys point at rows of
 * earlier tables or of the database). A unique violation fails the whole write.
 *
 * PostgreSQL: one statement (each table's insert a data-modifying CTE, foreign keys checked at its
 * end), which is atomic on its own: one round trip, where a transaction of three inserts takes
 * five. SQLite: one transaction, committed with the writes arriving alongside (group-commit.ts).
 */
export async function insertAll(db: Runner, tables: Array<{ table: string; rows: Array<Record<string, unknown>> }>): Promise<void> {
  const parts = tables.filter(({ rows }) => rows.length > 0);
  if (parts.length === 0) return;
  if (isPostgres(db as Db) && parts.every(({ rows }) => rows.length <= MAX_JSON_ROWS)) {
    const inserts = parts.map(({ table, rows }) => jsonInsertOf(table, rows));
    const last = inserts.pop()!;
    const sql = (inserts.length > 0 ? `WITH ${inserts.map((insert, i) => `w${i} AS (${insert})`).join(', ')} ` : '') + last;
    await queryPostgres(db, sql, parts.map(({ rows }) => JSON.stringify(rows)));
    return;
  }
  let chars = 0;
  for (const { rows } of parts) for (const row of rows) chars += textOf(row);
  await writeTransaction(
    db as Db,
    async (trx) => {
      for (const { table, rows } of parts) await insertRows(trx, table, rows);
    },
    chars,
  );
}
