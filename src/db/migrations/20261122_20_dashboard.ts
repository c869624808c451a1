import type { Knex } from 'knex';

// The dashboard: an organization's owners (who sign in with a password the CLI sets), their
// sessions, and the counters that rate-limit failed sign-ins. Counters live in the database so the
// limit holds across API processes.
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('owners', (t) => {
    t.string('id', 24).primary();
    t.string('organization_id', 24).notNullable().references('organizations.id').onDelete('CASCADE');
    // Stored lowercased: sign-in by email is case-insensitive.
    t.string('email', 255).notNullable().unique();
    // "scrypt$N$r$p$salt$hash", so the cost can be raised later without breaking old hashes.
    t.string('password_hash', 255).notNullable();
    t.string('created_at', 30).notNullable();
    t.string('updated_at', 30).notNullable();
  });
  await knex.schema.createTable('dashboard_sessions', (t) => {
    // The SHA-256 of the cookie's token: a copy of this table opens no session.
    t.string('id', 64).primary();
    t.string('owner_id', 24).notNullable().references('owners.id').onDelete('CASCADE');
    t.string('csrf_token', 64).notNullable();
    t.string('created_at', 30).notNullable();
    t.string('expires_at', 30).notNullable().index();
  });
  await knex.schema.createTable('dashboard_sign_in_limits', (t) => {
    // The SHA-256 of "email|IP": the table holds no address in clear.
    t.string('key', 64).primary();
    t.integer('hits').notNullable();
    t.string('reset_at', 30).notNullable();
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('dashboard_sign_in_limits');
  await knex.schema.dropTable('dashboard_sessions');
  await knex.schema.dropTable('owners');
}
