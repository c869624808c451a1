// Throttle windows: the table `throttle_windows`, one row per throttle key (throttle.ts).
import { selectRows, type Transaction } from '../knex.js';

export interface ThrottleHit {
  /** The throttle key: which step, subscriber and key value the count is for. */
  key: string;
  environmentId: string;
  /** When a window opened by this hit would end. */
  windowEndsAt: Date;
}

/** A window after a hit: how many hits it has counted, this one included, and when it ends. */
export interface ThrottleWindow {
  hits: number;
  endsAt: string;
}

/**
 * Counts one hit in one statement: it opens a window (one hit, ending at `hit.windowEndsAt`) when
 * the key has none or its window has ended by `now`, and otherwise adds one to the open window.
 * The upsert takes the row's lock (PostgreSQL) or the database's (SQLite), so hits from any number
 * of workers are counted exactly once each.
 */
export async function countThrottleHit(trx: Transaction, hit: ThrottleHit, now: Date): Promise<ThrottleWindow> {
  const current = now.toISOString();
  const [row] = await selectRows<{ hits: number | string; window_ends_at: string }>(
    trx,
    `INSERT INTO throttle_windows AS w (key, environment_id, hits, window_ends_at) VALUES (?, ?, 1, ?)
     ON CONFLICT (key) DO UPDATE SET
       hits = CASE WHEN w.window_ends_at <= ? THEN 1 ELSE w.hits + 1 END,
       window_ends_at = CASE WHEN w.window_ends_at <= ? THEN excluded.window_ends_at ELSE w.window_ends_at END
     RETURNING hits, window_ends_at`,
    [hit.key, hit.environmentId, hit.windowEndsAt.toISOString(), current, current],
  );
  return { hits: Number(row.hits), endsAt: row.window_ends_at };
}
