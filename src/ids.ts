import { randomBytes } from 'node:crypto';

/**
 * A 24-hex-digit id: 12 digits of milliseconds since the epoch, then 12 random ones. Ids sort by
 * creation time, which keeps list order stable and index inserts append-only.
 */
export function newId(now: number = Date.now()): string {
  return now.toString(16).padStart(12, '0').slice(-12) + randomBytes(6).toString('hex');
}
