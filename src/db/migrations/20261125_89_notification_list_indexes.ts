import type { Knex } from 'knex';

// GET /notifications filters by status, workflow, subscriber and channel, newest first. Each filter
// gets an index that leads with the environment and the filter and ends in the list's order
// (created_at, id), so a page is read in order and stops at its limit, and its count reads the
// index alone. A notification's channels are a JSON array in text: each channel gets a partial
// index over the notifications that name it, used when the list's condition is written exactly as
// the index's (channelCondition in repos/notifications.ts); a row is written to one or two of them,
// not to every channel's. A shipped migration never changes: these are its own copies.
const CHANNEL_INDEXED = ['in_app', 'email', 'sms', 'chat', 'push'] as const;

/** The condition a channel's partial index holds. */
function channelCondition(channel: string): string {
  return `channels LIKE '%"${channel}"%'`;
}

export async function up(knex: Knex): Promise<void> {
  await knex.raw('CREATE INDEX notifications_status ON notifications (environment_id, status, created_at, id)');
  await knex.raw('CREATE INDEX notifications_workflow ON notifications (environment_id, workflow_key, created_at, id)');
  await knex.schema.alterTable('notifications', (t) => {
    t.dropIndex(['environment_id', 'subscriber_id']);
    t.dropIndex(['environment_id', 'transaction_id']);
  });
  await knex.raw('CREATE INDEX notifications_subscriber ON notifications (environment_id, subscriber_id, created_at, id)');
  // Without the order in it, SQLite (with no statistics, as a server's file has) walked the whole
  // environment in created_at order rather than sort a transaction's few notifications.
  await knex.raw('CREATE INDEX notifications_transaction ON notifications (environment_id, transaction_id, created_at, id)');
  for (const channel of CHANNEL_INDEXED) {
    await knex.raw(`CREATE INDEX notifications_channel_${channel} ON notifications (environment_id, created_at, id) WHERE ${channelCondition(channel)}`);
  }
}

export async function down(knex: Knex): Promise<void> {
  for (const channel of CHANNEL_INDEXED) await knex.raw(`DROP INDEX notifications_channel_${channel}`);
  await knex.raw('DROP INDEX notifications_transaction');
  await knex.raw('DROP INDEX notifications_subscriber');
  await knex.schema.alterTable('notifications', (t) => {
    t.index(['environment_id', 'subscriber_id']);
    t.index(['environment_id', 'transaction_id']);
  });
  await knex.raw('DROP INDEX notifications_workflow');
  await knex.raw('DROP INDEX notifications_status');
}
