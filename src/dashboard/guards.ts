// What every dashboard page shares: how a page is sent, who may see it, and the CSRF check that
// every state-changing form passes.
import type { Request, RequestHandler, Response } from 'express';
import type { Db } from '../db/knex.js';
import { listEnvironments } from '../db/repos/accounts.js';
import { sameToken, sessionOf } from './session.js';
import { messagePage, type PageContext } from './views.js';
import { ApiError } from '../errors.js';

export const pageContext = (req: Request, res: Response): PageContext => ({ nonce: res.locals.nonce, base: req.baseUrl });

export const sendPage = (res: Response, status: number, page: string) => res.status(status).type('html').send(page);

export const requireSession: RequestHandler = (req, res, next) => {
  if (sessionOf(res)) return next();
  res.redirect(303, `${req.baseUrl}/sign-in`);
};

/**
 * A form sent from another origin is refused before it is read, whatever token it carries: a
 * sibling origin (another port of the host, another subdomain) is "same-site" to the browser, so
 * SameSite cookies do not stop it, and it can plant cookies of its own. The browser's
 * `Sec-Fetch-Site` says where the form came from; browsers send it only to HTTPS and to
 * localhost, so without it `Origin`, when sent, must be this host (the pages' referrer policy has
 * the browser send their own forms' origin; `null` is another page's doing).
 */
export const refuseForeignForms: RequestHandler = (req, res, next) => {
  if (req.method !== 'POST' || !fromElsewhere(req)) return next();
  sendPage(
    res,
    403,
    messagePage(pageContext(req, res), 'Form refused', 'This form was sent from another site. Open the dashboard itself and try again.', {
      href: `${req.baseUrl}/sign-in`,
      text: 'Go to the dashboard',
    }),
  );
};

function fromElsewhere(req: Request): boolean {
  const site = req.headers['sec-fetch-site'];
  if (site !== undefined) return site !== 'same-origin' && site !== 'none';
  const origin = req.headers.origin;
  if (origin === undefined) return false;
  try {
    const from = new URL(origin);
    // This host as the browser addressed it (through the proxies HERALD_TRUST_PROXY names), its
    // scheme's port when it names none.
    const here = new URL(`${req.protocol}://${req.host}`);
    return from.protocol !== here.protocol || from.host !== here.host;
  } catch {
    return true;
  }
}

/** Every state-changing form must carry the session's CSRF token. */
export const requireCsrf: RequestHandler = (req, res, next) => {
  if (sameToken(req.body?._csrf, sessionOf(res)!.csrfToken)) return next();
  sendPage(
    res,
    403,
    messagePage(pageContext(req, res), 'Form refused', 'This form did not come from your dashboard, or it expired. Reload the page and try again.', {
      href: `${req.baseUrl}/settings/api-keys`,
      text: 'Back to API keys',
    }),
  );
};

type Environment = Awaited<ReturnType<typeof listEnvironments>>[number];

/**
 * The signed-in owner's environments and the one the page's `?environment=` names (the first when
 * it names none); undefined once a 404 page linking `back` was sent.
 */
export async function chosenEnvironment(
  db: Db,
  req: Request,
  res: Response,
  back: { href: string; text: string },
): Promise<{ environments: Environment[]; environment: Environment } | undefined> {
  const environments = await listEnvironments(db, sessionOf(res)!.organizationId);
  const wanted = typeof req.query.environment === 'string' && req.query.environment !== '' ? req.query.environment : undefined;
  const environment = wanted ? environments.find((e) => e.id === wanted) : environments[0];
  if (!environment) {
    sendPage(res, 404, messagePage(pageContext(req, res), 'Environment not found', 'Your organization has no environment with that id.', back));
    return undefined;
  }
  return { environments, environment };
}

/** What `work` answers, or undefined when it throws the API's 404 (a page then says "not found" its own way). */
export async function unlessNotFound<T>(work: Promise<T>): Promise<T | undefined> {
  try {
    return await work;
  } catch (err) {
    if (err instanceof ApiError && err.status === 404) return undefined;
    throw err;
  }
}
