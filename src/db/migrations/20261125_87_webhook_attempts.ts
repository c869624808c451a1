import type { Knex } from 'knex';

// Each try of a webhook delivery: what the endpoint answered (the first KB), how long it took.
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('webhook_attempts', (t) => {
    t.string('id', 24).primary();
    t.string('delivery_id', 24).notNullable().references('webhook_deliveries.id').onDelete('CASCADE');
    t.integer('attempt').notNullable();
    t.string('trigger', 16).notNullable();
    t.integer('status_code');
    t.integer('duration_ms').notNullable();
    t.text('response');
    t.text('error');
    t.string('created_at', 30).notNullable();
    t.index(['delivery_id', 'created_at']);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('webhook_attempts');
}
