import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { CookieOptions, Request, RequestHandler, Response } from 'express';
import type { Db } from '../db/knex.js';
import type { Clock } from '../clock.js';
import { findSession, type DashboardSession } from '../db/repos/owners.js';

export const SESSION_COOKIE = 'herald_session';
/** The sign-in form's CSRF token (double submit): there is no session yet to keep it in. */
export const SIGN_IN_COOKIE = 'herald_sign_in';
export const SESSION_TTL_MS = 12 * 60 * 60 * 1000;

export const newToken = () => randomBytes(32).toString('base64url');
/** Sessions are stored by the SHA-256 of their token, never the token itself. */
export const sessionIdOf = (token: string) => createHash('sha256').update(token).digest('hex');

/**
 * The cookie `name`, or undefined when the request does not carry it exactly once. A second cookie
 * of the same name is one another site set: a page on another port of the same host (browsers
 * keep cookies by host, not port) or a sibling subdomain can add its own for a longer path, which
 * the browser sends first, to sign the owner into the attacker's account on some pages.
 */
export function readCookie(req: Request, name: string): string | undefined {
  let value: string | undefined;
  let found = false;
  for (const part of (req.headers.cookie ?? '').split(';')) {
    const at = part.indexOf('=');
    if (at > 0 && part.slice(0, at).trim() === name) {
      if (found) return undefined;
      found = true;
      try {
        value = decodeURIComponent(part.slice(at + 1).trim());
      } catch {
        return undefined;
      }
    }
  }
  return value;
}

/** HttpOnly and SameSite=Lax always; Secure whenever the request came over HTTPS. */
export function cookieOptions(req: Request, maxAgeMs?: number): CookieOptions {
  return { httpOnly: true, sameSite: 'lax', secure: req.secure, path: req.baseUrl || '/', ...(maxAgeMs ? { maxAge: maxAgeMs } : {}) };
}

export function sameToken(a: unknown, b: string): boolean {
  if (typeof a !== 'string') return false;
  const left = Buffer.from(a);
  const right = Buffer.from(b);
  return left.length === right.length && timingSafeEqual(left, right);
}

export const sessionOf = (res: Response): DashboardSession | undefined => res.locals.dashboardSession;

/** Puts the signed-in owner's session, if the cookie names a live one, on `res.locals`. */
export function loadSession(db: Db, clock: Clock): RequestHandler {
  return (req, res, next) => {
    const token = readCookie(req, SESSION_COOKIE);
    if (!token) return next();
    findSession(db, sessionIdOf(token), clock.now()).then((session) => {
      res.locals.dashboardSession = session;
      next();
    }, next);
  };
}

/**
 * Pages for humans: a nonce for our one inline style and script and nothing else (CSP), no
 * framing, no caching (a page may show a new key), no referrer leaving the dashboard (`same-origin`
 * rather than `no-referrer`, under which a browser sends its own forms with `Origin: null`).
 */
export const pageHeaders: RequestHandler = (_req, res, next) => {
  const nonce = randomBytes(16).toString('base64');
  res.locals.nonce = nonce;
  res.set({
    'Content-Security-Policy': `default-src 'none'; style-src 'nonce-${nonce}'; script-src 'nonce-${nonce}'; img-src 'self' data:; form-action 'self'; frame-ancestors 'none'; base-uri 'none'`,
    'X-Frame-Options': 'DENY',
    'X-Content-Type-Options': 'nosniff',
    'Referrer-Policy': 'same-origin',
    'Cache-Control': 'no-store',
  });
  next();
};
