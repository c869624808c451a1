import type { Knex } from 'knex';
import { isPostgres } from '../dialect.js';

// GET /notifications filtered by one status, one channel or one workflow answers with the exact
// total of that filter. Counting it reads the filter's index, and a filter that most notifications
// pass (status=completed, a busy channel or workflow) reads most of the environment (bench/README.md,
// "Large data"). Those totals are kept instead, as migration 90 keeps the unfiltered one: one row per
// (environment, facet, value), changed by triggers in the transaction of every write that inserts,
// deletes or changes the status of notifications. A notification counts once for each channel it
// names, as the list's channel filter does.
//
// PostgreSQL: statement-level triggers add each statement's rows at once, into the shard of the
// connection (its backend pid), so no two transactions ever write the same counter row: nothing
// waits on a counter and nothing can deadlock over one, whatever order a transaction's statements
// touch statuses in. Deletes add their negative counts the same way, but only for environments
// still there (an environment being deleted takes its counters with it). The total is the sum of
// the shards; `foldEndedCountShards` (repos/notifications.ts) folds the shards of connections that
// have ended into shard 0. SQLite has one writer: shard 0 only, row-level triggers.
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('notification_facet_counts', (t) => {
    t.string('environment_id', 24).notNullable().references('environments.id').onDelete('CASCADE');
    t.string('facet', 16).notNullable();
    t.string('value', 100).notNullable();
    t.integer('shard').notNullable();
    t.bigInteger('total').notNullable();
    t.primary(['environment_id', 'facet', 'value', 'shard']);
  });
  if (isPostgres(knex)) {
    // Each row of `rows` (a transition table) as its facets, a channel once however often it is named.
    const facetsOf = (rows: string) => `SELECT environment_id, 'status' AS facet, status AS value FROM ${rows}
        UNION ALL SELECT environment_id, 'workflow', workflow_key FROM ${rows}
        UNION ALL SELECT r.environment_id, 'channel', c.value FROM ${rows} r
          CROSS JOIN LATERAL (SELECT DISTINCT value FROM json_array_elements_text(r.channels::json)) c`;
    const addInto = `ON CONFLICT (environment_id, facet, value, shard) DO UPDATE SET total = notification_facet_counts.total + EXCLUDED.total`;
    await knex.raw(`CREATE FUNCTION notification_facets_counted() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        IF TG_OP = 'INSERT' THEN
          INSERT INTO notification_facet_counts (environment_id, facet, value, shard, total)
            SELECT environment_id, facet, value, pg_backend_pid(), count(*) FROM (${facetsOf('new_rows')}) f
            GROUP BY environment_id, facet, value ORDER BY environment_id, facet, value
            ${addInto};
        ELSIF TG_OP = 'DELETE' THEN
          INSERT INTO notification_facet_counts (environment_id, facet, value, shard, total)
            SELECT environment_id, facet, value, pg_backend_pid(), -count(*) FROM (${facetsOf('old_rows')}) f
            WHERE EXISTS (SELECT 1 FROM environments e WHERE e.id = f.environment_id)
            GROUP BY environment_id, facet, value ORDER BY environment_id, facet, value
            ${addInto};
        ELSE
          INSERT INTO notification_facet_counts (environment_id, facet, value, shard, total)
            SELECT environment_id, 'status', value, pg_backend_pid(), sum(delta) FROM (
              SELECT o.environment_id, o.status AS value, -1 AS delta FROM old_rows o JOIN new_rows n ON n.id = o.id WHERE n.status <> o.status
              UNION ALL
              SELECT n.environment_id, n.status, 1 FROM old_rows o JOIN new_rows n ON n.id = o.id WHERE n.status <> o.status
            ) d
            GROUP BY environment_id, value HAVING sum(delta) <> 0 ORDER BY environment_id, value
            ${addInto};
        END IF;
        RETURN NULL;
      END $$`);
    await knex.raw(`CREATE TRIGGER notification_facets_inserted AFTER INSERT ON notifications REFERENCING NEW TABLE AS new_rows
      FOR EACH STATEMENT EXECUTE FUNCTION notification_facets_counted()`);
    await knex.raw(`CREATE TRIGGER notification_facets_deleted AFTER DELETE ON notifications REFERENCING OLD TABLE AS old_rows
      FOR EACH STATEMENT EXECUTE FUNCTION notification_facets_counted()`);
    // PostgreSQL allows no column list on a trigger with transition tables: it runs for every
    // UPDATE of notifications and counts only the rows whose status changed.
    await knex.raw(`CREATE TRIGGER notification_facets_updated AFTER UPDATE ON notifications REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
      FOR EACH STATEMENT EXECUTE FUNCTION notification_facets_counted()`);
    await knex.raw(`INSERT INTO notification_facet_counts (environment_id, facet, value, shard, total)
      SELECT environment_id, facet, value, 0, count(*) FROM (${facetsOf('notifications')}) f GROUP BY environment_id, facet, value`);
  } else {
    const addOne = `ON CONFLICT (environment_id, facet, value, shard) DO UPDATE SET total = total + 1`;
    await knex.raw(`CREATE TRIGGER notification_facets_inserted AFTER INSERT ON notifications BEGIN
      INSERT INTO notification_facet_counts (environment_id, facet, value, shard, total) VALUES (NEW.environment_id, 'status', NEW.status, 0, 1) ${addOne};
      INSERT INTO notification_facet_counts (environment_id, facet, value, shard, total) VALUES (NEW.environment_id, 'workflow', NEW.workflow_key, 0, 1) ${addOne};
      INSERT INTO notification_facet_counts (environment_id, facet, value, shard, total)
        SELECT DISTINCT NEW.environment_id, 'channel', value, 0, 1 FROM json_each(NEW.channels) WHERE true ${addOne};
    END`);
    await knex.raw(`CREATE TRIGGER notification_facets_deleted AFTER DELETE ON notifications BEGIN
      UPDATE notification_facet_counts SET total = total - 1
        WHERE environment_id = OLD.environment_id AND shard = 0 AND (
          (facet = 'status' AND value = OLD.status) OR (facet = 'workflow' AND value = OLD.workflow_key)
          OR (facet = 'channel' AND value IN (SELECT value FROM json_each(OLD.channels))));
    END`);
    await knex.raw(`CREATE TRIGGER notification_facets_updated AFTER UPDATE OF status ON notifications WHEN NEW.status <> OLD.status BEGIN
      UPDATE notification_facet_counts SET total = total - 1 WHERE environment_id = OLD.environment_id AND facet = 'status' AND value = OLD.status AND shard = 0;
      INSERT INTO notification_facet_counts (environment_id, facet, value, shard, total) VALUES (NEW.environment_id, 'status', NEW.status, 0, 1) ${addOne};
    END`);
    await knex.raw(`INSERT INTO notification_facet_counts (environment_id, facet, value, shard, total)
      SELECT environment_id, 'status', status, 0, count(*) FROM notifications GROUP BY environment_id, status
      UNION ALL SELECT environment_id, 'workflow', workflow_key, 0, count(*) FROM notifications GROUP BY environment_id, workflow_key
      UNION ALL SELECT environment_id, 'channel', value, 0, count(*) FROM (SELECT DISTINCT n.id, n.environment_id, c.value FROM notifications n, json_each(n.channels) c)
        GROUP BY environment_id, value`);
  }
}

export async function down(knex: Knex): Promise<void> {
  const on = isPostgres(knex) ? ' ON notifications' : '';
  for (const name of ['inserted', 'deleted', 'updated']) await knex.raw(`DROP TRIGGER notification_facets_${name}${on}`);
  if (isPostgres(knex)) await knex.raw('DROP FUNCTION notification_facets_counted()');
  await knex.schema.dropTable('notification_facet_counts');
}
