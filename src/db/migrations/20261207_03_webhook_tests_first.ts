import type { Knex } from 'knex';

// A test event (POST /v1/webhook-endpoints/{id}/test) has someone waiting for it in the dashboard:
// the runner claims it ahead of the due deliveries, which it would otherwise wait behind, however
// many an environment's fan-out had queued (db/leased-queue.ts, `first`). This index holds only the
// due test events, in due order; its condition is repeated word for word by the claim.
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`CREATE INDEX webhook_deliveries_due_tests ON webhook_deliveries (run_at, id) WHERE status = 'pending' AND event_type = 'webhook.test'`);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw(`DROP INDEX webhook_deliveries_due_tests`);
}
