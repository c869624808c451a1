import type { Db } from '../../src/db/knex.js';

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
