// SQLite's side of the database interface (dialect.ts). better-sqlite3 runs each statement on the
// calling thread, so what costs here is knex's own work around it: statements are kept prepared,
// reads outside a transaction go to a read-only connection of their own without knex's runner,
// whole-table reads go to a thread, and the write-ahead log is checkpointed on another.
import fs from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import knexFactory, { type Knex } from 'knex';
import Database from 'better-sqlite3';
import { BACKSTOP_PAGES, startCheckpointer, type Checkpointer } from './checkpointer.js';
import { StatementCache } from './statement-cache.js';
import { BackgroundReader } from './background-reader.js';
import { SLICE_CHARS, textOf } from './chunks.js';
import type { Dialect, Runner } from './dialect.js';
import { StartError } from '../config.js';
import type { Logger } from '../logger.js';
import { driverLog } from './driver-log.js';

interface PreparingConnection {
  prepare(sql: string): unknown;
}

/**
 * The text each SQLite connection keeps its prepared statements for, in characters
 * (statement-cache.ts), for each of a file's two connections: room for an in-app fan-out batch's
 * four inserts of 100 rows (fanoutSliceSize) many times over.
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
 * costs `.first()` more than the lookup itself. When knex has them as whole numbers, they are
 * written into the SQL instead. This patches knex's private query compiler, which it may only while
 * the A/B against its removal earns more than the bar for knex patches (bench/README.md, "Which
 * database mechanisms earn their keep"); inline-limits.test.ts checks every shape against plain knex.
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

interface TransactionMaking {
  transaction(...args: unknown[]): { begin(conn: unknown): unknown };
}

/**
 * Every transaction begins as a writer (BEGIN IMMEDIATE), not as a reader that becomes one at its
 * first write. A deferred transaction that read first and then writes fails at once
 * (SQLITE_BUSY_SNAPSHOT, no busy wait) when another process committed in between: with an API and
 * a worker process on one file, a fan-out batch failed that way on nearly every commit of the API.
 * An immediate one waits for the file's write lock (beginImmediate) before it reads anything. Within
 * one process nothing changes: its one writing connection runs one transaction at a time anyway.
 */
function beginAsWriter(client: TransactionMaking, roomToWrite: () => Promise<void> | undefined): void {
  const make = client.transaction.bind(client);
  client.transaction = (...args: unknown[]) => {
    const trx = make(...args);
    // With a checkpoint thread, a transaction first waits while the log is too long (checkpointer.ts).
    trx.begin = async (conn: unknown) => {
      await roomToWrite();
      await beginImmediate(conn as Database.Database);
    };
    return trx;
  };
}

/** How long a writer waits for another process's write lock before it fails with SQLITE_BUSY. */
const BUSY_TIMEOUT_MS = 5000;

/**
 * BEGIN IMMEDIATE, waiting for another process's write lock without holding the event loop.
 * SQLite's own busy handler sleeps on the calling thread: an API process sharing its file with a
 * worker stopped answering, /health included, for as long as the worker's batches kept the lock
 * (seconds, in a fan-out). So the lock is tried without the handler, and tried again after a timer
 * while another process holds it.
 */
async function beginImmediate(conn: Database.Database): Promise<void> {
  const deadline = Date.now() + BUSY_TIMEOUT_MS;
  for (let wait = 1; ; wait = Math.min(wait * 2, 16)) {
    const busy = tryBeginImmediate(conn);
    if (!busy) return;
    if (Date.now() >= deadline) throw busy;
    await sleep(wait);
  }
}

/** BEGIN IMMEDIATE once, without the busy handler: the error when another connection holds the write lock. */
function tryBeginImmediate(conn: Database.Database): unknown {
  conn.prepare('PRAGMA busy_timeout = 0').get();
  try {
    conn.prepare('BEGIN IMMEDIATE').run();
    return undefined;
  } catch (err) {
    // SQLITE_BUSY, or SQLITE_BUSY_RECOVERY while another connection recovers the log.
    if (String((err as { code?: unknown }).code).startsWith('SQLITE_BUSY')) return err;
    throw err;
  } finally {
    restoreBusyTimeout(conn);
  }
}

