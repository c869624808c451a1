import type { Knex } from 'knex';

// Retention reads an environment's oldest webhook deliveries: by this index, not the whole outbox.
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('webhook_deliveries', (t) => {
    t.index(['environment_id', 'created_at', 'id'], 'webhook_deliveries_age');
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('webhook_deliveries', (t) => {
    t.dropIndex(['environment_id', 'created_at', 'id'], 'webhook_deliveries_age');
  });
}
