import type { Knex } from 'knex';

/**
 * Whether a knex instance (or a transaction, or a migration's) talks to PostgreSQL rather than
 * SQLite. On its own so that migrations can ask it: knex.ts imports the migrations.
 */
export function isPostgres(db: Knex): boolean {
  return db.client.config.client === 'pg';
}
