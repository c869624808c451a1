import type { Knex } from 'knex';

// Organizations own environments; an API key opens exactly one environment. Times are ISO 8601
// strings in UTC (one format for both databases, and they sort as text).
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('organizations', (t) => {
    t.string('id', 24).primary();
    t.string('name', 255).notNullable();
    t.string('plan', 16).notNullable();
    // Enterprise budgets are set per organization; null means the plan's own numbers (or none).
    t.integer('rate_per_minute');
    t.integer('burst');
    t.string('created_at', 30).notNullable();
  });
  await knex.schema.createTable('environments', (t) => {
    t.string('id', 24).primary();
    t.string('organization_id', 24).notNullable().references('organizations.id').onDelete('CASCADE');
    t.string('name', 100).notNullable();
    t.string('created_at', 30).notNullable();
    t.unique(['organization_id', 'name']);
  });
  await knex.schema.createTable('api_keys', (t) => {
    t.string('id', 24).primary();
    t.string('environment_id', 24).notNullable().references('environments.id').onDelete('CASCADE');
    t.string('name', 100).notNullable();
    // Only the SHA-256 of a key is kept; the prefix lets people tell keys apart in a listing.
    t.string('key_hash', 64).notNullable().unique();
    t.string('key_prefix', 16).notNullable();
    t.string('created_at', 30).notNullable();
    t.string('revoked_at', 30);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('api_keys');
  await knex.schema.dropTable('environments');
  await knex.schema.dropTable('organizations');
}
