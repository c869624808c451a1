import type { Knex } from 'knex';

// An event keeps the workflow it was triggered with, so that later edits do not change a run under
// way. Until now each event stored its own copy, and a workflow's templates (an email's HTML) are
// often most of what a trigger writes: a million triggers of a 30 KB workflow stored 30 GB. Events
// written from now on share one copy of each version of a workflow, a snapshot named by a digest of
// its text (and its environment), and keep only that name; `events.workflow` is left empty for them
// and holds the copy of the events written before. Retention removes a snapshot no event uses any
// more once no trigger has used it for a day longer than the environment keeps its notifications.
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('workflow_snapshots', (t) => {
    t.string('environment_id', 24).notNullable().references('environments.id').onDelete('CASCADE');
    t.string('digest', 64).notNullable();
    t.text('body').notNullable();
    // When a trigger last used it (rewritten at most about once an hour by each process).
    t.string('used_at', 30).notNullable();
    t.primary(['environment_id', 'digest']);
  });
  await knex.schema.alterTable('events', (t) => {
    t.string('workflow_snapshot', 64).nullable();
  });
}

export async function down(knex: Knex): Promise<void> {
  // Each event gets its copy back, as events kept it before.
  await knex.raw(`UPDATE events SET workflow = (SELECT s.body FROM workflow_snapshots s WHERE s.environment_id = events.environment_id AND s.digest = events.workflow_snapshot)
    WHERE workflow_snapshot IS NOT NULL`);
  await knex.schema.alterTable('events', (t) => {
    t.dropColumn('workflow_snapshot');
  });
  await knex.schema.dropTable('workflow_snapshots');
}