/** The connection's own busy timeout back; a transaction just begun is undone if that fails. */
function restoreBusyTimeout(conn: Database.Database): void {
  try {
    conn.prepare(`PRAGMA busy_timeout = ${BUSY_TIMEOUT_MS}`).get();
  } catch (err) {
    if (conn.inTransaction) conn.exec('ROLLBACK');
    throw err;
  }
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
 * Each read statement's column names when its text names every column it reads, read once; null
 * for a statement that reads `*`, whose columns are the table's as it is now.
 */
const columnNames = new WeakMap<Database.Statement, string[] | null>();

/** A select list with `*` (its table quoted or not, by any rule): its columns are read with each row. */
const EVERY_COLUMN = /(?:\bSELECT(?:\s+DISTINCT)?\s+|\bRETURNING\s+|,\s*)(?:[["`]?\w+[\]"`]?\.)?\*/i;

/**
 * A read on SQLite's read connection, its rows as objects by column name. better-sqlite3 makes a
 * row's object by looking each column's name up again for every row; rows read as arrays and
 * named here cost much less (a page of subscribers is a hundred rows). The names
 * are read once, which holds for a text that names its columns: a change of schema cannot rename
 * them, only make the statement fail. A statement that reads `*` is prepared again by SQLite when
 * a column is added, dropped or renamed, so its rows keep better-sqlite3's own names. Only
 * readRows and readRowsWithin run the read connection's kept statements (prepareRead), so the raw
 * mode it sets stays theirs.
 */
function readRows<T>(read: ReadConnection, sql: string, bindings: readonly unknown[]): T[] {
  const { statement, names } = prepareRead(read, sql);
  return named(statement.all(...bindings), names);
}

/**
 * readRows, unless the rows' text passes `maxChars`: then undefined, the read stopped there (a
 * large page is read again on the background reader's thread, a slice at a time).
 */
function readRowsWithin<T>(read: ReadConnection, sql: string, bindings: readonly unknown[], maxChars: number): T[] | undefined {
  const { statement, names } = prepareRead(read, sql);
  const rows: unknown[] = [];
  let chars = 0;
  // Leaving the loop early ends the statement's run (the iterator's return()).
  for (const row of statement.iterate(...bindings)) {
    rows.push(row);
    chars += textOf(row);
    if (chars > maxChars) return undefined;
  }
  return named(rows, names);
}

function prepareRead(read: ReadConnection, sql: string): { statement: Database.Statement; names: string[] | null } {
  read.connection ??= openReadConnection(read.file);
  const statement = read.connection.prepare(sql);
  let names = columnNames.get(statement);
  if (names === undefined) {
    names = EVERY_COLUMN.test(sql) ? null : namesOf(statement.raw(true));
    columnNames.set(statement, names);
  }
  return { statement, names };
}

/** Rows read as arrays, as objects by these column names (null: they are objects already). */
function named<T>(rows: unknown[], names: string[] | null): T[] {
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
  connection.pragma(`busy_timeout = ${BUSY_TIMEOUT_MS}`);
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

/** `column IN (…)` on SQLite: a placeholder a value. */
function inList(column: string, values: readonly string[]): { sql: string; bindings: string[] } {
  return { sql: `${column} IN (${values.map(() => '?').join(', ')})`, bindings: [...values] };
}

/**
 * Outside a transaction a read runs on the read connection, kept prepared from its second use: no
 * query builder, pool or promise chain (knex cost more than the lookup), and a read never waits
 * behind a transaction that holds the writing connection. That connection sees what is committed,
 * as another PostgreSQL connection would. Inside a transaction it runs on the transaction's own.
 */
async function selectRows(db: Runner, sql: string, bindings: readonly unknown[]): Promise<unknown[]> {
  if (db.isTransaction) return (await runInSqliteTransaction(db as Knex.Transaction, sql, bindings, true)) as unknown[];
  const read = readConnections.get(db.client);
  if (!read) return (await db.raw(sql, bindings as never[])) as unknown[];
  return readRows(read, sql, bindings);
}

/**
 * A builder's plain select, to run on its database's read connection; undefined where knex must run
 * it: a builder made in a transaction or told `.transacting()` has a client of its own, and must see
 * that transaction's writes; one whose answer knex shapes (`.first()`, `.pluck()`) is not a plain select.
 */
function plainSelect(query: Knex.QueryBuilder): { read: ReadConnection; sql: string; values: never[] } | undefined {
  const read = readConnections.get(query.client);
  if (!read) return undefined;
  const { method, sql, bindings } = query.toSQL();
  if (method !== 'select') return undefined;
  return { read, sql, values: bindings.map(sqliteValue) as never[] };
}

/** SQLite behind the interface of dialect.ts. */
export const sqlite: Dialect = {
  lower: 'unicode_lower',
  inList,
  selectRows,
  // Kept prepared: SQLite's plans follow the text, and INDEXED BY holds them to an index.
  selectRowsPlannedAfresh: selectRows,
  async selectRowsInBackground(db, sql, bindings) {
    const read = db.isTransaction ? undefined : readConnections.get(db.client);
    return read ? read.background.read(sql, bindings) : selectRows(db, sql, bindings);
  },
  async selectBuiltInBackground(query) {
    const plain = plainSelect(query);
    return plain ? plain.read.background.read(plain.sql, plain.values) : ((await query) as unknown[]);
  },
  async selectPage(db, sql, bindings) {
    const read = db.isTransaction ? undefined : readConnections.get(db.client);
    if (!read) return selectRows(db, sql, bindings);
    return readRowsWithin(read, sql, bindings, SLICE_CHARS) ?? read.background.read(sql, bindings);
  },
  async selectBuiltPage(query) {
    const plain = plainSelect(query);
    if (!plain) return (await query) as unknown[];
    return readRowsWithin(plain.read, plain.sql, plain.values, SLICE_CHARS) ?? plain.read.background.read(plain.sql, plain.values);
  },
  async changeRows(db, sql, bindings) {
    if (db.isTransaction) return (await runInSqliteTransaction(db as Knex.Transaction, sql, bindings)) as number;
    return ((await db.raw(sql, bindings as never[])) as { changes: number }).changes;
  },
};

/**
 * Makes the folder a database file goes in, one level at a time: `fs.mkdirSync(…, { recursive })`
 * loops for ever where a folder cannot be made (under /proc).
 */
function makeFolderOf(file: string): void {
  const make = (dir: string): void => {
    if (fs.existsSync(dir)) return;
    make(path.dirname(dir));
    try {
      fs.mkdirSync(dir);
    } catch (err) {
      // Another process starting beside this one made it first.
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
  };
  const folder = path.dirname(path.resolve(file));
  try {
    make(folder);
  } catch (err) {
    throw new StartError(`cannot make the folder of the SQLite database ${path.resolve(file)}: ${(err as NodeJS.ErrnoException).code ?? String(err)}`);
  }
}

/**
 * A knex instance on a SQLite file (or `:memory:`): one writing connection, and for a file a
 * read-only one and a background reader beside it, which stop with it (`db.destroy()`). With
 * `checkpointInBackground` (processes that run jobs) a thread checkpoints the log.
 */
export function createSqliteDb(url: string, options: { checkpointInBackground?: boolean; synchronous?: 'full' | 'normal'; logger?: Logger }): Knex {
  const file = url.replace(/^sqlite:/, '');
  if (file !== ':memory:') makeFolderOf(file);
  const inBackground = options.checkpointInBackground === true && file !== ':memory:';
  let checkpointer: Checkpointer | undefined;
  const db = knexFactory({
    client: 'better-sqlite3',
    connection: { filename: file },
    useNullAsDefault: true,
    log: options.logger && driverLog(options.logger),
    pool: {
      // better-sqlite3 is synchronous: one connection, used by one query at a time.
      min: 1,
      max: 1,
      afterCreate(conn: { pragma(sql: string): unknown }, done: (err: Error | null, conn: unknown) => void) {
        // A new file keeps a map of its pages, so that the pages retention frees can be given back
        // to the file system a few at a time (PRAGMA incremental_vacuum), without the rewrite of the
        // whole file a VACUUM is. On a file with tables already this changes nothing until a VACUUM
        // (README: retention). Set before anything else writes to a new file.
        conn.pragma('auto_vacuum = INCREMENTAL');
        conn.pragma('journal_mode = WAL');
        // FULL: a commit is on disk before it is acknowledged (DbOptions.synchronous says the trade-off).
        conn.pragma(`synchronous = ${options.synchronous === 'normal' ? 'NORMAL' : 'FULL'}`);
        conn.pragma('foreign_keys = ON');
        conn.pragma(`busy_timeout = ${BUSY_TIMEOUT_MS}`);
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
  beginAsWriter(db.client as TransactionMaking, () => checkpointer?.roomToWrite());
  if (file !== ':memory:') {
    // A second connection to an in-memory database would be another database: reads share knex's.
    const read: ReadConnection = { file, background: new BackgroundReader(file) };
    readConnections.set(db.client, read);
    // The read connections and the checkpoints stop with the writing connection.
    const destroy = db.destroy.bind(db);
    const destroyAll = async (callback?: (err?: unknown) => void) => {
      read.connection?.close();
      read.connection = undefined;
      await read.background.close();
      await checkpointer?.stop();
      checkpointer = undefined;
      return destroy(callback as never);
    };
    // knex's own `destroy` is read-only: this instance gets its own, which closes ours first.
    Object.defineProperty(db, 'destroy', { value: destroyAll, configurable: true });
  }
  return db;
}
