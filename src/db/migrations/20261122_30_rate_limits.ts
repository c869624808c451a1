import type { Knex } from 'knex';

// Token buckets of the plan rate limits, one row per environment (`env:<id>`) or client address
// (`ip:<address>`, requests without a valid key). Only used on PostgreSQL, where several API
// processes must share one budget; a single SQLite process keeps its buckets in memory.
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('rate_limit_buckets', (t) => {
    t.string('key', 128).primary();
    // Tokens × 60,000: a plan's rate per minute is then exactly its refill per millisecond, and
    // the arithmetic stays in integers.
    t.bigInteger('token_units').notNullable();
    // Milliseconds since the epoch of the last refill.
    t.bigInteger('refilled_at').notNullable();
    // The policy the row was last written under: it tells which buckets are full (and can go).
    t.integer('rate_per_minute').notNullable();
    t.integer('burst').notNullable();
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('rate_limit_buckets');
}
