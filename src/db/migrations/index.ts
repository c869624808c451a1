import type { Knex } from 'knex';
import * as accounts from './20261122_01_accounts.js';
import * as subscribers from './20261122_02_subscribers.js';

/**
 * Every migration, in order. Listed here rather than found on disk so they load the same way under
 * tsx, vitest and compiled JavaScript. Append only: a shipped migration never changes.
 */
const migrations: Record<string, Knex.Migration> = {
  '20261122_01_accounts': accounts,
  '20261122_02_subscribers': subscribers,
};

export const migrationSource: Knex.MigrationSource<string> = {
  getMigrations: async () => Object.keys(migrations),
  getMigrationName: (name) => name,
  getMigration: async (name) => migrations[name],
};
