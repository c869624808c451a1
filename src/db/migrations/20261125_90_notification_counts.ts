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
// one row and a transaction that inserts only ever holds its own shard (no deadlock between two);
// deletes (retention) subtract from the environment's first shard. The total is their sum. SQLite
// has one writer: one row per environment (shard 0), a row-level trigger.
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
          -- Subtracted from a shard the environment has (one exists since its first insert), and
          -- never inserted: when the environment itself is being deleted, its rows go with it.
          UPDATE notification_counts c SET total = c.total - d.n
            FROM (SELECT environment_id, count(*) AS n FROM old_rows GROUP BY environment_id) d
            WHERE c.environment_id = d.environment_id
              AND c.shard = (SELECT min(shard) FROM notification_counts m WHERE m.environment_id = d.environment_id);
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
