import type { Knex } from 'knex';

// The time (epoch ms) of a subscriber's newest in-app message. A message's created_at is taken
// under the subscriber's counts row, later than this one's, so that a subscriber's messages are
// stamped in the order they commit: two workers deliver at once, and a feed followed with `after=`
// must not find a message stamped before one it has listed already.
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('inbox_counts', (t) => {
    t.bigInteger('last_message_ms').nullable();
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('inbox_counts', (t) => {
    t.dropColumn('last_message_ms');
  });
}
