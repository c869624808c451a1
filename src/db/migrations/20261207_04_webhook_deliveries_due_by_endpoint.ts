import type { Knex } from 'knex';

// When an endpoint's destination turns a delivery away (busy, slow, its breaker open, its rate),
// the endpoint's other due deliveries are put back with it in one write (deferEndpointDeliveries),
// rather than each being claimed and put back in turn ahead of the healthy endpoints' deliveries.
// This index holds the due deliveries by endpoint, in due order; its condition is the due index's.
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`CREATE INDEX webhook_deliveries_due_by_endpoint ON webhook_deliveries (endpoint_id, run_at, id) WHERE status = 'pending'`);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw(`DROP INDEX webhook_deliveries_due_by_endpoint`);
}
