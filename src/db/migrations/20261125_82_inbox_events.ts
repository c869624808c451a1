import type { Knex } from 'knex';

// What each subscriber's inbox streams send, kept at least 24 hours so a stream that reconnects
// with Last-Event-ID is replayed what it missed. `seq` is the subscriber's own gap-free number
// (inbox_counts.seq); streams read by (subscriber_key, seq), never by a global id, which
// concurrent transactions can commit out of order.
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('inbox_events', (t) => {
    t.string('subscriber_key', 24).notNullable().references('subscribers.id').onDelete('CASCADE');
    t.bigInteger('seq').notNullable();
    t.string('environment_id', 24).notNullable();
    t.string('type', 40).notNullable();
    t.text('payload').notNullable();
    t.string('created_at', 30).notNullable();
    t.primary(['subscriber_key', 'seq']);
    t.index(['created_at']);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('inbox_events');
}
