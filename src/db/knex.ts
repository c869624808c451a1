// The database interface repos use: a knex instance (SQLite by default, PostgreSQL for several
// processes), and plain-SQL reads and writes that each dialect runs its own fastest way
// (dialect.ts, sqlite.ts, postgres.ts). Nothing above src/db/ knows which database it is on.
import path from 'node:path';
import { StartError } from '../config.js';
import type { Knex } from 'knex';
import type { Logger } from '../logger.js';
import { migrationSource } from './migrations/index.js';
import { isPostgres, type Dialect, type Runner } from './dialect.js';
import { createPostgresDb, postgres } from './postgres.js';
import { createSqliteDb, sqlite } from './sqlite.js';

export { isPostgres, type Runner };

export type Db = Knex;

/** A transaction on the database: what `db.transaction(work)` hands `work`. */
export type Transaction = Knex.Transaction;

export type Binding = string | number | null;

export interface DbOptions {
  /** PostgreSQL only: the schema to work in (tests give each file its own). */
  schema?: string;
  /**
   * SQLite only: checkpoint the write-ahead log on a thread of its own (db/checkpointer.ts), for
   * processes that run jobs.
   */
  checkpointInBackground?: boolean;
  /** PostgreSQL only: the most connections the pool opens (HERALD_PG_POOL_MAX). */
  poolMax?: number;
  /**
   * PostgreSQL only: keep plain statements prepared on each connection (named prepared statements;
   * HERALD_PG_PREPARED_STATEMENTS). On by default; off for a pooler in transaction mode that cannot
   * keep them.
   */
  preparedStatements?: boolean;
  /**
   * SQLite only: when a commit reaches the disk (HERALD_SQLITE_SYNCHRONOUS). `full` (the default):
   * each commit syncs the write-ahead log before it is acknowledged, so a power loss keeps every
   * acknowledged write (group commit pays one sync for the writes that arrive together). `normal`:
   * the log is synced at checkpoints only, so a power loss (not a crash of the process) can lose
   * the last commits.
   */
  synchronous?: 'full' | 'normal';
  /** Where knex's own warnings go (driver-log.ts); without it, to the console as knex writes them. */
  logger?: Logger;
}

const dialectOf = (db: Runner): Dialect => (isPostgres(db) ? postgres : sqlite);

/** The SQL function that lowercases any letter, on either database. */
export function lowerFunction(db: Runner): string {
  return dialectOf(db).lower;
}

/** `column IN (…)` for a list of values, written as each database reads it best. */
export function inList(db: Runner, column: string, values: readonly string[]): { sql: string; bindings: string[] } {
  return dialectOf(db).inList(column, values);
}

/**
 * The rows of a read-only statement, written in plain SQL with `?` placeholders (the same text
 * serves both databases). The hottest reads of the API (a trigger's workflow and recipients, a
 * subscriber by id) go through here.
 */
export async function selectRows<T>(db: Runner, sql: string, bindings: readonly Binding[]): Promise<T[]> {
  return (await dialectOf(db).selectRows(db, sql, bindings)) as T[];
}

/**
 * selectRows for a read whose best plan depends on how many rows match right now (a look at a
 * queue): PostgreSQL plans it afresh each time, since a plan kept from when most rows matched
 * would scan the whole table once they no longer do. SQLite keeps it prepared (its plans follow
 * the text, and INDEXED BY holds them to an index).
 */
export async function selectRowsPlannedAfresh<T>(db: Runner, sql: string, bindings: readonly Binding[]): Promise<T[]> {
  return (await dialectOf(db).selectRowsPlannedAfresh(db, sql, bindings)) as T[];
}

/** selectRows for a read that scans a whole table (counts for /metrics and for stats), off the event loop. */
export async function selectRowsInBackground<T>(db: Runner, sql: string, bindings: readonly Binding[]): Promise<T[]> {
  return (await dialectOf(db).selectRowsInBackground(db, sql, bindings)) as T[];
}

/** Runs an UPDATE or DELETE written in plain SQL with `?` placeholders and answers how many rows it changed. */
export async function changeRows(db: Runner, sql: string, bindings: readonly Binding[]): Promise<number> {
  return dialectOf(db).changeRows(db, sql, bindings);
}

/** The rows of a read built with knex's query builder that may walk many index entries (a filtered count, a deep page), off the event loop. */
export async function selectBuiltInBackground<T>(query: Knex.QueryBuilder): Promise<T[]> {
  return (await dialectOf(query as unknown as Runner).selectBuiltInBackground(query)) as T[];
}

