import type { Knex } from 'knex';

// Single-use tickets that open one inbox stream for browsers' EventSource, which cannot send a
// header. Stored (as a SHA-256) in the database so any API process can take one, once.
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('inbox_tickets', (t) => {
    t.string('ticket_hash', 64).primary();
    t.string('environment_id', 24).notNullable().references('environments.id').onDelete('CASCADE');
    t.string('organization_id', 24).notNullable();
    t.string('subscriber_id', 255).notNullable();
    t.string('expires_at', 30).notNullable();
    t.index(['expires_at']);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('inbox_tickets');
}
