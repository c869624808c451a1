import type { Knex } from 'knex';

// While an environment holds its share of the send slots, the runner's claims leave it out. Read
// in due order (`jobs_due_send`, `webhook_deliveries_due`), such a claim had to step over every due
// send of the environments it left out to reach another's, for longer the larger their backlog
// (bench/README.md, "Sends of an environment at its share"). These indexes
// hold the same due sends by environment, so a claim that leaves some out finds the others' earliest
// sends by seeking (db/due-elsewhere.ts).
// Each repeats its due index's condition word for word, so that both databases use it.

export async function up(knex: Knex): Promise<void> {
  await knex.raw(
    `CREATE INDEX jobs_due_send_by_environment ON jobs (environment_id, run_at, id) WHERE status IN ('pending', 'queued', 'delayed') AND type IN ('email', 'sms', 'chat', 'push')`,
  );
  await knex.raw(`CREATE INDEX webhook_deliveries_due_by_environment ON webhook_deliveries (environment_id, run_at, id) WHERE status = 'pending'`);
}

export async function down(knex: Knex): Promise<void> {
  for (const index of ['jobs_due_send_by_environment', 'webhook_deliveries_due_by_environment']) await knex.raw(`DROP INDEX ${index}`);
}
