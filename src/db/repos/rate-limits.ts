// Rate-limit buckets: the table `rate_limit_buckets`, one row per bucket key. Only a database that
// several API processes share needs it: on SQLite (one process) buckets live in the process and
// this table is not used (bucketsInDatabase).
import { isPostgres, type Db } from '../knex.js';

/**
 * One token is 60,000 units, so a rate of N tokens per minute is exactly N units per millisecond
 * and every step of the bucket arithmetic is integer arithmetic: no rounding drift, in the process
 * or in the database.
 */
export const UNITS_PER_TOKEN = 60_000;

/** A bucket as stored: its units and the milliseconds since the epoch of its last refill. */
export interface StoredBucket {
  units: number;
  refilledAt: number;
}

/** A bucket's policy as the statements need it. */
export interface BucketPolicy {
  ratePerMinute: number;
  burst: number;
}

/** Whether buckets must live in the database: on PostgreSQL every API process shares them. */
export function bucketsInDatabase(db: Db): boolean {
  return isPostgres(db);
}

/**
 * Takes a token from the bucket `key` in one statement (PostgreSQL). The upsert takes it under the
 * row's lock, from the latest committed version of the row, so two processes never both spend the
 * last token; a new bucket starts full less the token taken. An empty bucket is not written to;
 * its state is read back (same statement): `allowed` false with what is stored, or no row at all
 * when another process created it after this statement's snapshot.
 */
export async function takeToken(db: Db, key: string, policy: BucketPolicy, now: number): Promise<{ allowed: boolean; bucket?: StoredBucket }> {
  const capacity = policy.burst * UNITS_PER_TOKEN;
  // EXCLUDED carries this request's policy and time into the update. The refilled level
  // appears twice (the new value and the condition); it is the same expression.
  const refilled = `LEAST(CAST(EXCLUDED.burst AS bigint) * ${UNITS_PER_TOKEN},
    b.token_units + GREATEST(0, EXCLUDED.refilled_at - b.refilled_at) * EXCLUDED.rate_per_minute)`;
  const { rows } = await db.raw(
    `WITH taken AS (
       INSERT INTO rate_limit_buckets AS b (key, token_units, refilled_at, rate_per_minute, burst)
       VALUES (?, ?, ?, ?, ?)
       ON CONFLICT (key) DO UPDATE SET
         token_units = ${refilled} - ${UNITS_PER_TOKEN},
         refilled_at = GREATEST(b.refilled_at, EXCLUDED.refilled_at),
         rate_per_minute = EXCLUDED.rate_per_minute,
         burst = EXCLUDED.burst
       WHERE ${refilled} >= ${UNITS_PER_TOKEN}
       RETURNING token_units, refilled_at
     )
     SELECT true AS allowed, token_units, refilled_at FROM taken
     UNION ALL
     SELECT false AS allowed, token_units, refilled_at FROM rate_limit_buckets
      WHERE key = ? AND NOT EXISTS (SELECT 1 FROM taken)`,
    [key, capacity - UNITS_PER_TOKEN, now, policy.ratePerMinute, policy.burst, key],
  );
  const row = rows[0] as { allowed: boolean; token_units: number; refilled_at: number } | undefined;
  if (!row) return { allowed: false };
  return { allowed: Boolean(row.allowed), bucket: { units: Number(row.token_units), refilledAt: Number(row.refilled_at) } };
}

/** The stored bucket `key`, not refilled. */
export async function findBucket(db: Db, key: string): Promise<StoredBucket | undefined> {
  const row = await db('rate_limit_buckets').where({ key }).first('token_units', 'refilled_at');
  return row && { units: Number(row.token_units), refilledAt: Number(row.refilled_at) };
}

/** Gives one token back to the bucket `key`, never above its burst. */
export async function giveTokenBack(db: Db, key: string): Promise<void> {
  await db('rate_limit_buckets')
    .where({ key })
    .update({ token_units: db.raw(`LEAST(CAST(burst AS bigint) * ${UNITS_PER_TOKEN}, token_units + ${UNITS_PER_TOKEN})`) });
}

export async function deleteBucket(db: Db, key: string): Promise<void> {
  await db('rate_limit_buckets').where({ key }).delete();
}

/** Deletes the buckets that are full at `now`: a full bucket is the same as none. */
export async function deleteFullBuckets(db: Db, now: number): Promise<void> {
  await db.raw(
    `DELETE FROM rate_limit_buckets
      WHERE token_units + GREATEST(0, ? - refilled_at) * rate_per_minute >= CAST(burst AS bigint) * ${UNITS_PER_TOKEN}`,
    [now],
  );
}
