import type { Knex } from 'knex';
import { isPostgres } from '../dialect.js';

// The unfiltered total of GET /notifications: counting an environment's notifications reads every
// entry of an index (hundreds of milliseconds a million rows). Each environment's total is kept
// instead, by triggers, so it changes in the transaction of every write that inserts or deletes
// notifications (a trigger, a fan-out batch, retention, an environment deleted), whichever code
// path writes them.
//
// PostgreSQL: a statement-level trigger adds each statement's rows at once, into a shard picked by
// the connection (pg_backend_pid), so concurrent transactions of one environment rarely wait on
// one row and a transaction only ever holds its own shard (no deadlock between two). SQLite has one
// writer: one row per environment (shard 0), a row-level trigger.
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('notification_counts', (t) => {
    t.string('environment_id', 24).notNullable().references('environments.id').onDelete('CASCADE');
    t.integer('shard').notNullable();
    t.bigInteger('total').notNullable();
    t.primary(['environment_id', 'shard']);
  });
  if (isPostgres(knex)) {
    await knex.raw(`CREATE FUNCTION notifications_counted() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        IF TG_OP = 'INSERT' THEN
          INSERT INTO notification_counts (environment_id, shard, total)
            SELECT environment_id, pg_backend_pid() % 16, count(*) FROM new_rows GROUP BY environment_id ORDER BY environment_id
            ON CONFLICT (environment_id, shard) DO UPDATE SET total = notification_counts.total + EXCLUDED.total;
        ELSE
          INSERT INTO notification_counts (environment_id, shard, total)
            SELECT o.environment_id, pg_backend_pid() % 16, -count(*) FROM old_rows o
              WHERE EXISTS (SELECT 1 FROM environments e WHERE e.id = o.environment_id)
              GROUP BY o.environment_id ORDER BY o.environment_id
            ON CONFLICT (environment_id, shard) DO UPDATE SET total = notification_counts.total + EXCLUDED.total;
        END IF;
        RETURN NULL;
      END $$`);
    await knex.raw(`CREATE TRIGGER notifications_inserted AFTER INSERT ON notifications REFERENCING NEW TABLE AS new_rows
      FOR EACH STATEMENT EXECUTE FUNCTION notifications_counted()`);
    await knex.raw(`CREATE TRIGGER notifications_deleted AFTER DELETE ON notifications REFERENCING OLD TABLE AS old_rows
      FOR EACH STATEMENT EXECUTE FUNCTION notifications_counted()`);
  } else {
    await knex.raw(`CREATE TRIGGER notifications_inserted AFTER INSERT ON notifications BEGIN
      INSERT INTO notification_counts (environment_id, shard, total) VALUES (NEW.environment_id, 0, 1)
        ON CONFLICT (environment_id, shard) DO UPDATE SET total = total + 1;
    END`);
    await knex.raw(`CREATE TRIGGER notifications_deleted AFTER DELETE ON notifications BEGIN
      UPDATE notification_counts SET total = total - 1 WHERE environment_id = OLD.environment_id AND shard = 0;
    END`);
  }
  await knex.raw(`INSERT INTO notification_counts (environment_id, shard, total)
    SELECT environment_id, 0, count(*) FROM notifications GROUP BY environment_id`);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('DROP TRIGGER notifications_inserted' + (isPostgres(knex) ? ' ON notifications' : ''));
  await knex.raw('DROP TRIGGER notifications_deleted' + (isPostgres(knex) ? ' ON notifications' : ''));
  if (isPostgres(knex)) await knex.raw('DROP FUNCTION notifications_counted()');
  await knex.schema.dropTable('notification_counts');
}
