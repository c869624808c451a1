import type { Knex } from 'knex';

// Each environment's inbox signing secrets (a subscriber token's `kid` is the row's id; two may
// be live at once, for rotation; sealed at rest like credentials), and its inbox settings: the
// browser origins allowed to call /v1/inbox, one row each so a CORS preflight, which carries no
// credential, can ask whether any environment allows its origin.
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('inbox_secrets', (t) => {
    t.string('id', 40).primary();
    t.string('environment_id', 24).notNullable().references('environments.id').onDelete('CASCADE');
    t.text('secret').notNullable();
    t.string('created_at', 30).notNullable();
    t.index(['environment_id', 'created_at']);
  });
  await knex.schema.createTable('inbox_origins', (t) => {
    t.string('environment_id', 24).notNullable().references('environments.id').onDelete('CASCADE');
    t.string('origin', 255).notNullable();
    t.primary(['environment_id', 'origin']);
    t.index(['origin']);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('inbox_origins');
  await knex.schema.dropTable('inbox_secrets');
}
