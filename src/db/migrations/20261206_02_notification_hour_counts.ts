import type { Knex } from 'knex';
import { isPostgres } from '../dialect.js';

// GET /notifications/stats answers how many notifications the last 7 and 30 days made. Counting
// them read up to a month of the environment's rows (bench/README.md, "Large data"). Each hour's
// count is kept instead (its hour: the first 13 characters of `created_at`, 'YYYY-MM-DDTHH'), by
// triggers in the same transactions and with the same sharding as migration 20261127_02's totals:
// stats sums the whole hours after its window's start and counts only the rows of the hour it
// starts in. A table of their own, not rows of notification_facet_counts: a notification deleted
// there updates its facets through a read of every facet row of its environment, and a month of
// hours would be 720 more of them.
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('notification_hour_counts', (t) => {
    t.string('environment_id', 24).notNullable().references('environments.id').onDelete('CASCADE');
    t.string('hour', 13).notNullable();
    t.integer('shard').notNullable();
    t.bigInteger('total').notNullable();
    t.primary(['environment_id', 'hour', 'shard']);
  });
  if (isPostgres(knex)) {
    const addInto = `ON CONFLICT (environment_id, hour, shard) DO UPDATE SET total = notification_hour_counts.total + EXCLUDED.total`;
    await knex.raw(`CREATE FUNCTION notification_hours_counted() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        IF TG_OP = 'INSERT' THEN
          INSERT INTO notification_hour_counts (environment_id, hour, shard, total)
            SELECT environment_id, substr(created_at, 1, 13), pg_backend_pid(), count(*) FROM new_rows
            GROUP BY 1, 2 ORDER BY 1, 2
            ${addInto};
        ELSE
          INSERT INTO notification_hour_counts (environment_id, hour, shard, total)
            SELECT environment_id, substr(created_at, 1, 13), pg_backend_pid(), -count(*) FROM old_rows o
            WHERE EXISTS (SELECT 1 FROM environments e WHERE e.id = o.environment_id)
            GROUP BY 1, 2 ORDER BY 1, 2
            ${addInto};
        END IF;
        RETURN NULL;
      END $$`);
    await knex.raw(`CREATE TRIGGER notification_hours_inserted AFTER INSERT ON notifications REFERENCING NEW TABLE AS new_rows
      FOR EACH STATEMENT EXECUTE FUNCTION notification_hours_counted()`);
    await knex.raw(`CREATE TRIGGER notification_hours_deleted AFTER DELETE ON notifications REFERENCING OLD TABLE AS old_rows
      FOR EACH STATEMENT EXECUTE FUNCTION notification_hours_counted()`);
  } else {
    await knex.raw(`CREATE TRIGGER notification_hours_inserted AFTER INSERT ON notifications BEGIN
      INSERT INTO notification_hour_counts (environment_id, hour, shard, total) VALUES (NEW.environment_id, substr(NEW.created_at, 1, 13), 0, 1)
        ON CONFLICT (environment_id, hour, shard) DO UPDATE SET total = total + 1;
    END`);
    await knex.raw(`CREATE TRIGGER notification_hours_deleted AFTER DELETE ON notifications BEGIN
      UPDATE notification_hour_counts SET total = total - 1 WHERE environment_id = OLD.environment_id AND hour = substr(OLD.created_at, 1, 13) AND shard = 0;
    END`);
  }
  await knex.raw(`INSERT INTO notification_hour_counts (environment_id, hour, shard, total)
    SELECT environment_id, substr(created_at, 1, 13), 0, count(*) FROM notifications GROUP BY 1, 2`);
}

export async function down(knex: Knex): Promise<void> {
  const on = isPostgres(knex) ? ' ON notifications' : '';
  for (const name of ['inserted', 'deleted']) await knex.raw(`DROP TRIGGER notification_hours_${name}${on}`);
  if (isPostgres(knex)) await knex.raw('DROP FUNCTION notification_hours_counted()');
  await knex.schema.dropTable('notification_hour_counts');
}
