// Webhooks: each environment's endpoints, their recent deliveries with every try, and the buttons
// of the API's webhook operations (test, retry, rotate, enable and disable, delete), through the
// same engine functions (engine/webhooks.ts). Every form carries the session's CSRF token.
import type { Request, Response, Router } from 'express';
import type { Deps } from '../deps.js';
import { schemaValidator, type Schemas } from '../contract.js';
import { ApiError } from '../errors.js';
import * as webhooks from '../engine/webhooks.js';
import { sessionOf } from './session.js';
import { chosenEnvironment, pageContext, requireCsrf, requireSession, sendPage, unlessNotFound } from './guards.js';
import { messagePage } from './views.js';
import { endpointHref, endpointPage, endpointsPage, webhooksHref, type EndpointPageData, type EndpointsPageData } from './webhooks-views.js';

type EventType = Schemas['WebhookEventType'];
/** The contract's WebhookEventType, in its order. */
const EVENT_TYPES = [
  'message.sent',
  'message.delivered',
  'message.attempt_failed',
  'message.failed',
  'message.skipped',
  'message.seen',
  'message.read',
  'message.archived',
  'notification.canceled',
  'webhook.test',
  'webhook_endpoint.disabled',
] as const satisfies readonly EventType[];
const DELIVERY_STATUSES = ['pending', 'succeeded', 'failed'] as const;
const RECENT = 25;
const GRACE_CHOICES = new Set([0, 3600, 86_400]);

/** What an engine refusal says, its details included (a URL the outbound guard refuses, say). */
function refusal(err: unknown): { status: number; message: string } | undefined {
  if (!(err instanceof ApiError) || err.status >= 500) return undefined;
  const details = (err.details ?? []).map((detail) => detail.message).join('; ');
  return { status: err.status, message: details ? `${err.message}: ${details}` : err.message };
}

const asList = (value: unknown): string[] => (Array.isArray(value) ? value.map(String) : value === undefined ? [] : [String(value)]);

