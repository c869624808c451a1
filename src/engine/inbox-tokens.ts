// Who may open an inbox: subscriber tokens (JWTs, HS256, signed with one of the environment's
// inbox signing secrets, whose id is the token's `kid`), stream tickets, and the origins a browser
// may call from. Secrets are sealed at rest like credentials (crypto.ts); an environment keeps at
// most two, so a backend can move to a new one while tokens signed with the old still work.
import { createHash, randomBytes } from 'node:crypto';
import { SignJWT, jwtVerify, decodeProtectedHeader, errors as joseErrors } from 'jose';
import { badRequest } from '../errors.js';
import type { Deps } from '../deps.js';
import type { Db } from '../db/knex.js';
import { writeTransaction } from '../db/group-commit.js';
import * as repo from '../db/repos/inbox-access.js';
import { open } from '../crypto.js';
import * as secrets from '../db/inbox-secrets.js';
import type { SigningSecret } from '../db/inbox-secrets.js';
import { existingSubscriberKey } from './subscribers.js';
import type { Plan } from '../config.js';
import type { InboxCredential } from '../contract.js';
import { boundedMapsBy } from '../bounded-map.js';

/** The `aud` every subscriber token carries. */
export const INBOX_AUDIENCE = 'herald-inbox';
/** The longest a subscriber token may live. */
export const MAX_TOKEN_SECONDS = 24 * 60 * 60;
export const DEFAULT_TOKEN_SECONDS = 60 * 60;
/**
 * A signer's clock may run this far ahead of Herald's (`iat`, `nbf`). Not `exp`: a token Herald
 * mints says when it expires by Herald's clock, and it must end then, not a minute later.
 */
const CLOCK_TOLERANCE_SECONDS = 60;
/** How long a stream ticket lasts. */
export const TICKET_SECONDS = 60;
/** How long a verifying process remembers a secret: a retired one stops working within this. */
const SECRET_CACHE_MS = 5_000;

/** Who a verified token or ticket speaks for, with what credential, and the plan its rate limit follows. */
export interface InboxPrincipal {
  organizationId: string;
  environmentId: string;
  subscriberId: string;
  /** Undefined only for a ticket made before tickets kept it. */
  credential?: InboxCredential;
  plan: Plan;
  ratePerMinute: number | null;
  burst: number | null;
}

/** The environment's live signing secrets, newest first (db/inbox-secrets.ts). */
export async function signingSecrets(deps: Deps, environmentId: string): Promise<SigningSecret[]> {
  return secrets.signingSecrets(deps.db, environmentId, deps.config.secret, deps.clock.now());
}

/** Adds a secret, which signs from now on; beyond two the oldest is retired. */
export async function addSigningSecret(deps: Deps, environmentId: string): Promise<SigningSecret> {
  const added = await secrets.addSigningSecret(deps.db, environmentId, deps.config.secret, deps.clock.now());
  secretCacheOf(deps.db).clear();
  return added;
}

/** Retires one secret: tokens signed with it stop working. */
export async function retireSigningSecret(deps: Deps, environmentId: string, kid: string): Promise<boolean> {
  const gone = await secrets.retireSigningSecret(deps.db, environmentId, kid);
  secretCacheOf(deps.db).clear();
  return gone;
}

/** Signs a subscriber token for an existing subscriber with the environment's newest secret. */
export async function mintSubscriberToken(
  deps: Deps,
  environmentId: string,
  subscriberId: string,
  expiresIn: number = DEFAULT_TOKEN_SECONDS,
): Promise<{ token: string; expiresAt: string }> {
  await existingSubscriberKey(deps.db, environmentId, subscriberId);
  const [newest] = await signingSecrets(deps, environmentId);
  const issuedAt = Math.floor(deps.clock.now().getTime() / 1000);
  const expiresAt = issuedAt + Math.min(expiresIn, MAX_TOKEN_SECONDS);
  const token = await new SignJWT({})
    .setProtectedHeader({ alg: 'HS256', kid: newest.kid, typ: 'JWT' })
    .setSubject(subscriberId)
    .setAudience(INBOX_AUDIENCE)
    .setIssuedAt(issuedAt)
    .setExpirationTime(expiresAt)
    .sign(Buffer.from(newest.secret, 'base64url'));
  return { token, expiresAt: new Date(expiresAt * 1000).toISOString() };
}

