import type { Db } from './knex.js';
import { BoundedMap } from '../bounded-map.js';

/** Keys remembered per database; unknown keys count too, so that a flood of random keys stays bounded. */
const MAX_ENTRIES = 10_000;

interface Entry {
  owner: unknown;
  expiresAt: number;
}

/**
 * Each database's remembered answers, and how many times they were forgotten: a read that began
 * before a forgetting (a key revoked meanwhile) must not store what it read after it.
 */
const caches = new WeakMap<Db, { entries: BoundedMap<string, Entry>; generation: number }>();

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
  let cache = caches.get(db);
  if (!cache) caches.set(db, (cache = { entries: new BoundedMap(MAX_ENTRIES), generation: 0 }));
  const hit = cache.entries.get(keyHash);
  if (hit && hit.expiresAt > now) return hit.owner as Owner | undefined;
  const generation = cache.generation;
  const owner = await read(db, keyHash);
  if (cache.generation === generation) cache.entries.set(keyHash, { owner, expiresAt: now + ttlMs });
  return owner;
}

/** After a change to keys or plans: every process-local answer is read again. */
export function forgetKeyOwners(db: Db): void {
  const cache = caches.get(db);
  if (!cache) return;
  cache.entries.clear();
  cache.generation += 1;
}
