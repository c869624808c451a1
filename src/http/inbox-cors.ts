// Cross-origin calls for /v1/inbox only, from the origins each environment allows
// (PUT /v1/inbox/settings); the rest of the API sends no CORS header, so browsers keep it
// same-origin. A preflight carries no credential, so it is answered for an origin that some
// environment allows; the request itself gets its CORS headers only if its own environment
// allows the origin (or, for a refused credential, if some environment does, so the page can read its 401).
import type { RequestHandler } from 'express';
import type { Deps } from '../deps.js';
import type { Authentication } from './security.js';
import { originAllowed } from '../engine/inbox-tokens.js';
import { sendError } from './errors.js';
import { ApiError } from '../errors.js';

const ALLOWED_HEADERS = 'Authorization, Content-Type, Idempotency-Key, Last-Event-ID';
const EXPOSED_HEADERS = 'RateLimit, RateLimit-Policy, Retry-After, Idempotency-Replay, X-Request-Id';
const ALLOWED_METHODS = 'GET, POST, PATCH, DELETE';

const isInboxPath = (path: string) => path === '/inbox' || path.startsWith('/inbox/');

/** Answers preflights (OPTIONS) for /v1/inbox/*; mounted at /v1 before the API. */
export function inboxPreflight({ db, clock }: Deps): RequestHandler {
  return (req, res, next) => {
    const origin = req.headers.origin;
    if (req.method !== 'OPTIONS' || !origin || !isInboxPath(req.path)) return next();
    originAllowed(db, origin, undefined, clock.now().getTime()).then((allowed) => {
      if (!allowed) return sendError(req, res, new ApiError(403, `Origin ${origin} may not call the inbox: add it with PUT /v1/inbox/settings`));
      res.setHeader('Access-Control-Allow-Origin', origin);
      res.setHeader('Access-Control-Allow-Methods', ALLOWED_METHODS);
      res.setHeader('Access-Control-Allow-Headers', ALLOWED_HEADERS);
      res.setHeader('Access-Control-Max-Age', '600');
      res.setHeader('Vary', 'Origin');
      res.status(204).end();
    }, next);
  };
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
    originAllowed(db, origin, environmentId, clock.now().getTime()).then((allowed) => {
      if (allowed) {
        res.setHeader('Access-Control-Allow-Origin', origin);
        res.setHeader('Access-Control-Expose-Headers', EXPOSED_HEADERS);
      }
      next();
    }, next);
  };
}