type CachedSecret = { row: repo.InboxSecretRow & repo.OrganizationPlan; key: Uint8Array; until: number } | { row: undefined; until: number };
/** Signing secrets by id, per database. */
const secretCacheOf = boundedMapsBy<Db, string, CachedSecret>(10_000);

/** Longer than any signing secret's id (`ik_` and 24 hex digits): unknown without a read, and not remembered. */
const MAX_KID_LENGTH = 64;

async function secretForKid(db: Db, kid: string, sealKey: string | undefined, now: number): Promise<CachedSecret> {
  if (kid.length > MAX_KID_LENGTH) return { row: undefined, until: now };
  const secretCache = secretCacheOf(db);
  const cached = secretCache.get(kid);
  if (cached && cached.until > now) return cached;
  const clears = secretCache.clears;
  const row = await repo.secretById(db, kid);
  const entry: CachedSecret = row ? { row, key: Buffer.from(open(row.secret, sealKey), 'base64url'), until: now + SECRET_CACHE_MS } : { row: undefined, until: now + SECRET_CACHE_MS };
  // Not kept when a secret was added or retired while it was read.
  if (secretCache.clears === clears) secretCache.set(kid, entry);
  return entry;
}

/** Whether a credential is shaped like a JWT (three base64url parts, a JSON header), not an API key. */
export function looksLikeJwt(credential: string): boolean {
  return /^eyJ[\w-]*\.[\w-]*\.[\w-]*$/.test(credential);
}

/** The subscriber a token speaks for, or why it does not: expired, unknown kid, bad signature, wrong audience, too long-lived. */
export async function verifySubscriberToken(
  db: Db,
  token: string,
  sealKey: string | undefined,
  now: Date,
): Promise<{ ok: true; principal: InboxPrincipal } | { ok: false; reason: string }> {
  let kid: string | undefined;
  try {
    const header = decodeProtectedHeader(token);
    kid = typeof header.kid === 'string' ? header.kid : undefined;
    if (header.alg !== 'HS256') return { ok: false, reason: 'The subscriber token must be signed with HS256' };
  } catch {
    return { ok: false, reason: 'The subscriber token is malformed' };
  }
  if (!kid) return { ok: false, reason: 'The subscriber token has no kid: set it to the id of the inbox signing secret' };
  const secret = await secretForKid(db, kid, sealKey, now.getTime());
  if (!secret.row) return { ok: false, reason: 'The subscriber token is signed with an unknown or retired inbox secret' };
  try {
    const { payload } = await jwtVerify(token, secret.key, {
      algorithms: ['HS256'],
      audience: INBOX_AUDIENCE,
      currentDate: now,
      clockTolerance: CLOCK_TOLERANCE_SECONDS,
      requiredClaims: ['sub', 'iat', 'exp'],
    });
    if (typeof payload.sub !== 'string' || payload.sub === '') return { ok: false, reason: 'The subscriber token has no sub' };
    const nowSeconds = now.getTime() / 1000;
    if (payload.exp! <= nowSeconds) return { ok: false, reason: 'The subscriber token has expired' };
    // jose reads iat only to bound a token's age: a token issued in the future is refused here.
    if (payload.iat! > nowSeconds + CLOCK_TOLERANCE_SECONDS) return { ok: false, reason: 'The subscriber token is not valid: its iat claim is in the future' };
    // At most 24 hours from its iat, as the contract says, and from now: an old iat buys no time.
    if (payload.exp! > Math.min(payload.iat!, nowSeconds) + MAX_TOKEN_SECONDS + CLOCK_TOLERANCE_SECONDS) return { ok: false, reason: 'The subscriber token lives longer than 24 hours' };
    const { row } = secret;
    return {
      ok: true,
      principal: {
        organizationId: row.organizationId,
        environmentId: row.environmentId,
        subscriberId: payload.sub,
        credential: { kid, expiresAt: payload.exp! * 1000 },
        plan: row.plan,
        ratePerMinute: row.ratePerMinute,
        burst: row.burst,
      },
    };
  } catch (err) {
    if (err instanceof joseErrors.JWTExpired) return { ok: false, reason: 'The subscriber token has expired' };
    if (err instanceof joseErrors.JWTClaimValidationFailed) return { ok: false, reason: `The subscriber token is not valid: its ${err.claim} claim is wrong or missing` };
    return { ok: false, reason: 'The subscriber token is not valid: its signature does not match' };
  }
}

const hashTicket = (ticket: string) => createHash('sha256').update(ticket).digest('hex');

