import type { RequestHandler } from 'express';
import type { Db } from '../db/knex.js';
import type { Deps } from '../deps.js';
import { findKeyOwner, type KeyOwner } from '../db/repos/accounts.js';
import { cachedKeyOwner } from '../db/key-owner-cache.js';
import { hashApiKey, sameDigest } from '../api-keys.js';
import type { Auth } from '../contract.js';
import type { Plan } from '../config.js';
import { looksLikeJwt, takeStreamTicket, verifySubscriberToken, type InboxPrincipal } from '../engine/inbox-tokens.js';

/** `subscriber`: a subscriber token in the header; `ticket`: a stream ticket in the URL (inbox only). */
export type Scheme = 'bearer' | 'apikey' | 'subscriber' | 'ticket';

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

/**
 * Who `header` authenticates: an API key's owner (remembered for `keyCacheMs`, none by default) or
 * a subscriber token's subject, checked at `now` (the wall clock by default).
 */
export async function authenticate(
  db: Db,
  header: string | undefined,
  options: { now?: Date; keyCacheMs?: number; sealKey?: string } = {},
): Promise<Authentication> {
  const now = options.now ?? new Date();
  if (!header) return { ok: false, reason: 'Missing API key: send the header "Authorization: Bearer <key>"' };
  const match = /^(\S+)\s+(\S+)\s*$/.exec(header);
  const scheme = match && SCHEMES[match[1].toLowerCase()];
  if (!match || !scheme) {
    return { ok: false, reason: 'Malformed Authorization header: expected "Bearer <key>" or "ApiKey <key>"' };
  }
  if (scheme === 'bearer' && looksLikeJwt(match[2])) {
    const verified = await verifySubscriberToken(db, match[2], options.sealKey, now);
    return verified.ok ? principalAuthentication('subscriber', verified.principal) : { ok: false, scheme: 'subscriber', reason: verified.reason };
  }
  const digest = hashApiKey(match[2]);
  const owner = await cachedKeyOwner(db, digest, options.keyCacheMs ?? 0, findMatchingKeyOwner, now.getTime());
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

function principalAuthentication(scheme: 'subscriber' | 'ticket', principal: InboxPrincipal): Authentication {
  return {
    ok: true,
    scheme,
    auth: { organizationId: principal.organizationId, environmentId: principal.environmentId, subscriberId: principal.subscriberId, credential: principal.credential },
    plan: { plan: principal.plan, ratePerMinute: principal.ratePerMinute, burst: principal.burst },
  };
}

/** Query parameters a long-lived credential must never travel in (it would land in logs and histories). */
const CREDENTIALS_IN_URL = ['token', 'access_token', 'subscriberToken', 'apiKey', 'api_key', 'authorization'];

/**
 * The inbox stream's other door, for browsers' EventSource (which sends no header): a single-use
 * ticket as `?ticket=`, taken here (so it works once, in any process). A subscriber token or key
 * in the URL opens nothing.
 */
async function urlAuthentication(db: Db, query: Record<string, unknown>, now: Date): Promise<Authentication | undefined> {
  if (CREDENTIALS_IN_URL.some((name) => query[name] !== undefined)) {
    return { ok: false, scheme: 'ticket', reason: 'A credential in the URL is refused: send the subscriber token in the Authorization header, or use a ticket from POST /v1/inbox/events/tickets' };
  }
  const ticket = query.ticket;
  if (ticket === undefined) return undefined;
  if (typeof ticket !== 'string' || looksLikeJwt(ticket) || !ticket.startsWith('tk_')) {
    return { ok: false, scheme: 'ticket', reason: 'A credential in the URL is refused: ?ticket= takes only a ticket from POST /v1/inbox/events/tickets' };
  }
  const principal = await takeStreamTicket(db, ticket, now);
  return principal ? principalAuthentication('ticket', principal) : { ok: false, scheme: 'ticket', reason: 'The ticket is unknown, expired or already used' };
}

/**
 * Reads the key once per request, before routing, so that later layers (the rate limit, the
 * contract's security handlers) can use it. It rejects nothing itself: the request is authorized,
 * or refused with a 401, in one place, the security handlers of api.ts. Owners are remembered for
 * HERALD_KEY_CACHE_MS (key-owner-cache.ts). A bearer credential shaped like a JWT is a subscriber
 * token (engine/inbox-tokens.ts); the inbox stream may instead carry a ticket in its URL.
 */
export function authentication({ db, clock, config }: Deps): RequestHandler {
  return (req, res, next) => {
    const now = clock.now();
    const fromUrl = !req.headers.authorization && req.method === 'GET' && req.path === '/inbox/events' ? urlAuthentication(db, req.query as Record<string, unknown>, now) : undefined;
    Promise.resolve(fromUrl)
      .then((result) => result ?? authenticate(db, req.headers.authorization, { now, keyCacheMs: config.keyCacheMs, sealKey: config.secret }))
      .then((result) => {
        res.locals.authentication = result;
        next();
      }, next);
  };
}
