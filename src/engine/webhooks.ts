// Webhook endpoints as the API and the dashboard manage them: create (with a new secret), change,
// delete, show and rotate the secret, send a test event, retry a delivery, recover failed ones.
// Every change to which endpoints take which events tells the outbox's memory of them
// (subscriptionsChanged), in its own transaction.
import { randomBytes } from 'node:crypto';
import type { Deps } from '../deps.js';
import { notFound, unprocessable } from '../errors.js';
import { urlProblem } from '../outbound-guard.js';
import type { Page, PageRequest } from '../db/paginate.js';
import * as endpoints from '../db/repos/webhook-endpoints.js';
import * as deliveries from '../db/repos/webhook-deliveries.js';
import { subscriptionsChanged } from '../db/webhook-subscriptions.js';
import { newEventId, webhookBody } from './webhook-events.js';

export type { WebhookEndpoint } from '../db/repos/webhook-endpoints.js';
export type { WebhookDelivery, DeliveryFilters } from '../db/repos/webhook-deliveries.js';

/** Secrets are 32 random bytes (Standard Webhooks asks for 24 to 64). */
const SECRET_BYTES = 32;
export const DEFAULT_GRACE_SECONDS = 86_400;

export function newSecret(): string {
  return `whsec_${randomBytes(SECRET_BYTES).toString('base64')}`;
}

const endpointNotFound = (endpointId: string) => notFound(`Webhook endpoint ${endpointId} not found`);

function checkUrl(deps: Deps, url: string | undefined): void {
  if (url === undefined) return;
  const problem = urlProblem(url, deps.config.outbound.allowedNetworks);
  if (problem) throw unprocessable('The webhook endpoint URL cannot be used', [{ field: 'body/url', message: problem }]);
}

export async function createEndpoint(deps: Deps, environmentId: string, body: endpoints.NewEndpoint): Promise<endpoints.WebhookEndpoint & { secret: string }> {
  checkUrl(deps, body.url);
  const secret = newSecret();
  const endpoint = await deps.db.transaction(async (trx) => {
    const created = await endpoints.insertEndpoint(trx, environmentId, body, secret, deps.config.secret, deps.clock.now());
    await subscriptionsChanged(trx, environmentId);
    return created;
  });
  return { ...endpoint, secret };
}

export function listEndpoints(deps: Deps, environmentId: string, page: PageRequest): Promise<Page<endpoints.WebhookEndpoint>> {
  return endpoints.listEndpoints(deps.db, environmentId, page);
}

export async function getEndpoint(deps: Deps, environmentId: string, endpointId: string): Promise<endpoints.WebhookEndpoint> {
  return (await endpoints.findEndpoint(deps.db, environmentId, endpointId)) ?? Promise.reject(endpointNotFound(endpointId));
}

export async function updateEndpoint(deps: Deps, environmentId: string, endpointId: string, change: endpoints.EndpointChange): Promise<endpoints.WebhookEndpoint> {
  checkUrl(deps, change.url);
  return deps.db.transaction(async (trx) => {
    if (!(await endpoints.updateEndpoint(trx, environmentId, endpointId, change, deps.clock.now()))) throw endpointNotFound(endpointId);
    await subscriptionsChanged(trx, environmentId);
    return (await endpoints.findEndpoint(trx, environmentId, endpointId))!;
  });
}

export async function deleteEndpoint(deps: Deps, environmentId: string, endpointId: string): Promise<void> {
  await deps.db.transaction(async (trx) => {
    if (!(await endpoints.deleteEndpoint(trx, environmentId, endpointId))) throw endpointNotFound(endpointId);
    await subscriptionsChanged(trx, environmentId);
  });
}

export interface SecretView {
  secret: string;
  previousSecretExpiresAt?: string;
}

export async function getSecret(deps: Deps, environmentId: string, endpointId: string): Promise<SecretView> {
  const secrets = await endpoints.endpointSecrets(deps.db, environmentId, endpointId, deps.config.secret);
  if (!secrets) throw endpointNotFound(endpointId);
  const view: SecretView = { secret: secrets.secret };
  if (secrets.previousExpiresAt && secrets.previousExpiresAt > deps.clock.now().toISOString()) view.previousSecretExpiresAt = secrets.previousExpiresAt;
  return view;
}

