import { isPostgres, type Db } from '../../src/db/knex.js';

export interface RecordedQuery {
  sql: string;
  bindings: unknown[];
}

/**
 * Records the queries knex runs on `db` whose SQL matches `pattern`, from now until `stop()`,
 * which answers them. Statements run outside knex (SQLite's read connection, runInSqliteTransaction)
 * are not seen.
 */
export function recordQueries(db: Db, pattern: RegExp): { stop(): RecordedQuery[] } {
  const seen: RecordedQuery[] = [];
  const record = (query: RecordedQuery) => {
    if (pattern.test(query.sql.trim())) seen.push({ sql: query.sql, bindings: query.bindings });
  };
  db.on('query', record);
  return {
    stop() {
      db.off('query', record);
      return seen;
    },
  };
}

/**
 * How many statements matching `pattern` `work` runs: PostgreSQL's are knex query events; SQLite's
 * in a transaction run past knex, on its one connection, whose prepare (statements kept, sqlite.ts)
 * each asks for.
 */
export async function countStatements(db: Db, pattern: RegExp, work: () => Promise<unknown>): Promise<number> {
  let count = 0;
  await onStatements(db, pattern, () => count++, work);
  return count;
}

/** Calls `seen` as each statement matching `pattern` runs during `work`, as countStatements counts them (`bindings`: PostgreSQL's alone). */
export async function onStatements(db: Db, pattern: RegExp, seen: (sql: string, bindings?: readonly unknown[]) => void, work: () => Promise<unknown>): Promise<void> {
  if (isPostgres(db)) {
    const record = (query: { sql: string; bindings: unknown[] }) => {
      if (pattern.test(query.sql.trim())) seen(query.sql, query.bindings);
    };
    db.on('query', record);
    try {
      await work();
    } finally {
      db.off('query', record);
    }
    return;
  }
  const connection = (await db.client.acquireConnection()) as { prepare(sql: string): unknown };
  await db.client.releaseConnection(connection);
  const prepare = connection.prepare;
  connection.prepare = (sql: string) => {
    if (pattern.test(sql.trim())) seen(sql);
    return prepare.call(connection, sql);
  };
  try {
    await work();
  } finally {
    connection.prepare = prepare;
  }
}
