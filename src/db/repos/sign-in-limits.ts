import type { Db } from '../knex.js';

const TABLE = 'dashboard_sign_in_limits';

/**
 * Counts one more hit for `key` in a fixed window, atomically (one upsert, so two processes
 * counting at once both count): a key whose window has ended starts again at 1.
 */
export async function countSignInHit(db: Db, key: string, now: Date, windowMs: number): Promise<{ hits: number; resetAt: Date }> {
  const nowIso = now.toISOString();
  const resetAt = new Date(now.getTime() + windowMs).toISOString();
  // Windows that ended are of no use; the table stays as small as the set of recent failures.
  await db(TABLE).where('reset_at', '<=', nowIso).delete();
  const [row] = await db(TABLE)
    .insert({ key, hits: 1, reset_at: resetAt })
    .onConflict('key')
    .merge({
      hits: db.raw(`CASE WHEN ${TABLE}.reset_at <= ? THEN 1 ELSE ${TABLE}.hits + 1 END`, [nowIso]),
      reset_at: db.raw(`CASE WHEN ${TABLE}.reset_at <= ? THEN ? ELSE ${TABLE}.reset_at END`, [nowIso, resetAt]),
    })
    .returning(['hits', 'reset_at']);
  return { hits: Number(row.hits), resetAt: new Date(row.reset_at) };
}

export async function uncountSignInHit(db: Db, key: string): Promise<void> {
  await db(TABLE).where({ key }).where('hits', '>', 0).decrement('hits', 1);
}

export async function forgetSignInHits(db: Db, key: string): Promise<void> {
  await db(TABLE).where({ key }).delete();
}
