import type { Knex } from 'knex';
import { isPostgres } from '../dialect.js';

// A window's interval may be under a millisecond (a webhook endpoint allows up to 10,000 a second):
// `send_turns.next_at` keeps its fraction, or every turn would be rounded up to a whole
// millisecond and a window would hand out at most 1,000 a second. SQLite's INTEGER affinity already
// keeps a value that is not a whole number as REAL; PostgreSQL's bigint would refuse it.
export async function up(knex: Knex): Promise<void> {
  if (isPostgres(knex)) await knex.raw('ALTER TABLE send_turns ALTER COLUMN next_at TYPE double precision');
}

export async function down(knex: Knex): Promise<void> {
  if (isPostgres(knex)) await knex.raw('ALTER TABLE send_turns ALTER COLUMN next_at TYPE bigint USING ceil(next_at)');
}
