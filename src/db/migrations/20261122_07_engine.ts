import type { Knex } from 'knex';

// The engine's tables. A trigger is an event; each recipient gets a notification; each step of a
// notification runs as a job (topic fan-out runs as a job too); every attempt and decision of a job
// is an execution detail; in-app steps leave a message in the subscriber's feed.
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('events', (t) => {
    t.string('id', 24).primary();
    t.string('environment_id', 24).notNullable().references('environments.id').onDelete('CASCADE');
    t.string('transaction_id', 255).notNullable();
    t.string('workflow_key', 100).notNullable();
    // The workflow as it was when triggered: later edits do not change a run under way.
    t.text('workflow').notNullable();
    t.text('payload').notNullable();
    t.text('overrides').notNullable();
    t.text('actor');
    t.string('canceled_at', 30);
    t.string('created_at', 30).notNullable();
    t.unique(['environment_id', 'transaction_id']);
  });
  await knex.schema.createTable('notifications', (t) => {
    t.string('id', 24).primary();
    t.string('environment_id', 24).notNullable().references('environments.id').onDelete('CASCADE');
    t.string('event_id', 24).notNullable().references('events.id').onDelete('CASCADE');
    t.string('transaction_id', 255).notNullable();
    t.string('workflow_key', 100).notNullable();
    // No foreign key: a notification stays readable after its subscriber is deleted.
    t.string('subscriber_key', 24).notNullable();
    t.string('subscriber_id', 255).notNullable();
    t.text('channels').notNullable();
    t.string('status', 16).notNullable();
    t.string('created_at', 30).notNullable();
    t.string('updated_at', 30).notNullable();
    // Fan-out may run a batch twice after a crash; each recipient still gets one notification.
    t.unique(['event_id', 'subscriber_key']);
    t.index(['environment_id', 'created_at', 'id']);
    t.index(['environment_id', 'transaction_id']);
    t.index(['environment_id', 'subscriber_id']);
  });
  await knex.schema.createTable('jobs', (t) => {
    t.string('id', 24).primary();
    t.string('environment_id', 24).notNullable().references('environments.id').onDelete('CASCADE');
    t.string('event_id', 24).notNullable().references('events.id').onDelete('CASCADE');
    t.string('notification_id', 24).references('notifications.id').onDelete('CASCADE');
    t.string('kind', 16).notNullable();
    t.integer('step_index');
    t.string('step_id', 64);
    t.string('type', 16).notNullable();
    t.string('status', 16).notNullable();
    t.string('provider_id', 32);
    t.integer('attempts').notNullable().defaultTo(0);
    t.string('run_at', 30).notNullable();
    t.string('lease_owner', 64);
    t.string('lease_expires_at', 30);
    // Set while this job is the open digest for its (subscriber, workflow, key): unique, so two
    // concurrent triggers can never open two digests for the same key.
    t.string('digest_key', 600).unique();
    t.string('merged_into', 24);
    // Whatever the step carries forward: the digest's events, the fan-out's cursor.
    t.text('state').notNullable();
    t.string('created_at', 30).notNullable();
    t.string('updated_at', 30).notNullable();
    t.index(['status', 'run_at']);
    t.index(['event_id']);
    t.index(['notification_id']);
    t.index(['merged_into']);
  });
  await knex.schema.createTable('execution_details', (t) => {
    t.string('id', 24).primary();
    t.string('job_id', 24).notNullable().references('jobs.id').onDelete('CASCADE');
    t.string('status', 16).notNullable();
    t.text('detail').notNullable();
    t.string('provider_id', 32);
    t.text('raw');
    t.boolean('is_retry').notNullable();
    t.string('created_at', 30).notNullable();
    t.index(['job_id', 'created_at']);
  });
  await knex.schema.createTable('messages', (t) => {
    t.string('id', 24).primary();
    t.string('environment_id', 24).notNullable().references('environments.id').onDelete('CASCADE');
    t.string('subscriber_key', 24).notNullable().references('subscribers.id').onDelete('CASCADE');
    t.string('subscriber_id', 255).notNullable();
    t.string('notification_id', 24).notNullable();
    // One message per job: a job retried after a crash cannot leave a second copy.
    t.string('job_id', 24).notNullable().unique();
    t.string('transaction_id', 255).notNullable();
    t.string('workflow_key', 100).notNullable();
    t.text('subject');
    t.text('content').notNullable();
    t.text('url');
    t.boolean('seen').notNullable();
    t.boolean('read').notNullable();
    t.string('seen_at', 30);
    t.string('read_at', 30);
    t.string('created_at', 30).notNullable();
    t.index(['subscriber_key', 'created_at', 'id']);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('messages');
  await knex.schema.dropTable('execution_details');
  await knex.schema.dropTable('jobs');
  await knex.schema.dropTable('notifications');
  await knex.schema.dropTable('events');
}
