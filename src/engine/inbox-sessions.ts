// Novu-style inbox sessions: a browser trades a subscriber hash (the hex HMAC-SHA256 of a
// subscriberId, which the customer's backend computed) for an ordinary one-hour subscriber token.
// Off unless the environment's owner turns it on; it never creates or changes a subscriber.
//
// The hash is keyed with the text of one of the environment's live inbox signing secrets, not an
// API key as in Novu: Herald keeps API keys only as hashes, and a subscriber hash never expires on
// its own, so it must stop working when its key is retired (Novu's hash lives as long as the API
// key, novuhq/novu#3522). The key is the secret's text, whereas tokens are signed with its decoded
// bytes: the two uses never share a key, so a hash over a subscriberId shaped like a JWT's signing
// input is no token signature.
import { createHmac, timingSafeEqual } from 'node:crypto';
import type { Deps } from '../deps.js';
import { writeTransaction } from '../db/group-commit.js';
import * as repo from '../db/repos/inbox-access.js';
import { liveSigningSecrets } from '../db/inbox-secrets.js';
import { ApiError, forbidden, unauthorized, unprocessable } from '../errors.js';
import { inboxOrigins, mintSubscriberToken, originAllowed, setInboxOrigins } from './inbox-tokens.js';

/** The environment's inbox settings as `GET /v1/inbox/settings` answers them. */
export interface InboxSettings {
  allowedOrigins: string[];
  subscriberHashSessions: boolean;
  applicationIdentifier: string;
}

export async function inboxSettings(deps: Deps, environmentId: string): Promise<InboxSettings> {
  const [allowedOrigins, sessions] = await Promise.all([inboxOrigins(deps, environmentId), repo.sessionSettingsOf(deps.db, environmentId)]);
  return { allowedOrigins, subscriberHashSessions: sessions.hashSessions, applicationIdentifier: sessions.applicationIdentifier };
}

/** Changes the settings the update names; the others keep their values. */
export async function changeInboxSettings(
  deps: Deps,
  environmentId: string,
  update: { allowedOrigins?: string[]; subscriberHashSessions?: boolean },
): Promise<InboxSettings> {
  if (update.allowedOrigins !== undefined) await setInboxOrigins(deps, environmentId, update.allowedOrigins);
  if (update.subscriberHashSessions !== undefined) await setSubscriberHashSessions(deps, environmentId, update.subscriberHashSessions);
  return inboxSettings(deps, environmentId);
}

export async function setSubscriberHashSessions(deps: Deps, environmentId: string, on: boolean): Promise<void> {
  await writeTransaction(deps.db, (trx) => repo.setHashSessions(trx, environmentId, on));
}

/** The subscriber hash a backend computes: hex HMAC-SHA256 of the subscriberId, keyed with a signing secret's text. */
export function subscriberHashOf(secret: string, subscriberId: string): string {
  return createHmac('sha256', secret).update(subscriberId, 'utf8').digest('hex');
}

/** One answer for a hash that does not match and a subscriber that does not exist, so a caller learns nobody's existence. */
const noSession = () =>
  unauthorized('No session: the subscriberHash does not match this subscriberId under any live inbox signing secret, or there is no such subscriber');

export interface SessionRequest {
  applicationIdentifier: string;
  subscriberId: string;
  subscriberHash: string;
}

/**
 * A one-hour subscriber token for a session request, or why not: an unknown application (422),
 * sessions off or a browser origin the environment does not allow (403), a hash that does not
 * match or a subscriber that does not exist (the same 401). `origin` is the origin of a browser's
 * cross-origin request, checked; undefined (a page on Herald's own origin, or a server), nothing to check.
 */
export async function startInboxSession(deps: Deps, request: SessionRequest, origin: string | undefined): Promise<{ token: string; expiresAt: string }> {
  const application = await repo.environmentOfApplication(deps.db, request.applicationIdentifier);
  if (!application) {
    throw unprocessable(`Unknown applicationIdentifier ${request.applicationIdentifier}: copy it from GET /v1/inbox/settings or Settings → Inbox`, [
      { field: 'body/applicationIdentifier', message: 'is not the applicationIdentifier of any environment' },
    ]);
  }
  const { environmentId } = application;
  if (!application.hashSessions) {
    throw forbidden('Sessions from a subscriberHash are off for this application: turn them on with PUT /v1/inbox/settings {"subscriberHashSessions": true}');
  }
  if (origin !== undefined && !(await originAllowed(deps.db, origin, environmentId, deps.clock.now().getTime()))) {
    throw forbidden(`Origin ${origin} may not start sessions for this application: add it to allowedOrigins with PUT /v1/inbox/settings`);
  }
  const given = Buffer.from(request.subscriberHash.toLowerCase(), 'hex');
  let matches = false;
  // Every live secret is tried, each in constant time, so the time taken says nothing of which matched.
  for (const { secret } of await liveSigningSecrets(deps.db, environmentId, deps.config.secret)) {
    const expected = Buffer.from(subscriberHashOf(secret, request.subscriberId), 'hex');
    if (given.length === expected.length && timingSafeEqual(given, expected)) matches = true;
  }
  if (!matches) throw noSession();
  try {
    // The same token POST /v1/subscribers/{id}/inbox-tokens mints, for the default hour.
    return await mintSubscriberToken(deps, environmentId, request.subscriberId);
  } catch (err) {
    // Only a caller who holds the secret gets this far, yet the answer stays the same as for a bad hash.
    if (err instanceof ApiError && err.status === 404) throw noSession();
    throw err;
  }
}
