// The dashboard (README, "The dashboard"): the account owner signs in and manages API keys under
// Settings → API keys; Monitor → Activity (activity.ts), Monitor → Webhooks (webhooks.ts) and
// Settings → Inbox (inbox-settings.ts) are rooms of their own. Plain server-rendered HTML; every
// form carries a CSRF token.
import express, { type Request, type Response, type Router } from 'express';
import type { Deps } from '../deps.js';
import { verifyPassword, UNKNOWN_OWNER_HASH } from '../accounts/passwords.js';
import { createApiKey, listApiKeys, listEnvironments, revokeApiKey } from '../db/repos/accounts.js';
import { createSession, deleteSession, findOwnerByEmail, type DashboardSession } from '../db/repos/owners.js';
import {
  cookieOptions,
  loadSession,
  newToken,
  pageHeaders,
  readCookie,
  sameToken,
  SESSION_COOKIE,
  SESSION_TTL_MS,
  sessionIdOf,
  sessionOf,
  SIGN_IN_COOKIE,
} from './session.js';
import { signInLimit, type SignInLimitScope } from './sign-in-limit.js';
import { apiKeysPage, messagePage, signInPage, type KeysPageData } from './views.js';
import { pageContext, refuseForeignForms, requireCsrf, requireSession, sendPage as send } from './guards.js';
import { activityRoutes } from './activity.js';
import { inboxSettingsRoutes } from './inbox-settings.js';
import { webhookRoutes } from './webhooks.js';
import { cappedBody } from '../http/request-body.js';
import { isKeyName, KEY_NAME_MAX } from '../api-keys.js';

/** The largest form body the dashboard reads. */
const FORM_LIMIT = 16_384;

export function dashboard(deps: Deps): Router {
  const { db, clock } = deps;
  const router = express.Router();
  router.use(pageHeaders, refuseForeignForms, cappedBody(express.urlencoded({ extended: false, limit: FORM_LIMIT }), FORM_LIMIT, 'application/x-www-form-urlencoded'), loadSession(db, clock));

  /** The sign-in form, with a fresh double-submit CSRF token in a cookie and in the form. */
  const showSignIn = (req: Request, res: Response, status: number, form: { email?: string; error?: string } = {}) => {
    const csrfToken = newToken();
    res.cookie(SIGN_IN_COOKIE, csrfToken, cookieOptions(req));
    send(res, status, signInPage(pageContext(req, res), { ...form, csrfToken }));
  };

  const keysPage = async (req: Request, res: Response, status: number, extra: Partial<KeysPageData> = {}) => {
    const session = sessionOf(res)!;
    const [environments, keys] = await Promise.all([
      listEnvironments(db, session.organizationId),
      listApiKeys(db, { organizationId: session.organizationId }),
    ]);
    // Newest first: the key just made is at the top.
    keys.reverse();
    send(res, status, apiKeysPage(pageContext(req, res), { organizationName: session.organizationName, email: session.email, csrfToken: session.csrfToken, environments, keys, ...extra }));
  };

  router.get('/', (req, res) => res.redirect(303, `${req.baseUrl}${sessionOf(res) ? '/settings/api-keys' : '/sign-in'}`));

  router.get('/sign-in', (req, res) => {
    if (sessionOf(res)) return res.redirect(303, `${req.baseUrl}/settings/api-keys`);
    showSignIn(req, res, 200);
  });

  const tooManyAttempts = (req: Request, res: Response, retryAfterSeconds: number, scope: SignInLimitScope) => {
    res.set('Retry-After', String(retryAfterSeconds));
    const minutes = Math.ceil(retryAfterSeconds / 60);
    const whose = scope === 'address' ? 'from your address' : 'for this account from your address';
    send(res, 429, messagePage(pageContext(req, res), 'Too many attempts', `Too many failed sign-ins ${whose}. Try again in ${minutes} minute${minutes === 1 ? '' : 's'}.`, { href: `${req.baseUrl}/sign-in`, text: 'Back to sign in' }));
  };

  router.post('/sign-in', signInLimit(db, clock, tooManyAttempts), async (req, res) => {
    const email = String(req.body?.email ?? '').trim();
    const password = String(req.body?.password ?? '');
    const expectedCsrf = readCookie(req, SIGN_IN_COOKIE);
    if (!expectedCsrf || !sameToken(req.body?._csrf, expectedCsrf)) {
      return showSignIn(req, res, 403, { email, error: 'The form expired. Please sign in again.' });
    }
    const owner = email ? await findOwnerByEmail(db, email) : undefined;
    // An unknown email costs the same scrypt as a wrong password: timing tells nothing.
    const passwordMatches = await verifyPassword(password, owner?.passwordHash ?? UNKNOWN_OWNER_HASH);
    if (!owner || !passwordMatches) return showSignIn(req, res, 401, { email, error: 'That email and password do not match.' });

    const token = newToken();
    const now = clock.now();
    await createSession(db, { id: sessionIdOf(token), ownerId: owner.id, csrfToken: newToken(), now, expiresAt: new Date(now.getTime() + SESSION_TTL_MS) });
    res.clearCookie(SIGN_IN_COOKIE, cookieOptions(req));
    res.cookie(SESSION_COOKIE, token, cookieOptions(req, SESSION_TTL_MS));
    res.redirect(303, `${req.baseUrl}/settings/api-keys`);
  });

  router.post('/sign-out', requireSession, requireCsrf, async (req, res) => {
    await deleteSession(db, sessionOf(res)!.id);
    res.clearCookie(SESSION_COOKIE, cookieOptions(req));
    res.redirect(303, `${req.baseUrl}/sign-in`);
  });

  router.get('/settings/api-keys', requireSession, async (req, res) => {
    const notice = req.query.revoked === '1' ? 'The key was revoked. Requests with it are refused from now on.' : undefined;
    await keysPage(req, res, 200, { notice });
  });

  router.post('/settings/api-keys', requireSession, requireCsrf, async (req, res) => {
    const session: DashboardSession = sessionOf(res)!;
    const name = String(req.body?.name ?? '').trim();
    const environmentId = String(req.body?.environmentId ?? '');
    const environment = (await listEnvironments(db, session.organizationId)).find((e) => e.id === environmentId);
    const draft = { name, environmentId };
    if (!isKeyName(name)) return keysPage(req, res, 422, { draft, error: `Give the key a name of 1 to ${KEY_NAME_MAX} characters.` });
    if (!environment) return keysPage(req, res, 422, { draft, error: 'Choose one of your environments.' });
    const { key } = await createApiKey(db, { environmentId: environment.id, name, now: clock.now() });
    // Answered here rather than redirected: the key is shown in this response and stored nowhere.
    await keysPage(req, res, 201, { newKey: { key, name, environmentName: environment.name } });
  });

  router.post('/settings/api-keys/:keyId/revoke', requireSession, requireCsrf, async (req, res) => {
    const revoked = await revokeApiKey(db, String(req.params.keyId), { organizationId: sessionOf(res)!.organizationId }, clock.now());
    if (!revoked) return keysPage(req, res, 404, { error: 'There is no active key with that id in your organization.' });
    res.redirect(303, `${req.baseUrl}/settings/api-keys?revoked=1`);
  });

  activityRoutes(router, deps);
  inboxSettingsRoutes(router, deps);
  webhookRoutes(router, deps);

  router.use((req, res) => {
    send(res, 404, messagePage(pageContext(req, res), 'Page not found', 'There is nothing here.', { href: `${req.baseUrl}/`, text: 'Go to the dashboard' }));
  });
  return router;
}
