import type { Knex } from 'knex';
import { isPostgres } from '../dialect.js';

// GET /notifications/stats answers how many notifications the last 7 and 30 days made. Counting
// them read up to a month of the environment's rows (bench/README.md, "Large data"). Each hour's
// count is kept instead, beside the other kept totals (facet 'hour', its value the hour of
// `created_at`, 'YYYY-MM-DDTHH'), by triggers of their own in the same transactions and with the
// same sharding as migration 20261127_02's: stats sums the whole hours after its window's start and
// counts only the rows of the hour it starts in.
export async function up(knex: Knex): Promise<void> {
  if (isPostgres(knex)) {
    const addInto = `ON CONFLICT (environment_id, facet, value, shard) DO UPDATE SET total = notification_facet_counts.total + EXCLUDED.total`;
    await knex.raw(`CREATE FUNCTION notification_hours_counted() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        IF TG_OP = 'INSERT' THEN
          INSERT INTO notification_facet_counts (environment_id, facet, value, shard, total)
            SELECT environment_id, 'hour', substr(created_at, 1, 13), pg_backend_pid(), count(*) FROM new_rows
            GROUP BY 1, 3 ORDER BY 1, 3
            ${addInto};
        ELSE
          INSERT INTO notification_facet_counts (environment_id, facet, value, shard, total)
            SELECT environment_id, 'hour', substr(created_at, 1, 13), pg_backend_pid(), -count(*) FROM old_rows o
            WHERE EXISTS (SELECT 1 FROM environments e WHERE e.id = o.environment_id)
            GROUP BY 1, 3 ORDER BY 1, 3
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
      INSERT INTO notification_facet_counts (environment_id, facet, value, shard, total) VALUES (NEW.environment_id, 'hour', substr(NEW.created_at, 1, 13), 0, 1)
        ON CONFLICT (environment_id, facet, value, shard) DO UPDATE SET total = total + 1;
    END`);
    await knex.raw(`CREATE TRIGGER notification_hours_deleted AFTER DELETE ON notifications BEGIN
      UPDATE notification_facet_counts SET total = total - 1
        WHERE environment_id = OLD.environment_id AND facet = 'hour' AND value = substr(OLD.created_at, 1, 13) AND shard = 0;
    END`);
  }
  await knex.raw(`INSERT INTO notification_facet_counts (environment_id, facet, value, shard, total)
    SELECT environment_id, 'hour', substr(created_at, 1, 13), 0, count(*) FROM notifications GROUP BY 1, 3`);
}

export async function down(knex: Knex): Promise<void> {
  const on = isPostgres(knex) ? ' ON notifications' : '';
  for (const name of ['inserted', 'deleted']) await knex.raw(`DROP TRIGGER notification_hours_${name}${on}`);
  if (isPostgres(knex)) await knex.raw('DROP FUNCTION notification_hours_counted()');
  await knex.raw(`DELETE FROM notification_facet_counts WHERE facet = 'hour'`);
}
