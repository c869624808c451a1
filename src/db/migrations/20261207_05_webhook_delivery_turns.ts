import type { Knex } from 'knex';

// An endpoint's rateLimitPerSecond is paced in `send_turns`, shared by every worker process: a
// delivery over the rate takes a turn there and goes back to the queue until it (its run_at).
// `paced_at_rate` is the rate it took that turn under, so that, claimed again at its turn, it goes
// without taking another; null once anything else moves it. A rate changed since takes a turn afresh.
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('webhook_deliveries', (t) => {
    t.integer('paced_at_rate').nullable();
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('webhook_deliveries', (t) => {
    t.dropColumn('paced_at_rate');
  });
}
