import type { Knex } from 'knex';

// How many days an environment keeps its notifications and what hangs off them (engine/retention.ts):
// null means the server's HERALD_RETENTION_DAYS, 0 keeps them for ever.
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('environments', (t) => t.integer('retention_days'));
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('environments', (t) => t.dropColumn('retention_days'));
}
