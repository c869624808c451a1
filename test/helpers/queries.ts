import type { Db } from '../../src/db/knex.js';

/**
 * Records the SQL of the queries knex runs on `db` that match `pattern`, from now until `stop()`,
 * which answers them. Statements run outside knex (SQLite's read connection, runInSqliteTransaction)
 * are not seen.
 */
export function recordQueries(db: Db, pattern: RegExp): { stop(): string[] } {
  const seen: string[] = [];
  const record = (query: { sql: string }) => {
    if (pattern.test(query.sql.trim())) seen.push(query.sql);
  };
  db.on('query', record);
  return {
    stop() {
      db.off('query', record);
      return seen;
    },
  };
}
