import type { Db } from './knex.js';
import { boundedMapsBy } from '../bounded-map.js';

/** Keys remembered per database; unknown keys count too, so that a flood of random keys stays bounded. */
const MAX_ENTRIES = 10_000;

interface Entry {
  owner: unknown;
  expiresAt: number;
}

const cacheOf = boundedMapsBy<Db, string, Entry>(MAX_ENTRIES);

/**
 * The key's owner (or undefined), read from the database at most once per `ttlMs` per key.
 *
 * Every request reads its key: remembering the answer for a few seconds saves a three-table join
 * on each. A key revoked or a plan changed through this process (`forgetKeyOwners`) counts at once;
 * through another process, within `ttlMs`. A `ttlMs` of 0 reads the database every time.
 */
export async function cachedKeyOwner<Owner>(
  db: Db,
  keyHash: string,
  ttlMs: number,
  read: (db: Db, keyHash: string) => Promise<Owner | undefined>,
  now: number,
): Promise<Owner | undefined> {
  if (ttlMs <= 0) return read(db, keyHash);
  const cache = cacheOf(db);
  const hit = cache.get(keyHash);
  if (hit && hit.expiresAt > now) return hit.owner as Owner | undefined;
  const clears = cache.clears;
  const owner = await read(db, keyHash);
  // Not kept when a key was revoked (forgetKeyOwners) while it was read.
  if (cache.clears === clears) cache.set(keyHash, { owner, expiresAt: now + ttlMs });
  return owner;
}

/** After a change to keys or plans: every process-local answer is read again. */
export function forgetKeyOwners(db: Db): void {
  cacheOf(db).clear();
}
