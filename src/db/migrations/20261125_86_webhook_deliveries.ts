import type { Knex } from 'knex';

// The outbox: one row per event and endpoint, written in the transaction of the change it tells
// of, and claimed by the job runner under a lease like a job. `event_id` is the webhook-id, the
// same at every try and to every endpoint.
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('webhook_deliveries', (t) => {
    t.string('id', 24).primary();
    t.string('environment_id', 24).notNullable().references('environments.id').onDelete('CASCADE');
    // No foreign key: a change recorded by a process that has not yet heard of the endpoint's
    // deletion must still commit. Deleting an endpoint deletes its deliveries; a delivery left for
    // a deleted endpoint is dropped when it is claimed.
    t.string('endpoint_id', 24).notNullable();
    t.string('event_id', 32).notNullable();
    t.string('event_type', 40).notNullable();
    t.text('payload').notNullable();
    // pending (tries remain), running (a worker holds it), succeeded, failed.
    t.string('status', 16).notNullable();
    t.integer('attempts').notNullable().defaultTo(0);
    // The next try was asked for by a retry or a recover.
    t.boolean('manual').notNullable().defaultTo(false);
    t.string('run_at', 30).notNullable();
    t.string('lease_owner', 64);
    t.string('lease_expires_at', 30);
    t.string('created_at', 30).notNullable();
    t.string('updated_at', 30).notNullable();
    t.index(['endpoint_id', 'created_at', 'id']);
  });
  // What the runner claims, in its order: only the rows that can be claimed are in it.
  await knex.raw(`CREATE INDEX webhook_deliveries_due ON webhook_deliveries (run_at, id) WHERE status = 'pending'`);
  await knex.raw(`CREATE INDEX webhook_deliveries_leased ON webhook_deliveries (lease_expires_at, id) WHERE status = 'running'`);
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('webhook_deliveries');
}
