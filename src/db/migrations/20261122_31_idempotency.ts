import type { Knex } from 'knex';

// Idempotency keys: one row per (environment, key), claimed before a write runs and completed with
// the answer in the same transaction as the write. `token` names the request that holds the claim,
// so a request whose claim was taken over (it ran past `locked_until`) cannot record its answer.
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('idempotency_keys', (t) => {
    t.string('environment_id', 24).notNullable().references('environments.id').onDelete('CASCADE');
    t.string('key', 255).notNullable();
    // SHA-256 (hex) of the method, the path and the canonical JSON body.
    t.string('fingerprint', 64).notNullable();
    t.string('token', 36).notNullable();
    // running | done
    t.string('state', 8).notNullable();
    t.integer('response_status');
    // JSON text: the handler's response headers and body (null for a bodiless answer).
    t.text('response_headers');
    t.text('response_body');
    t.string('created_at', 30).notNullable();
    // While running: after this time the claim is presumed dead (a crashed process) and can be taken over.
    t.string('locked_until', 30);
    t.string('expires_at', 30).notNullable();
    t.primary(['environment_id', 'key']);
    t.index(['environment_id', 'expires_at']);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('idempotency_keys');
}
