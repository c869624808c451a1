import fs from 'node:fs';
import path from 'node:path';
import knexFactory, { type Knex } from 'knex';
import pg from 'pg';
import Database from 'better-sqlite3';
import { migrationSource } from './migrations/index.js';
import { BACKSTOP_PAGES, startCheckpointer, type Checkpointer } from './checkpointer.js';
import { DEFAULT_POSTGRES_POOL_MAX } from '../config.js';
import { isPostgres } from './dialect.js';
import { StatementCache } from './statement-cache.js';
import { BackgroundReader } from './background-reader.js';

export { isPostgres };

export type Db = Knex;

/** Where a repository runs its queries: the database, or a transaction on it (itself a Knex). */
export type Runner = Db | Knex.Transaction;

/** A transaction on the database: what `db.transaction(work)` hands `work`. */
export type Transaction = Knex.Transaction;

// PostgreSQL's bigint (COUNT(*) among them) arrives as a string; every count we read fits a number.
pg.types.setTypeParser(pg.types.builtins.INT8, (value: string) => Number(value));

export interface DbOptions {
  /** PostgreSQL only: the schema to work in (tests give each file its own). */
  schema?: string;
  /**
   * SQLite only: checkpoint the write-ahead log on a thread of its own (db/checkpointer.ts), for
   * processes that run jobs. It costs the process about 10 MB.
   */
  checkpointInBackground?: boolean;
  /** PostgreSQL only: the most connections the pool opens (HERALD_PG_POOL_MAX). */
  poolMax?: number;
}

interface PreparingConnection {
  prepare(sql: string): unknown;
}

/**
 * The text each SQLite connection keeps its prepared statements for, in characters: 7–9 MB
 * prepared (statement-cache.ts), for each of a file's two connections. An in-app fan-out batch's
 * four inserts of 500 rows take 80 K of it.
 */
export const STATEMENT_CACHE_CHARS = 256 * 1024;

const statementCaches = new WeakMap<object, StatementCache<unknown>>();

/** The statements a SQLite connection keeps (for tests). */
export function statementCacheOf(conn: object): StatementCache<unknown> | undefined {
  return statementCaches.get(conn);
}

/**
 * knex prepares every SQLite statement afresh, which costs more than running it for the small
 * queries an API request makes. Statements are kept per connection by their SQL text, from their
 * second use on (StatementCache); knex sets no per-statement mode on them (we never ask for
 * safeIntegers), so reusing one is safe.
 */
function cachePreparedStatements(conn: PreparingConnection): void {
  const prepare = conn.prepare.bind(conn);
  const statements = new StatementCache<unknown>(STATEMENT_CACHE_CHARS);
  statementCaches.set(conn, statements);
  conn.prepare = (sql: string) => statements.get(sql, prepare);
}

interface FunctionDefining {
  function(name: string, options: { deterministic: boolean }, fn: (value: unknown) => unknown): unknown;
}

/**
 * SQL functions every SQLite connection has. SQLite's own `lower()` folds ASCII letters only
 * (`Ü` stays `Ü`); `unicode_lower()` folds as JavaScript, and PostgreSQL's `lower()` in a UTF-8
 * locale, do.
 */
function defineFunctions(conn: FunctionDefining): void {
  conn.function('unicode_lower', { deterministic: true }, (value) => (typeof value === 'string' ? value.toLowerCase() : value));
}

/** The SQL function that lowercases any letter, on either database (defineFunctions). */
export function lowerFunction(db: Runner): string {
  return isPostgres(db as Db) ? 'lower' : 'unicode_lower';
}

interface CompilingClient {
  queryCompiler(builder: { _single: QueryParts }, formatter?: unknown): unknown;
}

interface QueryParts {
  limit?: unknown;
  offset?: unknown;
  skipBinding: Record<string, boolean>;
}

/**
 * SQLite plans a statement whose LIMIT or OFFSET is a bound parameter again on every run, which
 * makes `.first()` four times slower than the lookup itself (50 µs instead of 13 µs). knex has
 * checked them to be whole numbers (limit, offset): they are written into the SQL instead.
 */
