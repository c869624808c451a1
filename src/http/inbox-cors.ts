// Cross-origin calls for /v1/inbox only, from the origins each environment allows
// (PUT /v1/inbox/settings); the rest of the API sends no CORS header, so browsers keep it
// same-origin. A preflight carries no credential to say whose origins apply: it is answered alike
// for every origin (answering only those some environment allows told anyone who asked which
// sites are Herald's customers). The request itself is what is checked: a subscriber token's
// request gets its CORS headers only if its environment allows the origin, and from a cross origin
// its environment does not allow it is a 403, before anything is done. A refused credential's
// answer (a 401) may be read by any origin, and so may POST /v1/inbox/session's, which carries no
// credential: the session itself is refused (403) to a browser whose origin its environment does
// not allow (engine/inbox-sessions.ts, given crossOriginOf below), so only an allowed origin ever
// reads a token.
import type { Request, RequestHandler, Response } from 'express';
import type { Deps } from '../deps.js';
import type { Authentication } from './security.js';
import { originAllowed } from '../engine/inbox-tokens.js';
import { sendError } from './errors.js';
import { ApiError } from '../errors.js';

// Cache-Control: EventSource polyfills send it with every stream request.
const ALLOWED_HEADERS = 'Authorization, Cache-Control, Content-Type, Idempotency-Key, Last-Event-ID';
const EXPOSED_HEADERS = 'RateLimit, RateLimit-Policy, Retry-After, Idempotency-Replay, X-Request-Id';
const ALLOWED_METHODS = 'GET, POST, PATCH, DELETE';

const isInboxPath = (path: string) => path === '/inbox' || path.startsWith('/inbox/');

/**
 * The Origin of a browser's cross-origin request; undefined for a page on Herald's own origin or a
 * server (which sends no Origin). Browsers say which in `Sec-Fetch-Site`; for one that does not,
 * the Origin's host is compared with the Host the request came to. Both are headers a page cannot
 * set, so a page elsewhere cannot pass for Herald's own.
 */
export function crossOriginOf(req: Request): string | undefined {
  const origin = req.headers.origin;
  if (!origin) return undefined;
  const site = req.headers['sec-fetch-site'];
  if (site === 'same-origin') return undefined;
  if (site === undefined && URL.canParse(origin) && new URL(origin).host === req.headers.host) return undefined;
  return origin;
}

/** Answers preflights (OPTIONS) for /v1/inbox/*, alike for every origin; mounted at /v1 before the API. */
export function inboxPreflight(): RequestHandler {
  return (req, res, next) => {
    const origin = req.headers.origin;
    if (req.method !== 'OPTIONS' || !origin || !isInboxPath(req.path)) return next();
    res.setHeader('Access-Control-Allow-Origin', origin);
    res.setHeader('Access-Control-Allow-Methods', ALLOWED_METHODS);
    res.setHeader('Access-Control-Allow-Headers', ALLOWED_HEADERS);
    res.setHeader('Access-Control-Max-Age', '600');
    res.setHeader('Vary', 'Origin');
    res.status(204).end();
  };
}

function allowCors(res: Response, origin: string): void {
  res.setHeader('Access-Control-Allow-Origin', origin);
  res.setHeader('Access-Control-Expose-Headers', EXPOSED_HEADERS);
}

/** Sets the CORS headers of an inbox request from an allowed origin; runs after authentication(). */
export function inboxCors({ db, clock }: Deps): RequestHandler {
  return (req, res, next) => {
    const origin = req.headers.origin;
    if (!origin || !isInboxPath(req.path)) return next();
    res.setHeader('Vary', 'Origin');
    const authentication = res.locals.authentication as Authentication | undefined;
    const environmentId = authentication?.ok && authentication.auth.subscriberId !== undefined ? authentication.auth.environmentId : undefined;
    // An API key on the inbox is refused anyway; its answer needs no CORS header.
    if (authentication?.ok && environmentId === undefined) return next();
    // No subscriber (a refused credential, or the session, which has none yet): any origin reads the answer.
    if (environmentId === undefined) {
      allowCors(res, origin);
      return next();
    }
    originAllowed(db, origin, environmentId, clock.now().getTime()).then((allowed) => {
      if (allowed) {
        allowCors(res, origin);
      } else if (crossOriginOf(req) !== undefined) {
        // Without its CORS headers a page cannot read the answer, but a write would still be done:
        // a page of an origin the token's environment does not allow is refused outright.
        return sendError(req, res, new ApiError(403, `Origin ${origin} may not call this environment's inbox: add it with PUT /v1/inbox/settings`));
      }
      next();
    }, next);
  };
}
