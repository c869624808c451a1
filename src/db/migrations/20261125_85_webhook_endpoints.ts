import type { Knex } from 'knex';

// Where an environment's webhook events go (issue 27). The secret is sealed at rest like an
// integration's credentials; after a rotation the previous one signs too until its expiry.
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('webhook_endpoints', (t) => {
    t.string('id', 24).primary();
    t.string('environment_id', 24).notNullable().references('environments.id').onDelete('CASCADE');
    t.text('url').notNullable();
    t.text('description');
    // A JSON array of event types; null for every type.
    t.text('event_types');
    t.boolean('disabled').notNullable();
    t.text('disabled_reason');
    t.integer('rate_limit_per_second');
    t.boolean('include_content').notNullable();
    t.text('secret').notNullable();
    t.text('previous_secret');
    t.string('previous_secret_expires_at', 30);
    // Since when every delivery failed: five days of it disables the endpoint.
    t.string('failing_since', 30);
    t.string('created_at', 30).notNullable();
    t.string('updated_at', 30).notNullable();
    t.index(['environment_id', 'created_at', 'id']);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('webhook_endpoints');
}
