// Send turns: the table `send_turns`, one row per pacing window (an integration's or a destination's
// limit, a webhook endpoint's rate). Each window is a token bucket stored as one time, `next_at`
// (epoch ms, to the microsecond): when the bucket would next be full (the generic cell rate form).
// A send of cost c takes c × interval from it; it may go once the bucket holds that much, which is
// when `next_at + c × interval − window ≤ now`.
import { createHash } from 'node:crypto';
import { changeRows, isPostgres, selectRows, type Db, type Runner } from '../knex.js';
import { writeTransaction } from '../group-commit.js';

export interface TurnWindow {
  /** What the window counts (an integration, or one destination of it) and its limit, as text. */
  scope: string;
  /** Sends allowed in the window. */
  limit: number;
  windowMs: number;
}

/** A time to the microsecond: an interval's fraction of a millisecond is kept, float noise is not. */
function toMicros(ms: number): number {
  return Math.round(ms * 1000) / 1000;
}

/** The stored key of a window: its scope and its limit, so that a changed limit starts afresh. */
function keyOf(window: TurnWindow): string {
  return createHash('sha256').update(`${window.scope}\n${window.limit}/${window.windowMs}`).digest('hex');
}

/**
 * Reserves the earliest time at or after `now` at which a send of `cost` fits every window, and
 * takes it: later reservations queue behind it. Returns that time (epoch ms). Locked per window
 * row (PostgreSQL: FOR UPDATE, in key order; SQLite: one writer), so two workers never take the
 * same turn. A cost above a window's limit waits for the bucket to be full, then goes. A turn more
 * than `aheadMs` after `now` is not taken: its time is answered and nothing is written.
 */
export async function reserveTurn(db: Db, windows: readonly TurnWindow[], cost: number, now: number, aheadMs = Infinity): Promise<number> {
  if (windows.length === 0) return now;
  const keyed = windows.map((window) => ({ ...window, key: keyOf(window), intervalMs: window.windowMs / window.limit })).sort((a, b) => (a.key < b.key ? -1 : 1));
  return writeTransaction(db, async (trx) => {
    const keys = keyed.map((w) => w.key);
    const marks = keys.map(() => '?').join(', ');
    if (isPostgres(trx)) {
      // The rows must exist to be locked.
      await changeRows(trx, `INSERT INTO send_turns (key, next_at) VALUES ${keys.map(() => '(?, 0)').join(', ')} ON CONFLICT (key) DO NOTHING`, keys);
    }
    const lock = isPostgres(trx) ? ' ORDER BY key FOR UPDATE' : '';
    const rows = await selectRows<{ key: string; next_at: string | number }>(trx, `SELECT key, next_at FROM send_turns WHERE key IN (${marks})${lock}`, keys);
    const nextAt = new Map(rows.map((row) => [row.key, Number(row.next_at)]));
    let at = now;
    for (const w of keyed) {
      const full = nextAt.get(w.key) ?? 0;
      at = Math.max(at, full + Math.min(cost * w.intervalMs, w.windowMs) - w.windowMs);
    }
    at = toMicros(at);
    if (at - now > aheadMs) return Math.ceil(at);
    for (const w of keyed) {
      const next = toMicros(Math.max(nextAt.get(w.key) ?? 0, at) + cost * w.intervalMs);
      await changeRows(trx, 'INSERT INTO send_turns (key, next_at) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET next_at = excluded.next_at', [w.key, next]);
    }
    return Math.ceil(at);
  });
}

/** Forgets the windows whose buckets have been full since before `before`: a full bucket is the same as none. */
export async function forgetFullWindows(db: Runner, before: number): Promise<void> {
  await db('send_turns').where('next_at', '<', before).delete();
}
