import type { Knex } from 'knex';

export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('workflows', (t) => {
    t.string('id', 24).primary();
    t.string('environment_id', 24).notNullable().references('environments.id').onDelete('CASCADE');
    t.string('workflow_id', 100).notNullable();
    t.string('name', 100).notNullable();
    t.text('description');
    t.text('tags').notNullable();
    t.boolean('active').notNullable();
    t.boolean('critical').notNullable();
    t.text('steps').notNullable();
    t.text('payload_schema');
    t.text('preference_settings').notNullable();
    t.string('created_at', 30).notNullable();
    t.string('updated_at', 30).notNullable();
    t.unique(['environment_id', 'workflow_id']);
    t.index(['environment_id', 'created_at', 'id']);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('workflows');
}
