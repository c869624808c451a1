import type { Knex } from 'knex';
import { isPostgres } from '../dialect.js';

// SQLite: a notification deleted took its facets' totals down (migration 20261127_02) with one
// UPDATE whose OR of three conditions SQLite answers by reading every total of the environment, one
// per status, workflow and channel it has used: an environment with hundreds of workflows read them
// all for every notification retention deleted. Three updates, each by its total's whole key,
// instead. PostgreSQL's statement-level trigger counts a statement's rows together and stays.
const minusOne = `UPDATE notification_facet_counts SET total = total - 1 WHERE environment_id = OLD.environment_id AND shard = 0`;

export async function up(knex: Knex): Promise<void> {
  if (isPostgres(knex)) return;
  await knex.raw('DROP TRIGGER notification_facets_deleted');
  await knex.raw(`CREATE TRIGGER notification_facets_deleted AFTER DELETE ON notifications BEGIN
      ${minusOne} AND facet = 'status' AND value = OLD.status;
      ${minusOne} AND facet = 'workflow' AND value = OLD.workflow_key;
      ${minusOne} AND facet = 'channel' AND value IN (SELECT value FROM json_each(OLD.channels));
    END`);
}

export async function down(knex: Knex): Promise<void> {
  if (isPostgres(knex)) return;
  await knex.raw('DROP TRIGGER notification_facets_deleted');
  await knex.raw(`CREATE TRIGGER notification_facets_deleted AFTER DELETE ON notifications BEGIN
      ${minusOne} AND (
        (facet = 'status' AND value = OLD.status) OR (facet = 'workflow' AND value = OLD.workflow_key)
        OR (facet = 'channel' AND value IN (SELECT value FROM json_each(OLD.channels))));
    END`);
}