function inlineLimits(client: CompilingClient): void {
  const compile = client.queryCompiler.bind(client);
  client.queryCompiler = (builder, formatter) => {
    const single = builder._single;
    if (Number.isInteger(single.limit) || Number.isInteger(single.offset)) {
      single.skipBinding = { ...single.skipBinding, limit: single.limit === undefined || Number.isInteger(single.limit), offset: Number.isInteger(single.offset) };
    }
    return compile(builder, formatter);
  };
}

/** Statements given a name, so PostgreSQL keeps them prepared: at most this many texts a process. */
const MAX_PREPARED_TEXTS = 200;
/** More values than this and a statement is an IN list of some length: each length would be a text of its own. */
const MAX_PREPARED_VALUES = 16;
const preparedNames = new Map<string, string>();
/**
 * A select list or RETURNING with `*` (its table quoted or not, by any rule). PostgreSQL fixes a named
 * statement's result columns when it prepares it: once a migration (another process's, in a rolling
 * upgrade) adds a column to the table, every later run on that connection fails with "cached plan
 * must not change result type". On SQLite such a statement's column names are read with each row
 * (readRows).
 */
const EVERY_COLUMN = /(?:\bSELECT(?:\s+DISTINCT)?\s+|\bRETURNING\s+|,\s*)(?:[["`]?\w+[\]"`]?\.)?\*/i;

/**
 * A raw statement that PostgreSQL parses and plans once per connection: it runs as a named
 * prepared statement (a probe: a workflow lookup 200–290 → 100–150 µs, and a third less of the
 * client's CPU). For the statements of every request and every batch, whose text carries no values
 * and whose best plan does not change as a table grows (lookups by key): PostgreSQL soon runs a kept
 * statement on one generic plan, made once, so a statement that ranges over a growing table (the
 * worker's claim) is sent with `db.raw` and planned each time. A statement with many values, or any
 * text past the first 200, runs unnamed, so texts that vary cannot fill the server's memory; so does
 * one that reads `*` (EVERY_COLUMN). SQLite runs it as any raw statement.
 */
export function preparedRaw(db: Runner, sql: string, bindings: readonly unknown[]): Knex.Raw {
  const raw = db.raw(sql, bindings as never[]);
  const name = isPostgres(db as Db) ? statementName(sql, bindings) : undefined;
  return name ? raw.options({ name }) : raw;
}

/** The name a PostgreSQL statement is kept prepared under, if it is kept (preparedRaw). */
function statementName(sql: string, bindings: readonly unknown[]): string | undefined {
  if (bindings.length > MAX_PREPARED_VALUES) return undefined;
  let name = preparedNames.get(sql);
  if (name === undefined) {
    if (preparedNames.size >= MAX_PREPARED_TEXTS || EVERY_COLUMN.test(sql)) return undefined;
    preparedNames.set(sql, (name = `herald_${preparedNames.size + 1}`));
  }
  return name;
}

interface PgClient {
  query(config: { name?: string; text: string; values: readonly unknown[] }): Promise<{ rows: unknown[]; rowCount: number | null }>;
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
    if (positionalTexts.size >= MAX_PREPARED_TEXTS) positionalTexts.clear();
    positionalTexts.set(sql, text);
  }
  return text;
}

let queriesRun = 0;

/**
 * preparedRaw's statement, run on PostgreSQL straight on a connection: a pool connection outside a
 * transaction, the transaction's own inside one. knex's runner (its binding rewrites, query object
 * and promise chain) cost a bulk trigger's event a fifth of the API's CPU (0.17 → 0.14 ms), a GET
 * by id 7%, and a chat job a tenth of the worker's. knex's `query`, `query-response` and
 * `query-error` events are still emitted (a transaction's reach the transaction too), an error
 * still names its statement, and a transaction that has ended still refuses statements, as knex's
 * would.
 */
export async function queryPostgres(db: Runner, sql: string, bindings: readonly unknown[]): Promise<{ rows: unknown[]; rowCount: number | null }> {
  const client = db.client as Knex.Client;
  const text = positionalText(client, sql);
  if (text === null) return preparedRaw(db, sql, bindings);
  if (db.isTransaction && (db as Knex.Transaction).isCompleted()) throw new Error(`Transaction query already complete: ${sql}`);
  const name = statementName(sql, bindings);
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

/** The longest IN list inList pads on SQLite: callers read in batches of 500. */
const MAX_PADDED_LIST = 1024;

/**
 * `column IN (…)` for a list of values, written as each database reads it best. PostgreSQL: the
 * list as one JSON parameter made an array, so the text is the same for any length and stays
 * prepared, and the server binds one value instead of hundreds (a read of 500 ids: 1.8 → 0.8 ms);
 * each value is still looked up in the column's index. SQLite: a placeholder a value, the list
 * padded to a power of two (up to 1,024).
 */
export function inList(db: Runner, column: string, values: readonly string[]): { sql: string; bindings: string[] } {
  if (isPostgres(db as Db)) return { sql: `${column} = ANY (ARRAY(SELECT jsonb_array_elements_text(?::jsonb)))`, bindings: [JSON.stringify(values)] };
  // Up to MAX_PADDED_LIST values, the list is made as long as the next power of two by repeating
  // its last value, which IN does not mind: a dozen texts serve every length, and they recur, so
  // they are kept prepared (statement-cache.ts). A longer list is sent as it is: padded, one of
  // more than 16,384 values would pass the 32,766 values SQLite binds.
  const bindings = [...values];
  const padded = values.length === 0 ? 0 : 2 ** Math.ceil(Math.log2(values.length));
  if (padded <= MAX_PADDED_LIST) while (bindings.length < padded) bindings.push(values[values.length - 1]);
  return { sql: `${column} IN (${bindings.map(() => '?').join(', ')})`, bindings };
}

/** A SQLite database's read connection, opened on first use (after the migrations). */
interface ReadConnection {
  file: string;
  connection?: Database.Database;
  /** Reads that scan whole tables, off the event loop (selectRowsInBackground). */
  background: BackgroundReader;
}

/**
 * Read connections by the knex client of their database. A transaction has a client of its own,
 * and so has a builder made in one or told `.transacting()`: none of them finds a read connection.
 */
const readConnections = new WeakMap<Knex.Client, ReadConnection>();

/**
 * The rows of a read-only statement, written in plain SQL with `?` placeholders (the same text
 * serves both databases). The hottest reads of the API (a trigger's workflow and recipients, a
 * subscriber by id) go through here.
 *
 * On SQLite, outside a transaction, the statement runs on a read-only connection of its own,
 * kept prepared from its second use: no query builder, pool or promise chain (knex cost more than
 * the lookup), and a read never waits behind a transaction that holds the writing connection. That
 * connection sees what is committed, as another PostgreSQL connection would. Inside a SQLite
 * transaction it runs on the transaction's connection (`runInSqliteTransaction`); on PostgreSQL it
 * is `queryPostgres`.
 */
export async function selectRows<T>(db: Runner, sql: string, bindings: readonly (string | number | null)[]): Promise<T[]> {
  if (isPostgres(db as Db)) return (await queryPostgres(db, sql, bindings)).rows as T[];
  if (db.isTransaction) return (await runInSqliteTransaction(db as Knex.Transaction, sql, bindings, true)) as T[];
  const read = readConnections.get(db.client);
  if (!read) return (await db.raw(sql, bindings as never[])) as T[];
  return readRows<T>(read, sql, bindings);
}

/**
 * selectRows for a read that scans a whole table (counts for /metrics and for stats): on a SQLite
 * file, outside a transaction, it runs on a thread of its own (background-reader.ts), so the event
 * loop goes on while SQLite scans. PostgreSQL scans on its server; the event loop only waits.
 */
export async function selectRowsInBackground<T>(db: Runner, sql: string, bindings: readonly (string | number | null)[]): Promise<T[]> {
  const read = isPostgres(db as Db) || db.isTransaction ? undefined : readConnections.get(db.client);
  return read ? read.background.read<T>(sql, bindings) : selectRows<T>(db, sql, bindings);
}

/**
 * The rows of a read built with knex's query builder, run as selectRows runs its statements: on
 * SQLite, outside a transaction, on the read connection, without knex's runner.
 * Anywhere else knex runs it as built; on PostgreSQL that keeps it unnamed, planned afresh each
 * time (a page of a list ranges over a table that grows, which one kept plan would not follow). So
 * does a builder made in a transaction or told `.transacting()`, which must see that transaction's
 * writes, and one whose answer knex shapes (`.first()`, `.pluck()`).
 */
export async function selectBuilt<T>(query: Knex.QueryBuilder): Promise<T[]> {
  const plainSelect = (query as unknown as { _method: string })._method === 'select';
  const read = plainSelect ? readConnections.get(query.client) : undefined;
  if (!read) return (await query) as T[];
  const { sql, bindings } = query.toSQL();
  return readRows<T>(read, sql, bindings.map(sqliteValue));
}

/**
 * Each read statement's column names when its text names every column it reads, read once; null
 * for a statement that reads `*`, whose columns are the table's as it is now.
 */
const columnNames = new WeakMap<Database.Statement, string[] | null>();

/**
 * A read on SQLite's read connection, its rows as objects by column name. better-sqlite3 makes a
 * row's object by looking each column's name up again, ~0.9 µs a row of 15 columns; rows read as
 * arrays and named here cost a third of that (a page of 100 subscribers: 235 → 144 µs). The names
 * are read once, which holds for a text that names its columns: a change of schema cannot rename
 * them, only make the statement fail. A statement that reads `*` is prepared again by SQLite when
 * a column is added, dropped or renamed, so its rows keep better-sqlite3's own names. Only
 * readRows runs the read connection's kept statements, so the raw mode it sets stays its own.
 */
function readRows<T>(read: ReadConnection, sql: string, bindings: readonly unknown[]): T[] {
  read.connection ??= openReadConnection(read.file);
  const statement = read.connection.prepare(sql);
  let names = columnNames.get(statement);
  if (names === undefined) {
    names = EVERY_COLUMN.test(sql) ? null : namesOf(statement.raw(true));
    columnNames.set(statement, names);
  }
  const rows = statement.all(...bindings);
  if (!names) return rows as T[];
  const objects = new Array<Record<string, unknown>>(rows.length);
  for (let r = 0; r < rows.length; r++) {
    const row = rows[r] as unknown[];
    // Of two columns with one name the last wins, as in better-sqlite3's own objects.
    const object: Record<string, unknown> = {};
    for (let c = 0; c < names.length; c++) object[names[c]] = row[c];
    objects[r] = object;
  }
  return objects as T[];
}

function namesOf(statement: Database.Statement): string[] {
  return statement.columns().map((column) => column.name);
}

function openReadConnection(file: string): Database.Database {
  const connection = new Database(file, { readonly: true, fileMustExist: true });
  connection.pragma('busy_timeout = 5000');
  defineFunctions(connection as unknown as FunctionDefining);
  cachePreparedStatements(connection as unknown as PreparingConnection);
  return connection;
}

/** A value better-sqlite3 can bind, made the way knex makes it: a Date as its time, a boolean as 0 or 1, nothing as NULL. */
function sqliteValue(value: unknown): unknown {
  if (value === undefined) return null;
  if (typeof value === 'boolean') return Number(value);
  if (value instanceof Date) return value.valueOf();
  return value;
}

/**
 * Runs one statement of a SQLite transaction on the transaction's own connection, prepared once
 * by its text: the rows it returns (with `reader`), else how many rows it changed. knex rewrites
 * and checks every binding of a raw statement on its way to the driver, which costs more than
 * SQLite's own work for the thousands of values of a multi-row insert, and a dozen microseconds
 * for the smallest.
 * knex's `query` events do not see these statements.
 */
export async function runInSqliteTransaction(trx: Knex.Transaction, sql: string, bindings: readonly unknown[] = [], reader = false): Promise<unknown[] | number> {
  const connection = (await trx.client.acquireConnection()) as Database.Database;
  const statement = connection.prepare(sql);
  const values = bindings.map(sqliteValue);
  if (reader) return statement.all(...values);
  return statement.run(...values).changes;
}

/**
 * Runs an UPDATE or DELETE written in plain SQL with `?` placeholders (the same text serves both
 * databases) and answers how many rows it changed: the writes every job makes, without the query
 * builder. On PostgreSQL it is `queryPostgres` (kept prepared when the text names its columns); on
 * SQLite, inside a transaction, the transaction's connection, else knex's.
 */
export async function changeRows(db: Runner, sql: string, bindings: readonly (string | number | null)[]): Promise<number> {
  if (isPostgres(db as Db)) return (await queryPostgres(db, sql, bindings)).rowCount ?? 0;
  if (db.isTransaction) return (await runInSqliteTransaction(db as Knex.Transaction, sql, bindings)) as number;
  return ((await db.raw(sql, bindings as never[])) as { changes: number }).changes;
}

export function isPostgresUrl(url: string): boolean {
  return /^postgres(ql)?:\/\//.test(url);
}

/** A knex instance for `postgres://…`, `sqlite:<path>`, or a bare SQLite path. */
export function createDb(url: string, options: DbOptions = {}): Db {
  if (isPostgresUrl(url)) {
    return knexFactory({
      client: 'pg',
      connection: url,
      searchPath: options.schema ? [options.schema] : undefined,
      pool: { min: 0, max: options.poolMax ?? DEFAULT_POSTGRES_POOL_MAX },
    });
  }
  const file = url.replace(/^sqlite:/, '');
  if (file !== ':memory:') fs.mkdirSync(path.dirname(path.resolve(file)), { recursive: true });
  const inBackground = options.checkpointInBackground === true && file !== ':memory:';
  let checkpointer: Checkpointer | undefined;
  const db = knexFactory({
    client: 'better-sqlite3',
    connection: { filename: file },
    useNullAsDefault: true,
    pool: {
      // better-sqlite3 is synchronous: one connection, used by one query at a time.
      min: 1,
      max: 1,
      afterCreate(conn: { pragma(sql: string): unknown }, done: (err: Error | null, conn: unknown) => void) {
        conn.pragma('journal_mode = WAL');
        conn.pragma('synchronous = NORMAL');
        conn.pragma('foreign_keys = ON');
        conn.pragma('busy_timeout = 5000');
        // A group commit (group-commit.ts) keeps each request's writes in a savepoint, whose undo
        // copy of every page it changes goes to a temporary file once past 64 KiB: a file written
        // and truncated per savepoint. Kept in memory, a trigger's write costs a third less CPU.
        conn.pragma('temp_store = MEMORY');
        if (inBackground) {
          conn.pragma(`wal_autocheckpoint = ${BACKSTOP_PAGES}`);
          // The file exists, in WAL mode, once the first connection is open.
          checkpointer ??= startCheckpointer(file);
        }
        defineFunctions(conn as unknown as FunctionDefining);
        cachePreparedStatements(conn as unknown as PreparingConnection);
        done(null, conn);
      },
    },
  });
  inlineLimits(db.client as CompilingClient);
  if (file !== ':memory:') {
    // A second connection to an in-memory database would be another database: reads share knex's.
    const read: ReadConnection = { file, background: new BackgroundReader(file) };
    readConnections.set(db.client, read);
    // The read connections and the checkpoints stop with the writing connection (db.destroy()).
    const client = db.client as { destroyRawConnection(conn: unknown): Promise<void> };
    const destroyRaw = client.destroyRawConnection.bind(client);
    client.destroyRawConnection = async (conn) => {
      read.connection?.close();
      read.connection = undefined;
      await read.background.close();
      await checkpointer?.stop();
      checkpointer = undefined;
      return destroyRaw(conn);
    };
  }
  return db;
}

export async function migrate(db: Db): Promise<void> {
  await db.migrate.latest({ migrationSource });
}

/** The database answers and every migration has run. */
export async function isReady(db: Db): Promise<boolean> {
  try {
    const [, pending] = await db.migrate.list({ migrationSource });
    return pending.length === 0;
  } catch {
    return false;
  }
}
