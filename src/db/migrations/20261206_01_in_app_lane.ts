import type { Knex } from 'knex';

// In-app work gets a lane of its own, apart from the workflow's control steps (delay, digest,
// throttle, fan-out): the runner claims each in a loop of its own, so that an in-app delivery never
// waits for a fan-out's batches to end. Each lane claims from a partial index of its own due jobs,
// in the claim's order; `jobs_due_local`, which held both, goes.

export async function up(knex: Knex): Promise<void> {
  await knex.raw(`CREATE INDEX jobs_due_in_app ON jobs (run_at, id) WHERE status IN ('pending', 'queued', 'delayed') AND type = 'in_app'`);
  await knex.raw(
    `CREATE INDEX jobs_due_control ON jobs (run_at, id) WHERE status IN ('pending', 'queued', 'delayed') AND type NOT IN ('email', 'sms', 'chat', 'push', 'in_app')`,
  );
  await knex.raw('DROP INDEX jobs_due_local');
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw(
    `CREATE INDEX jobs_due_local ON jobs (run_at, id) WHERE status IN ('pending', 'queued', 'delayed') AND type NOT IN ('email', 'sms', 'chat', 'push')`,
  );
  for (const index of ['jobs_due_in_app', 'jobs_due_control']) await knex.raw(`DROP INDEX ${index}`);
}
