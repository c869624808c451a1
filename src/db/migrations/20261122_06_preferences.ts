import type { Knex } from 'knex';

// A subscriber's own preference layers. Only what the subscriber chose is stored: `enabled` null
// and channels left out of the JSON mean "not set here, ask the layer below".
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('subscriber_global_preferences', (t) => {
    t.string('subscriber_id', 24).primary().references('subscribers.id').onDelete('CASCADE');
    t.boolean('enabled');
    t.text('channels').notNullable();
    t.string('updated_at', 30).notNullable();
  });
  await knex.schema.createTable('subscriber_workflow_preferences', (t) => {
    t.string('subscriber_id', 24).notNullable().references('subscribers.id').onDelete('CASCADE');
    t.string('workflow_id', 24).notNullable().references('workflows.id').onDelete('CASCADE');
    t.boolean('enabled');
    t.text('channels').notNullable();
    t.string('updated_at', 30).notNullable();
    t.primary(['subscriber_id', 'workflow_id']);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('subscriber_workflow_preferences');
  await knex.schema.dropTable('subscriber_global_preferences');
}
