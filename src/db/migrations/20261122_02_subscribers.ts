import type { Knex } from 'knex';

export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('subscribers', (t) => {
    t.string('id', 24).primary();
    t.string('environment_id', 24).notNullable().references('environments.id').onDelete('CASCADE');
    t.string('subscriber_id', 255).notNullable();
    t.string('email', 254);
    t.string('first_name', 100);
    t.string('last_name', 100);
    t.string('phone', 32);
    t.string('avatar', 2048);
    t.string('locale', 35);
    t.string('timezone', 64);
    t.text('data').notNullable();
    t.string('created_at', 30).notNullable();
    t.string('updated_at', 30).notNullable();
    t.unique(['environment_id', 'subscriber_id']);
    t.index(['environment_id', 'created_at', 'id']);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('subscribers');
}