/** A new secret; the current one signs too for `gracePeriodSeconds` (none when 0). */
export async function rotateSecret(deps: Deps, environmentId: string, endpointId: string, gracePeriodSeconds = DEFAULT_GRACE_SECONDS): Promise<SecretView> {
  const now = deps.clock.now();
  const secret = newSecret();
  const until = gracePeriodSeconds > 0 ? new Date(now.getTime() + gracePeriodSeconds * 1000) : undefined;
  if (!(await endpoints.rotateSecret(deps.db, environmentId, endpointId, secret, until, deps.config.secret, now))) throw endpointNotFound(endpointId);
  return until ? { secret, previousSecretExpiresAt: until.toISOString() } : { secret };
}

/** Queues a `webhook.test` event for this endpoint alone, and answers its delivery. */
export async function sendTest(deps: Deps, environmentId: string, endpointId: string): Promise<deliveries.WebhookDelivery> {
  const now = deps.clock.now();
  const id = await deps.db.transaction(async (trx) => {
    if (!(await endpoints.findEndpoint(trx, environmentId, endpointId))) throw endpointNotFound(endpointId);
    const payload = webhookBody('webhook.test', environmentId, { endpointId, message: 'A test event from Herald' }, now);
    const [written] = await deliveries.insertDeliveries(trx, [{ environmentId, endpointId, eventId: newEventId(now), eventType: 'webhook.test', payload }], now);
    return written;
  });
  return (await deliveries.findDelivery(deps.db, environmentId, id))!;
}

export async function listDeliveries(
  deps: Deps,
  environmentId: string,
  endpointId: string,
  page: PageRequest,
  filters: deliveries.DeliveryFilters,
): Promise<Page<deliveries.WebhookDelivery>> {
  if (!(await endpoints.findEndpoint(deps.db, environmentId, endpointId))) throw endpointNotFound(endpointId);
  return deliveries.listDeliveries(deps.db, environmentId, endpointId, page, filters);
}

/** Sends a delivery again now (its endpoint must be enabled), and answers it. */
export async function retryDelivery(deps: Deps, environmentId: string, deliveryId: string): Promise<deliveries.WebhookDelivery> {
  const found = await deliveries.findDelivery(deps.db, environmentId, deliveryId);
  if (!found) throw notFound(`Webhook delivery ${deliveryId} not found`);
  const endpoint = await endpoints.findEndpoint(deps.db, environmentId, found.endpointId);
  if (endpoint?.disabled && found.eventType !== 'webhook.test') throw unprocessable(`Webhook endpoint ${found.endpointId} is disabled: enable it first`);
  await deps.db.transaction((trx) => deliveries.retryDelivery(trx, environmentId, deliveryId, deps.clock.now()));
  return (await deliveries.findDelivery(deps.db, environmentId, deliveryId))!;
}

/** Every failed delivery of the endpoint's events created in [since, until) is due again; answers how many. */
export async function recoverEndpoint(deps: Deps, environmentId: string, endpointId: string, since: string, until?: string): Promise<number> {
  const endpoint = await endpoints.findEndpoint(deps.db, environmentId, endpointId);
  if (!endpoint) throw endpointNotFound(endpointId);
  if (endpoint.disabled) throw unprocessable(`Webhook endpoint ${endpointId} is disabled: enable it first`);
  const now = deps.clock.now();
  const from = new Date(since);
  // Without `until`, everything since `since`, this very millisecond's included.
  const to = until ? new Date(until) : new Date(now.getTime() + 1);
  if (Number.isNaN(from.getTime()) || Number.isNaN(to.getTime())) throw unprocessable('since and until must be times');
  if (until && to <= from) throw unprocessable('until must be after since');
  return deps.db.transaction((trx) => deliveries.recoverDeliveries(trx, endpointId, from.toISOString(), to.toISOString(), now));
}
