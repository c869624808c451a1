import type { RequestHandler } from 'express';
import type { Db } from '../db/knex.js';
import type { Deps } from '../deps.js';
import { findKeyOwner, type KeyOwner } from '../db/repos/accounts.js';
import { cachedKeyOwner } from '../db/key-owner-cache.js';
import { hashApiKey, sameDigest } from '../api-keys.js';
import type { Auth } from '../contract.js';
import type { Plan } from '../config.js';

export type Scheme = 'bearer' | 'apikey';

/** The outcome of reading the Authorization header, kept on `res.locals.authentication`. */
export type Authentication =
  | { ok: true; scheme: Scheme; auth: Auth; plan: KeyPlan }
  | { ok: false; scheme?: Scheme; reason: string };

/** The plan of the key's organization, read with the key, so rate limits cost no query of their own. */
export interface KeyPlan {
  plan: Plan;
  /** Enterprise only: the organization's own numbers; both null means no limit. */
  ratePerMinute: number | null;
  burst: number | null;
}

const SCHEMES: Record<string, Scheme> = { bearer: 'bearer', apikey: 'apikey' };

export async function authenticate(
  db: Db,
  header: string | undefined,
  keyCache: { ttlMs: number; now: number } = { ttlMs: 0, now: 0 },
): Promise<Authentication> {
  if (!header) return { ok: false, reason: 'Missing API key: send the header "Authorization: Bearer <key>"' };
  const match = /^(\S+)\s+(\S+)\s*$/.exec(header);
  const scheme = match && SCHEMES[match[1].toLowerCase()];
  if (!match || !scheme) {
    return { ok: false, reason: 'Malformed Authorization header: expected "Bearer <key>" or "ApiKey <key>"' };
  }
  const digest = hashApiKey(match[2]);
  const owner = await cachedKeyOwner(db, digest, keyCache.ttlMs, findMatchingKeyOwner, keyCache.now);
  if (!owner) return { ok: false, scheme, reason: 'Invalid API key' };
  if (owner.revoked) return { ok: false, scheme, reason: 'This API key has been revoked' };
  return {
    ok: true,
    scheme,
    auth: { organizationId: owner.organizationId, environmentId: owner.environmentId },
    plan: { plan: owner.plan, ratePerMinute: owner.ratePerMinute, burst: owner.burst },
  };
}

/**
 * The owner of the key with this digest, its stored digest compared in constant time once more (a
 * remembered owner was compared when it was read, and the cache is keyed by the exact digest).
 */
async function findMatchingKeyOwner(db: Db, digest: string): Promise<KeyOwner | undefined> {
  const owner = await findKeyOwner(db, digest);
  return owner && sameDigest(owner.keyHash, digest) ? owner : undefined;
}

/**
 * Reads the key once per request, before routing, so that later layers (the rate limit, the
 * contract's security handlers) can use it. It rejects nothing itself: the request is authorized,
 * or refused with a 401, in one place, the security handlers of api.ts. Owners are remembered for
 * HERALD_KEY_CACHE_MS (key-owner-cache.ts).
 */
export function authentication({ db, clock, config }: Deps): RequestHandler {
  return (req, res, next) => {
    authenticate(db, req.headers.authorization, { ttlMs: config.keyCacheMs, now: clock.now().getTime() }).then((result) => {
      res.locals.authentication = result;
      next();
    }, next);
  };
}
