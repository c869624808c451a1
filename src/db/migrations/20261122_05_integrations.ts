import type { Knex } from 'knex';

export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('integrations', (t) => {
    t.string('id', 24).primary();
    t.string('environment_id', 24).notNullable().references('environments.id').onDelete('CASCADE');
    t.string('provider_id', 32).notNullable();
    t.string('channel', 16).notNullable();
    t.string('name', 100).notNullable();
    t.string('identifier', 100).notNullable();
    // JSON, or an encrypted envelope of it when HERALD_SECRET is set.
    t.text('credentials').notNullable();
    t.boolean('active').notNullable();
    // The channel's name while this is its primary integration, else null. A unique index on it
    // keeps one primary per channel in both databases (NULLs never collide).
    t.string('primary_channel', 16);
    t.string('created_at', 30).notNullable();
    t.string('updated_at', 30).notNullable();
    t.unique(['environment_id', 'identifier']);
    t.unique(['environment_id', 'primary_channel']);
    t.index(['environment_id', 'created_at', 'id']);
  });
  // A subscriber's credentials for one chat or push integration (webhook URL, device tokens).
  await knex.schema.createTable('subscriber_channels', (t) => {
    t.string('subscriber_id', 24).notNullable().references('subscribers.id').onDelete('CASCADE');
    t.string('integration_id', 24).notNullable().references('integrations.id').onDelete('CASCADE');
    t.string('provider_id', 32).notNullable();
    t.text('credentials').notNullable();
    t.string('created_at', 30).notNullable();
    t.string('updated_at', 30).notNullable();
    t.primary(['subscriber_id', 'integration_id']);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('subscriber_channels');
  await knex.schema.dropTable('integrations');
}
