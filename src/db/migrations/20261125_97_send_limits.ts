import type { Knex } from 'knex';

// Provider send limits. `integrations.send_limits` holds an integration's own windows (JSON; null:
// the provider's published limits). `send_turns` holds, per pacing window, when its next send's
// turn comes (a token bucket kept as the time it would next be full, the "generic cell rate"
// form): one number per window, so taking a turn is one locked read and one write.
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('integrations', (t) => {
    t.text('send_limits').nullable();
  });
  await knex.schema.createTable('send_turns', (t) => {
    // SHA-256 (hex) of the integration or destination and the window.
    t.string('key', 64).primary();
    // Epoch milliseconds: the window's theoretical next send; at or before now, the bucket is full.
    t.bigInteger('next_at').notNullable();
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('send_turns');
  await knex.schema.alterTable('integrations', (t) => {
    t.dropColumn('send_limits');
  });
}
