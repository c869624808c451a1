import type { Knex } from 'knex';

/** Where a repository runs its queries: the database, or a transaction on it (itself a Knex). */
export type Runner = Knex | Knex.Transaction;

type Binding = string | number | null;

/**
 * What differs between SQLite and PostgreSQL, behind one interface: repos write their plain SQL
 * with `?` placeholders once, and each dialect runs it the way its database runs it fastest
 * (sqlite.ts, postgres.ts). Each answers exactly as knex's plain query would.
 */
export interface Dialect {
  /** The SQL function that lowercases any letter (SQLite's own `lower()` folds ASCII only). */
  lower: string;
  /** `column IN (…)` for a list of values, as this database reads it best. */
  inList(column: string, values: readonly string[]): { sql: string; bindings: string[] };
  /** The rows of a read-only statement. */
  selectRows(db: Runner, sql: string, bindings: readonly Binding[]): Promise<unknown[]>;
  /** selectRows for a read whose best plan depends on how many rows match right now (knex.ts, selectRowsPlannedAfresh). */
  selectRowsPlannedAfresh(db: Runner, sql: string, bindings: readonly Binding[]): Promise<unknown[]>;
  /** selectRows for a read that scans a whole table, without holding the event loop. */
  selectRowsInBackground(db: Runner, sql: string, bindings: readonly Binding[]): Promise<unknown[]>;
  /** The rows of a read built with knex's query builder that may walk many index entries (a count, a deep page), without holding the event loop. */
  selectBuiltInBackground(query: Knex.QueryBuilder): Promise<unknown[]>;
  /** selectRows for a list's page, whose rows may be large (a hundred of 1 MiB): without holding the event loop when they are. */
  selectPage(db: Runner, sql: string, bindings: readonly Binding[]): Promise<unknown[]>;
  /** selectPage for a read built with knex's query builder, run as selectRows runs its statements where it can. */
  selectBuiltPage(query: Knex.QueryBuilder): Promise<unknown[]>;
  /** Runs an UPDATE or DELETE and answers how many rows it changed. */
  changeRows(db: Runner, sql: string, bindings: readonly Binding[]): Promise<number>;
}

/**
 * Whether a knex instance (or a transaction, or a migration's) talks to PostgreSQL rather than
 * SQLite. Only src/db/ asks: everything above it goes through the Dialect.
 */
export function isPostgres(db: Runner): boolean {
  return db.client.config.client === 'pg';
}
