import type { Knex } from 'knex';

// The windows of throttle steps: one row per throttle key (a workflow step's count for one
// subscriber and key value), counting the notifications that reached it in the window that ends at
// `window_ends_at`. Rows whose window has ended are only history: the next hit starts a new window.
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('throttle_windows', (t) => {
    // SHA-256 of the environment, workflow, step, subscriber and key value, in hex.
    t.string('key', 64).primary();
    t.string('environment_id', 24).notNullable().references('environments.id').onDelete('CASCADE');
    t.integer('hits').notNullable();
    t.string('window_ends_at', 30).notNullable();
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('throttle_windows');
}
