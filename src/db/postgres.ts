// PostgreSQL's side of the database interface (dialect.ts): plain statements run straight on a
// pooled connection, IN lists as one JSON array, counts as numbers.
import knexFactory, { type Knex } from 'knex';
import pg from 'pg';
import { DEFAULT_POSTGRES_POOL_MAX } from '../config.js';
import type { Dialect, Runner } from './dialect.js';

// PostgreSQL's bigint (COUNT(*) among them) arrives as a string; every count we read fits a number.
pg.types.setTypeParser(pg.types.builtins.INT8, (value: string) => Number(value));

/** Texts remembered by positionalText at most: past that they are forgotten all at once. */
const MAX_POSITIONAL_TEXTS = 200;

interface PgClient {
  query(config: { text: string; values: readonly unknown[] }): Promise<{ rows: unknown[]; rowCount: number | null }>;
}

/**
 * Texts with `?` placeholders as PostgreSQL's `$1, $2, …`, by knex's own conversion; null for a
 * text with `??` (an identifier), which knex's raw statement fills in first.
 */
const positionalTexts = new Map<string, string | null>();

function positionalText(client: Knex.Client, sql: string): string | null {
  let text = positionalTexts.get(sql);
  if (text === undefined) {
    text = sql.includes('??') ? null : (client.positionBindings(sql) as string);
    if (positionalTexts.size >= MAX_POSITIONAL_TEXTS) positionalTexts.clear();
    positionalTexts.set(sql, text);
  }
  return text;
}

let queriesRun = 0;

/**
 * A statement with `?` placeholders, run on PostgreSQL straight on a connection: a pool connection
 * outside a transaction, the transaction's own inside one. knex's runner (its binding rewrites,
 * query object and promise chain) costs more of the worker's CPU than the statement a chat job
 * sends (`npm run bench`, the chat row). knex's `query`, `query-response` and
 * `query-error` events are still emitted (a transaction's reach the transaction too), an error
 * still names its statement, and a transaction that has ended still refuses statements, as knex's
 * would.
 */
export async function queryPostgres(db: Runner, sql: string, bindings: readonly unknown[]): Promise<{ rows: unknown[]; rowCount: number | null }> {
  const client = db.client as Knex.Client;
  const text = positionalText(client, sql);
  if (text === null) return db.raw(sql, bindings as never[]);
  if (db.isTransaction && (db as Knex.Transaction).isCompleted()) throw new Error(`Transaction query already complete: ${sql}`);
  const connection = (await client.acquireConnection()) as PgClient & { __knexUid?: string };
  const query = { sql: text, bindings, method: 'raw', options: {}, __knexUid: connection.__knexUid, __knexQueryUid: `herald-${++queriesRun}` };
  try {
    client.emit('query', query);
    const result = await connection.query({ text, values: bindings });
    client.emit('query-response', result, query);
    return result;
  } catch (err) {
    if (err instanceof Error) err.message = `${sql} - ${err.message}`;
    client.emit('query-error', err, query);
    throw err;
  } finally {
    await client.releaseConnection(connection);
  }
}

/** A knex instance on PostgreSQL. */
export function createPostgresDb(url: string, options: { schema?: string; poolMax?: number }): Knex {
  return knexFactory({
    client: 'pg',
    connection: url,
    searchPath: options.schema ? [options.schema] : undefined,
    pool: { min: 0, max: options.poolMax ?? DEFAULT_POSTGRES_POOL_MAX },
  });
}

/**
 * `column IN (…)` on PostgreSQL: the list as one JSON parameter made an array, so the text is the
 * same for any length and the server binds one value instead of hundreds; each value is still
 * looked up in the column's index.
 */
function inList(column: string, values: readonly string[]): { sql: string; bindings: string[] } {
  return { sql: `${column} = ANY (ARRAY(SELECT jsonb_array_elements_text(?::jsonb)))`, bindings: [JSON.stringify(values)] };
}

/** PostgreSQL behind the interface of dialect.ts. */
export const postgres: Dialect = {
  lower: 'lower',
  inList,
  selectRows: async (db, sql, bindings) => (await queryPostgres(db, sql, bindings)).rows,
  // The server scans; the event loop only waits.
  selectRowsInBackground: async (db, sql, bindings) => (await queryPostgres(db, sql, bindings)).rows,
  selectBuilt: async (query) => (await query) as unknown[],
  selectBuiltInBackground: async (query) => (await query) as unknown[],
  changeRows: async (db, sql, bindings) => (await queryPostgres(db, sql, bindings)).rowCount ?? 0,
};
