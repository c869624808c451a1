import type { Knex } from 'knex';

export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('topics', (t) => {
    t.string('id', 24).primary();
    t.string('environment_id', 24).notNullable().references('environments.id').onDelete('CASCADE');
    t.string('topic_key', 255).notNullable();
    t.string('name', 255).notNullable();
    t.string('created_at', 30).notNullable();
    t.string('updated_at', 30).notNullable();
    t.unique(['environment_id', 'topic_key']);
    t.index(['environment_id', 'created_at', 'id']);
  });
  // Memberships point at the subscriber's internal id, so deleting either side removes them.
  await knex.schema.createTable('topic_subscribers', (t) => {
    t.string('topic_id', 24).notNullable().references('topics.id').onDelete('CASCADE');
    t.string('subscriber_id', 24).notNullable().references('subscribers.id').onDelete('CASCADE');
    t.string('created_at', 30).notNullable();
    t.primary(['topic_id', 'subscriber_id']);
    t.index(['topic_id', 'created_at', 'subscriber_id']);
    t.index(['subscriber_id']);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('topic_subscribers');
  await knex.schema.dropTable('topics');
}