export function webhookRoutes(router: Router, deps: Deps): void {
  const validEndpoint = schemaValidator('WebhookEndpointCreate');
  const { db } = deps;

  const environmentOf = (req: Request, res: Response) => chosenEnvironment(db, req, res, { href: `${req.baseUrl}/webhooks`, text: 'Back to webhooks' });

  const notFoundPage = (req: Request, res: Response, environmentId: string, what: string) =>
    sendPage(res, 404, messagePage(pageContext(req, res), 'Not found', `There is no such ${what} in this environment.`, { href: webhooksHref(req.baseUrl, environmentId), text: 'Back to webhooks' }));

  const showList = async (req: Request, res: Response, status: number, extra: Partial<EndpointsPageData> = {}) => {
    const found = await environmentOf(req, res);
    if (!found) return;
    const { data: endpoints } = await webhooks.listEndpoints(deps, found.environment.id, { page: 0, limit: 100 });
    sendPage(
      res,
      status,
      endpointsPage(pageContext(req, res), { ...sessionOf(res)!, environments: found.environments, environmentId: found.environment.id, endpoints, eventTypes: EVENT_TYPES, ...extra }),
    );
  };

  const showEndpoint = async (req: Request, res: Response, status: number, extra: Partial<EndpointPageData> = {}) => {
    const found = await environmentOf(req, res);
    if (!found) return;
    const environmentId = found.environment.id;
    const endpointId = String(req.params.endpointId);
    const endpoint = await unlessNotFound(webhooks.getEndpoint(deps, environmentId, endpointId));
    if (!endpoint) return notFoundPage(req, res, environmentId, 'webhook endpoint');
    const statusFilter = DELIVERY_STATUSES.find((s) => s === req.query.status);
    const eventType = EVENT_TYPES.find((type) => type === req.query.eventType);
    const deliveries = await webhooks.listDeliveries(deps, environmentId, endpointId, { page: 0, limit: RECENT }, { status: statusFilter, eventType });
    sendPage(
      res,
      status,
      endpointPage(pageContext(req, res), {
        ...sessionOf(res)!,
        environments: found.environments,
        environmentId,
        endpoint,
        deliveries,
        filters: { status: statusFilter, eventType },
        eventTypes: EVENT_TYPES,
        ...extra,
      }),
    );
  };

  const NOTICES = new Map([
    ['test', 'A webhook.test event is on its way: it is listed below.'],
    ['retry', 'The delivery is due again now.'],
    ['enabled', 'The endpoint is enabled: Herald sends to it again.'],
    ['disabled', 'The endpoint is disabled: Herald sends nothing to it until it is enabled.'],
    ['deleted', 'The endpoint is deleted.'],
  ]);
  const noticeOf = (req: Request) => NOTICES.get(String(req.query.done));
  const back = (req: Request, res: Response, href: string, done: string) => res.redirect(303, `${href}&done=${done}`);

  router.get('/webhooks', requireSession, (req, res) => showList(req, res, 200, { notice: noticeOf(req) }));

  router.post('/webhooks', requireSession, requireCsrf, async (req, res) => {
    const found = await environmentOf(req, res);
    if (!found) return;
    const url = String(req.body?.url ?? '').trim();
    const description = String(req.body?.description ?? '').trim();
    const chosen = asList(req.body?.eventTypes);
    const eventTypes = EVENT_TYPES.filter((type) => chosen.includes(type));
    const draft = { url, description, eventTypes };
    if (!url) return showList(req, res, 422, { draft, error: 'Give the endpoint a URL.' });
    const endpoint = { url, ...(description ? { description } : {}), ...(eventTypes.length ? { eventTypes } : {}) };
    // What the API's router checks (a URL, its length, the description's) holds for the form too.
    if (!validEndpoint(endpoint)) {
      const [first] = validEndpoint.errors ?? [];
      return showList(req, res, 422, { draft, error: `The endpoint's ${first?.instancePath.slice(1) || 'fields'} ${first?.message ?? 'are not valid'}.` });
    }
    try {
      const created = await webhooks.createEndpoint(deps, found.environment.id, endpoint);
      // Answered here rather than redirected: the secret is shown in this response.
      await showList(req, res, 201, { created: { endpointId: created.endpointId, url: created.url, secret: created.secret } });
    } catch (err) {
      const refused = refusal(err);
      if (!refused) throw err;
      await showList(req, res, refused.status, { draft, error: refused.message });
    }
  });

  router.get('/webhooks/:endpointId', requireSession, (req, res) => showEndpoint(req, res, 200, { notice: noticeOf(req) }));

  /** A button on an endpoint's page: runs `act`, then back to the page with `done`, or the page with the refusal. */
  const endpointAction = (path: string, act: (environmentId: string, endpointId: string, req: Request) => Promise<string | Partial<EndpointPageData>>) =>
    router.post(`/webhooks/:endpointId/${path}`, requireSession, requireCsrf, async (req, res) => {
      const found = await environmentOf(req, res);
      if (!found) return;
      const environmentId = found.environment.id;
      const endpointId = String(req.params.endpointId);
      try {
        const outcome = await act(environmentId, endpointId, req);
        if (typeof outcome === 'string') {
          const href = outcome === 'deleted' ? webhooksHref(req.baseUrl, environmentId) : endpointHref(req.baseUrl, environmentId, endpointId);
          return back(req, res, href, outcome);
        }
        await showEndpoint(req, res, 200, outcome);
      } catch (err) {
        const refused = refusal(err);
        if (!refused) throw err;
        if (refused.status === 404) return notFoundPage(req, res, environmentId, 'webhook endpoint');
        await showEndpoint(req, res, refused.status, { error: refused.message });
      }
    });

  endpointAction('test', async (environmentId, endpointId) => {
    await webhooks.sendTest(deps, environmentId, endpointId);
    return 'test';
  });
  endpointAction('enable', async (environmentId, endpointId) => {
    await webhooks.updateEndpoint(deps, environmentId, endpointId, { disabled: false });
    return 'enabled';
  });
  endpointAction('disable', async (environmentId, endpointId) => {
    await webhooks.updateEndpoint(deps, environmentId, endpointId, { disabled: true });
    return 'disabled';
  });
  endpointAction('delete', async (environmentId, endpointId) => {
    await webhooks.deleteEndpoint(deps, environmentId, endpointId);
    return 'deleted';
  });
  // The secret is shown in the answer to a POST, never in a page a GET (or a history) can bring back.
  endpointAction('secret', async (environmentId, endpointId) => ({ secret: { ...(await webhooks.getSecret(deps, environmentId, endpointId)), rotated: false } }));
  endpointAction('rotate', async (environmentId, endpointId, req) => {
    const grace = Number(req.body?.gracePeriodSeconds);
    const secret = await webhooks.rotateSecret(deps, environmentId, endpointId, GRACE_CHOICES.has(grace) ? grace : webhooks.DEFAULT_GRACE_SECONDS);
    return { secret: { ...secret, rotated: true }, notice: 'The secret is rotated: deliveries are signed with the new one from now on.' };
  });

  router.post('/webhooks/deliveries/:deliveryId/retry', requireSession, requireCsrf, async (req, res) => {
    const found = await environmentOf(req, res);
    if (!found) return;
    const environmentId = found.environment.id;
    try {
      const delivery = await webhooks.retryDelivery(deps, environmentId, String(req.params.deliveryId));
      back(req, res, endpointHref(req.baseUrl, environmentId, delivery.endpointId), 'retry');
    } catch (err) {
      const refused = refusal(err);
      if (!refused) throw err;
      if (refused.status === 404) return notFoundPage(req, res, environmentId, 'webhook delivery');
      await showList(req, res, refused.status, { error: refused.message });
    }
  });
}