/**
 * selectRows for a list's page: its rows may be large (a subscriber's `data` or a payload may be
 * 1 MiB, a hundred to a page), and a large page is read off the event loop.
 */
export async function selectPage<T>(db: Runner, sql: string, bindings: readonly Binding[]): Promise<T[]> {
  return (await dialectOf(db).selectPage(db, sql, bindings)) as T[];
}

/** selectPage for a read built with knex's query builder, run as selectRows runs its statements where it can. */
export async function selectBuiltPage<T>(query: Knex.QueryBuilder): Promise<T[]> {
  return (await dialectOf(query as unknown as Runner).selectBuiltPage(query)) as T[];
}

/** Whether a database URL is PostgreSQL's (`postgres://` or `postgresql://`, the scheme in any case). */
export function isPostgresUrl(url: string): boolean {
  return /^postgres(ql)?:\/\//i.test(url);
}

/** The file a SQLite database URL (`sqlite:<path>`, or a bare path) keeps its data in; none for PostgreSQL or memory. */
export function sqliteFileOf(url: string): string | undefined {
  if (isPostgresUrl(url)) return undefined;
  const file = url.replace(/^sqlite:/, '');
  if (file === '' || file.includes(':memory:') || file.startsWith('file:')) return undefined;
  return path.resolve(file);
}

/**
 * A DATABASE_URL a server or a command is given, checked: it must be `postgres://…`, or
 * `sqlite:<file>` or a file's path. A URL of another scheme (a typo of postgres included) would
 * otherwise be taken for a file's path, and `sqlite:` alone or `:memory:` for a database gone when
 * the process ends (which the job runner's read connection cannot open): the process cannot start.
 */
export function checkedDatabaseUrl(url: string): string {
  const sqliteFile = sqliteFileOf(url) !== undefined && !/^[a-z][a-z0-9+.-]+:/i.test(url.replace(/^sqlite:/, ''));
  if (isPostgresUrl(url) || sqliteFile) return url;
  throw new StartError(`DATABASE_URL must be postgres://… (PostgreSQL), or sqlite:<file> or a file's path (SQLite), not "${url}"`);
}

/** A knex instance for `postgres://…`, `sqlite:<path>`, or a bare SQLite path. */
export function createDb(url: string, options: DbOptions = {}): Db {
  return isPostgresUrl(url) ? createPostgresDb(url, options) : createSqliteDb(url, options);
}

/**
 * Runs the migrations this version has not run yet, all in one transaction. A database a newer
 * Herald migrated, or one an older process is still using on PostgreSQL (its locks against the
 * migration's: a deadlock), is refused with what to do; nothing is changed either way.
 */
export async function migrate(db: Db): Promise<void> {
  try {
    await db.migrate.latest({ migrationSource });
  } catch (err) {
    const missing = /following files are missing: (.*)$/s.exec(err instanceof Error ? err.message : '')?.[1];
    if (missing) {
      throw new StartError(
        `This database was migrated by a newer Herald (it ran ${missing.trim()}, which this version does not know): run that version or a newer one; a database is never migrated back`,
      );
    }
    if ((err as { code?: unknown }).code === '40P01') {
      throw new StartError('Migrating the database deadlocked against another process using it: stop every process of the older Herald, then start this one (README, "Upgrading")');
    }
    throw err;
  }
}

/** How long /ready waits for the database before it answers not ready. */
const READY_TIMEOUT_MS = 2_000;

/** The look at the migrations under way, by database: probes that come meanwhile wait for it rather than queue for connections of their own. */
const readinessLooks = new WeakMap<Db, Promise<boolean>>();

/** The database answers, within `timeoutMs`, and every migration has run. */
export async function isReady(db: Db, timeoutMs = READY_TIMEOUT_MS): Promise<boolean> {
  let look = readinessLooks.get(db);
  if (!look) {
    look = db.migrate.list({ migrationSource }).then(
      ([, pending]: [unknown, unknown[]]) => pending.length === 0,
      () => false,
    );
    readinessLooks.set(db, look);
    void look.finally(() => readinessLooks.delete(db));
  }
  let timer: NodeJS.Timeout | undefined;
  // A database that takes the connection and never answers is not ready either: say so in time.
  const late = new Promise<boolean>((resolve) => {
    timer = setTimeout(() => resolve(false), timeoutMs);
  });
  try {
    return await Promise.race([look, late]);
  } finally {
    clearTimeout(timer);
  }
}
