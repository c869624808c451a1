// PostgreSQL's side of the database interface (dialect.ts): plain statements run straight on a
// pooled connection, kept prepared on it, IN lists as one JSON array, counts as numbers.
import knexFactory, { type Knex } from 'knex';
import pg from 'pg';
import { DEFAULT_POSTGRES_POOL_MAX } from '../config.js';
import type { Dialect, Runner } from './dialect.js';
import { BoundedMap } from '../bounded-map.js';
import type { Logger } from '../logger.js';
import { driverLog } from './driver-log.js';

// PostgreSQL's bigint (COUNT(*) among them) arrives as a string; every count we read fits a number.
pg.types.setTypeParser(pg.types.builtins.INT8, (value: string) => Number(value));

/** Texts remembered by positionalText at most: past that the oldest are forgotten first. */
const MAX_POSITIONAL_TEXTS = 200;
/** Statements kept prepared, at most this many texts a process: texts past these run unnamed. */
const MAX_PREPARED_TEXTS = 200;
/** More values than this and a statement is a list of some length: each length would be a text of its own. */
const MAX_PREPARED_VALUES = 16;

interface PgClient {
  query(config: { name?: string; text: string; values: readonly unknown[] }): Promise<{ rows: unknown[]; rowCount: number | null }>;
}

/** What Herald adds to knex's configuration of a PostgreSQL database. */
interface HeraldPostgresConfig extends Knex.Config {
  preparedStatements: boolean;
}

/**
 * Texts with `?` placeholders as PostgreSQL's `$1, $2, …`, by knex's own conversion; null for a
 * text with `??` (an identifier), which knex's raw statement fills in first.
 */
const positionalTexts = new BoundedMap<string, string | null>(MAX_POSITIONAL_TEXTS);

function positionalText(client: Knex.Client, sql: string): string | null {
  let text = positionalTexts.get(sql);
  if (text === undefined) {
    text = sql.includes('??') ? null : (client.positionBindings(sql) as string);
    positionalTexts.set(sql, text);
  }
  return text;
}

const preparedNames = new Map<string, string>();
/**
 * A select list or RETURNING with `*`. PostgreSQL fixes a prepared statement's result columns when
 * it prepares it: once a migration (another process's, in a rolling upgrade) adds a column to the
 * table, every later run on that connection would fail ("cached plan must not change result type").
 */
const EVERY_COLUMN = /(?:\bSELECT(?:\s+DISTINCT)?\s+|\bRETURNING\s+|,\s*)(?:[["`]?\w+[\]"`]?\.)?\*/i;

/**
 * The name a statement is kept prepared under on each connection, if it is kept: PostgreSQL then
 * parses and plans it once per connection, and the client reads its row description once (its A/B:
 * bench/README.md, "Which database mechanisms earn their keep"). Not for a
 * statement with many values or one that reads `*`, nor for texts past the first 200, so texts
 * that vary cannot fill the server's memory.
 */
function statementName(client: Knex.Client, sql: string, bindings: readonly unknown[]): string | undefined {
  if (!(client.config as HeraldPostgresConfig).preparedStatements || bindings.length > MAX_PREPARED_VALUES) return undefined;
  let name = preparedNames.get(sql);
  if (name === undefined) {
    if (preparedNames.size >= MAX_PREPARED_TEXTS || EVERY_COLUMN.test(sql)) return undefined;
    preparedNames.set(sql, (name = `herald_${preparedNames.size + 1}`));
  }
  return name;
}

let queriesRun = 0;

/**
 * A statement with `?` placeholders, run on PostgreSQL straight on a connection (a pool connection
 * outside a transaction, the transaction's own inside one), kept prepared there (statementName).
 * knex's runner (its binding rewrites, query object and promise chain) costs more of the worker's
 * CPU than the statement a chat job sends (`npm run bench`, the chat row). knex's `query`, `query-response` and
 * `query-error` events are still emitted (a transaction's reach the transaction too), an error
 * still names its statement, and a transaction that has ended still refuses statements, as knex's
 * would.
 */
export async function queryPostgres(db: Runner, sql: string, bindings: readonly unknown[]): Promise<{ rows: unknown[]; rowCount: number | null }> {
  const client = db.client as Knex.Client;
  const text = positionalText(client, sql);
  if (text === null) return db.raw(sql, bindings as never[]);
  if (db.isTransaction && (db as Knex.Transaction).isCompleted()) throw new Error(`Transaction query already complete: ${sql}`);
  const name = statementName(client, sql, bindings);
  const connection = (await client.acquireConnection()) as PgClient & { __knexUid?: string };
  const query = { sql: text, bindings, method: 'raw', options: name ? { name } : {}, __knexUid: connection.__knexUid, __knexQueryUid: `herald-${++queriesRun}` };
  try {
    client.emit('query', query);
    const result = await connection.query({ name, text, values: bindings });
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
export function createPostgresDb(url: string, options: { schema?: string; poolMax?: number; preparedStatements?: boolean; logger?: Logger }): Knex {
  const config: HeraldPostgresConfig = {
    client: 'pg',
    connection: url,
    searchPath: options.schema ? [options.schema] : undefined,
    pool: { min: 0, max: options.poolMax ?? DEFAULT_POSTGRES_POOL_MAX },
    preparedStatements: options.preparedStatements ?? true,
    log: options.logger && driverLog(options.logger),
  };
  return knexFactory(config);
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
  // Through knex, unnamed: planned with this run's values, never kept.
  selectRowsPlannedAfresh: async (db, sql, bindings) => ((await db.raw(sql, bindings as Knex.RawBinding[])) as { rows: unknown[] }).rows,
  // The server scans; the event loop only waits.
  selectRowsInBackground: async (db, sql, bindings) => (await queryPostgres(db, sql, bindings)).rows,
  selectBuiltInBackground: async (query) => (await query) as unknown[],
  // pg reads an answer as it arrives, between turns of the event loop, whatever its size.
  selectPage: async (db, sql, bindings) => (await queryPostgres(db, sql, bindings)).rows,
  selectBuiltPage: async (query) => (await query) as unknown[],
  changeRows: async (db, sql, bindings) => (await queryPostgres(db, sql, bindings)).rowCount ?? 0,
};
