import type { Knex } from 'knex';
import { isPostgres } from '../dialect.js';

// The job queue's indexes hold only the jobs they are for.
//
// A claim looks for due jobs and for running jobs whose lease ran out: a few rows among the many
// done. Through one index on (status, run_at), its plan rested on the statistics of `status`, which
// a queue changes faster than ANALYZE follows. When they said most jobs were due (taken while a
// backlog waited), PostgreSQL scanned the whole table on every claim: every fan-out batch and
// every idle poll. Each kind of claimable job now has a partial index in the
// claim's order, which is read in order and stops at the claim's limit whatever the statistics say.
//
// `digest_key` (set while a digest is open) and `merged_into` (set on a job a digest absorbed) are
// null on almost every job; their indexes now leave those rows out, as does `jobs_due` every job
// written already done (a fan-out's in-app deliveries).
//
// SQLite keeps its index on (status, run_at): /metrics counts jobs by status through it, several
// times faster than scanning the table. Its
// claims name their partial indexes (INDEXED BY), which its planner would otherwise pass over for
// that one. PostgreSQL scans the table for that count with or without it, so there it goes: three
// index entries fewer a delivery, two on SQLite.

export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('jobs', (t) => {
    if (isPostgres(knex)) t.dropIndex(['status', 'run_at']);
    t.dropIndex(['merged_into']);
    t.dropUnique(['digest_key']);
  });
  await knex.raw(`CREATE INDEX jobs_due ON jobs (run_at, id) WHERE status IN ('pending', 'queued', 'delayed')`);
  await knex.raw(`CREATE INDEX jobs_leased ON jobs (lease_expires_at, id) WHERE status = 'running'`);
  await knex.raw('CREATE INDEX jobs_merged_into ON jobs (merged_into) WHERE merged_into IS NOT NULL');
  // Still unique: two concurrent triggers can never open two digests for the same key.
  await knex.raw('CREATE UNIQUE INDEX jobs_open_digest ON jobs (digest_key) WHERE digest_key IS NOT NULL');
}

export async function down(knex: Knex): Promise<void> {
  for (const index of ['jobs_due', 'jobs_leased', 'jobs_merged_into', 'jobs_open_digest']) await knex.raw(`DROP INDEX ${index}`);
  await knex.schema.alterTable('jobs', (t) => {
    if (isPostgres(knex)) t.index(['status', 'run_at']);
    t.index(['merged_into']);
    t.unique(['digest_key']);
  });
}
