// Settings → Inbox: each environment's allowed browser origins, inbox signing secrets, and sessions
// from a subscriber hash (with the application identifier browsers send), through the same engine
// functions as PUT /v1/inbox/settings and the token operation. Every form carries the session's CSRF token.
import type { Request, Response, Router } from 'express';
import type { Deps } from '../deps.js';
import { schemaValidator } from '../contract.js';
import type { Validate } from '../json-schema.js';
import { ApiError } from '../errors.js';
import { LIVE_SECRETS } from '../db/inbox-secrets.js';
import { addSigningSecret, mintSubscriberToken, retireSigningSecret, setInboxOrigins, signingSecrets } from '../engine/inbox-tokens.js';
import { inboxSettings, setSubscriberHashSessions } from '../engine/inbox-sessions.js';
import { sessionOf } from './session.js';
import { chosenEnvironment, pageContext, requireCsrf, requireSession, sendPage, unlessNotFound } from './guards.js';
import { inboxSettingsHref, inboxSettingsPage, type InboxSettingsPageData } from './inbox-settings-views.js';

/** Why `origins` break the contract's rules (InboxSettingsUpdate, checked by `validOrigins`, its own schema). */
function originsError(validOrigins: Validate, origins: string[]): string | undefined {
  if (validOrigins({ allowedOrigins: origins })) return undefined;
  const [error] = validOrigins.errors ?? [];
  if (error?.keyword === 'maxItems') return `At most ${String(error.params.limit)} origins.`;
  // The item at fault (/allowedOrigins/3).
  const index = Number(/^\/allowedOrigins\/(\d+)/.exec(error?.instancePath ?? '')?.[1] ?? 0);
  return notAnOrigin(origins[index]);
}

const notAnOrigin = (origin: string | undefined) => `“${origin ?? ''}” is not an origin: write the scheme, host and port only (no wildcard), e.g. https://app.example.com.`;

export function inboxSettingsRoutes(router: Router, deps: Deps): void {
  const validOrigins = schemaValidator('InboxSettingsUpdate');
  const { db } = deps;

  const environmentOf = (req: Request, res: Response) => chosenEnvironment(db, req, res, { href: `${req.baseUrl}/settings/inbox`, text: 'Back to inbox settings' });

  const show = async (req: Request, res: Response, status: number, extra: Partial<InboxSettingsPageData> = {}) => {
    const found = await environmentOf(req, res);
    if (!found) return;
    const environmentId = found.environment.id;
    const [settings, secrets] = await Promise.all([inboxSettings(deps, environmentId), signingSecrets(deps, environmentId)]);
    sendPage(
      res,
      status,
      inboxSettingsPage(pageContext(req, res), {
        ...sessionOf(res)!,
        environments: found.environments,
        environmentId,
        origins: settings.allowedOrigins,
        secrets,
        liveSecrets: LIVE_SECRETS,
        applicationIdentifier: settings.applicationIdentifier,
        hashSessions: settings.subscriberHashSessions,
        ...extra,
      }),
    );
  };

  /** After a change: back to the page (303), with what happened said there. */
  const done = (req: Request, res: Response, environmentId: string, notice: string) =>
    res.redirect(303, `${inboxSettingsHref(req.baseUrl, environmentId)}&done=${encodeURIComponent(notice)}`);

  const NOTICES = new Map([
    ['origins', 'The allowed origins are saved. Other server processes follow within a few seconds.'],
    ['added', 'A new secret signs tokens from now on; tokens signed with the other one still work.'],
    ['retired', 'The secret is retired: tokens signed with it are refused from now on.'],
    ['sessions-on', 'Sessions from a subscriber hash are on: browsers may now trade a hash for a one-hour token.'],
    ['sessions-off', 'Sessions from a subscriber hash are off: every new session is refused.'],
  ]);

  router.get('/settings/inbox', requireSession, async (req, res) => {
    await show(req, res, 200, { notice: NOTICES.get(String(req.query.done)) });
  });

  router.post('/settings/inbox/origins', requireSession, requireCsrf, async (req, res) => {
    const found = await environmentOf(req, res);
    if (!found) return;
    const text = String(req.body?.origins ?? '');
    const origins = [...new Set(text.split(/[\s,]+/).filter(Boolean))];
    const error = originsError(validOrigins, origins);
    if (error) return show(req, res, 422, { error, originsDraft: text });
    try {
      await setInboxOrigins(deps, found.environment.id, origins);
    } catch (err) {
      // What the contract's pattern lets through and no URL is (a port past 65535): the API's 400.
      if (!(err instanceof ApiError) || err.status !== 400) throw err;
      const index = Number(/\/(\d+)$/.exec(err.details?.[0]?.field ?? '')?.[1] ?? 0);
      return show(req, res, 422, { error: notAnOrigin(origins[index]), originsDraft: text });
    }
    done(req, res, found.environment.id, 'origins');
  });

  router.post('/settings/inbox/sessions', requireSession, requireCsrf, async (req, res) => {
    const found = await environmentOf(req, res);
    if (!found) return;
    const on = req.body?.enabled === 'on';
    await setSubscriberHashSessions(deps, found.environment.id, on);
    done(req, res, found.environment.id, on ? 'sessions-on' : 'sessions-off');
  });

  router.post('/settings/inbox/secrets', requireSession, requireCsrf, async (req, res) => {
    const found = await environmentOf(req, res);
    if (!found) return;
    await addSigningSecret(deps, found.environment.id);
    done(req, res, found.environment.id, 'added');
  });

  router.post('/settings/inbox/secrets/:kid/retire', requireSession, requireCsrf, async (req, res) => {
    const found = await environmentOf(req, res);
    if (!found) return;
    if (!(await retireSigningSecret(deps, found.environment.id, String(req.params.kid)))) {
      return show(req, res, 404, { error: 'There is no live secret with that id in this environment.' });
    }
    done(req, res, found.environment.id, 'retired');
  });

  router.post('/settings/inbox/tokens', requireSession, requireCsrf, async (req, res) => {
    const found = await environmentOf(req, res);
    if (!found) return;
    const subscriberId = String(req.body?.subscriberId ?? '').trim();
    if (!subscriberId) return show(req, res, 422, { error: 'Name a subscriber.' });
    const minted = await unlessNotFound(mintSubscriberToken(deps, found.environment.id, subscriberId));
    if (!minted) return show(req, res, 404, { error: `There is no subscriber “${subscriberId}” in this environment.`, subscriberDraft: subscriberId });
    // Answered here rather than redirected: the token is shown in this response and stored nowhere.
    await show(req, res, 201, { token: { subscriberId, ...minted } });
  });
}
