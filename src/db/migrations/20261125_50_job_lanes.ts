import type { Knex } from 'knex';

// The runner claims from two lanes: sends (email, SMS, chat, push), which wait on someone else's
// network, and local work (in-app, delay, digest, fan-out), which is only rows in our own
// database. Each lane claims from a partial index of its own due jobs, in the claim's order, so an
// in-app claim never reads past a backlog of sends waiting for their slots, nor the other way round.
// `jobs_due` stays for a claim of both lanes (runUntilIdle) and the queue depth of /metrics.

export async function up(knex: Knex): Promise<void> {
  await knex.raw(
    `CREATE INDEX jobs_due_send ON jobs (run_at, id) WHERE status IN ('pending', 'queued', 'delayed') AND type IN ('email', 'sms', 'chat', 'push')`,
  );
  await knex.raw(
    `CREATE INDEX jobs_due_local ON jobs (run_at, id) WHERE status IN ('pending', 'queued', 'delayed') AND type NOT IN ('email', 'sms', 'chat', 'push')`,
  );
}

export async function down(knex: Knex): Promise<void> {
  for (const index of ['jobs_due_send', 'jobs_due_local']) await knex.raw(`DROP INDEX ${index}`);
}
