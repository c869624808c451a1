import type { Knex } from 'knex';

// The inbox (issue 26): an in-app message gains the item's fields, an archived state and its
// actions' states; and each subscriber gets one row of counts, changed in the same transaction
// as every message, so the inbox's counts are exact and cost one lookup. `seq` is the number of
// the subscriber's last inbox event: taking it from this row, which every change updates (and
// so locks), makes the numbers gap-free and in commit order.
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('messages', (t) => {
    t.text('avatar');
    t.text('primary_action');
    t.text('secondary_action');
    t.text('data');
    t.text('tags');
    t.boolean('archived').notNullable().defaultTo(false);
    t.string('archived_at', 30);
  });
  await knex.schema.createTable('inbox_counts', (t) => {
    t.string('subscriber_key', 24).primary().references('subscribers.id').onDelete('CASCADE');
    t.string('environment_id', 24).notNullable().references('environments.id').onDelete('CASCADE');
    t.integer('unread').notNullable().defaultTo(0);
    t.integer('unseen').notNullable().defaultTo(0);
    t.integer('total').notNullable().defaultTo(0);
    t.integer('archived').notNullable().defaultTo(0);
    t.bigInteger('seq').notNullable().defaultTo(0);
  });
  // The messages stored before the inbox existed are counted once, here.
  await knex.raw(`
    INSERT INTO inbox_counts (subscriber_key, environment_id, unread, unseen, total, archived, seq)
    SELECT subscriber_key, MIN(environment_id),
           SUM(CASE WHEN read THEN 0 ELSE 1 END), SUM(CASE WHEN seen THEN 0 ELSE 1 END), COUNT(*), 0, 0
    FROM messages GROUP BY subscriber_key`);
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('inbox_counts');
  await knex.schema.alterTable('messages', (t) => {
    t.dropColumn('avatar');
    t.dropColumn('primary_action');
    t.dropColumn('secondary_action');
    t.dropColumn('data');
    t.dropColumn('tags');
    t.dropColumn('archived');
    t.dropColumn('archived_at');
  });
}
