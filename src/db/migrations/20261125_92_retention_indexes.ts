import type { Knex } from 'knex';

// Retention (engine/retention.ts) deletes an environment's oldest events, and the messages of the
// notifications it deletes: messages have no foreign key to cascade from, so they are found by
// their notification. Both without reading the whole table.
export async function up(knex: Knex): Promise<void> {
  await knex.raw('CREATE INDEX events_environment_created ON events (environment_id, created_at)');
  await knex.raw('CREATE INDEX messages_notification ON messages (notification_id)');
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('DROP INDEX messages_notification');
  await knex.raw('DROP INDEX events_environment_created');
}