/**
 * A single-use stream ticket for the subscriber, valid TICKET_SECONDS (and no longer than the
 * token it is made with). It keeps that token's credential: the stream it opens ends with it.
 */
export async function createStreamTicket(
  deps: Deps,
  principal: { organizationId: string; environmentId: string; subscriberId: string; credential: InboxCredential },
) {
  // A ticket for a subscriber deleted since the token was made would only be refused by the stream.
  await existingSubscriberKey(deps.db, principal.environmentId, principal.subscriberId);
  const ticket = `tk_${randomBytes(24).toString('base64url')}`;
  const expiresAt = new Date(Math.min(deps.clock.now().getTime() + TICKET_SECONDS * 1000, principal.credential.expiresAt));
  await writeTransaction(deps.db, (trx) => repo.insertTicket(trx, { ticketHash: hashTicket(ticket), ...principal, expiresAt }));
  return { ticket, expiresAt: expiresAt.toISOString() };
}

/** Takes a ticket (it works once, in any process), answering whom it opens the stream for. */
export async function takeStreamTicket(db: Db, ticket: string, now: Date): Promise<InboxPrincipal | undefined> {
  const taken = await writeTransaction(db, (trx) => repo.takeTicket(trx, hashTicket(ticket)));
  if (!taken || taken.expiresAt < now.toISOString()) return undefined;
  const plan = await repo.planOfOrganization(db, taken.organizationId);
  if (!plan) return undefined;
  return { organizationId: taken.organizationId, environmentId: taken.environmentId, subscriberId: taken.subscriberId, credential: taken.credential, ...plan };
}

/**
 * Whether a stream's credential still opens the inbox at `now`: not expired, and its signing
 * secret not retired (read at most every SECRET_CACHE_MS, so a retirement in another process is
 * seen within that). A stream opened with a ticket made before tickets kept their credential has
 * none: it lasts DEFAULT_TOKEN_SECONDS from `openedAt`.
 */
export async function credentialLive(db: Db, credential: InboxCredential | undefined, openedAt: number, sealKey: string | undefined, now: number): Promise<boolean> {
  if (!credential) return now < openedAt + DEFAULT_TOKEN_SECONDS * 1000;
  if (now >= credential.expiresAt) return false;
  return (await secretForKid(db, credential.kid, sealKey, now)).row !== undefined;
}

/** The origins whose browsers may call the environment's inbox. */
export async function inboxOrigins(deps: Deps, environmentId: string): Promise<string[]> {
  return repo.originsOf(deps.db, environmentId);
}

/** Replaces them; each is kept as the browser sends it (lowercase scheme and host, no trailing slash). */
export async function setInboxOrigins(deps: Deps, environmentId: string, origins: string[]): Promise<string[]> {
  // The contract's pattern lets through what is no URL, such as a port past 65535.
  const problems = origins.flatMap((origin, i) => (URL.canParse(origin) ? [] : [{ field: `body/allowedOrigins/${i}`, message: `is not an origin: ${origin}` }]));
  if (problems.length > 0) throw badRequest(`allowedOrigins ${problems[0].message}`, problems);
  const normalized = [...new Set(origins.map((origin) => new URL(origin).origin))].sort();
  await writeTransaction(deps.db, (trx) => repo.replaceOrigins(trx, environmentId, normalized));
  originCacheOf(deps.db).clear();
  return normalized;
}

/** The longest origin an environment may allow (InboxSettingsUpdate's allowedOrigins). */
export const MAX_ORIGIN_LENGTH = 255;

/** Answers by environment and origin, per database. */
const originCacheOf = boundedMapsBy<Db, string, { allowed: boolean; until: number }>(10_000);

/** Whether `origin` may call this environment's inbox; remembered a few seconds. */
export async function originAllowed(db: Db, origin: string, environmentId: string, now: number): Promise<boolean> {
  // Longer than any origin an environment can allow (the contract's maxLength): no read, and not remembered.
  if (origin.length > MAX_ORIGIN_LENGTH) return false;
  const key = `${environmentId} ${origin}`;
  const originCache = originCacheOf(db);
  const cached = originCache.get(key);
  if (cached && cached.until > now) return cached.allowed;
  const clears = originCache.clears;
  const allowed = (await repo.originsOf(db, environmentId)).includes(origin);
  // Not kept when the origins changed while they were read: the answer may be the old one.
  if (originCache.clears === clears) originCache.set(key, { allowed, until: now + SECRET_CACHE_MS });
  return allowed;
}
