import type { OperationHandler } from '../http/types.js';
import { pageRequest } from '../db/paginate.js';
import * as webhooks from '../engine/webhooks.js';

export const listWebhookEndpoints: OperationHandler<'listWebhookEndpoints'> = async ({ query, auth, deps }) => ({
  status: 200,
  body: await webhooks.listEndpoints(deps, auth.environmentId, pageRequest(query)),
});

export const createWebhookEndpoint: OperationHandler<'createWebhookEndpoint'> = async ({ body, auth, deps }) => ({
  status: 201,
  body: { data: await webhooks.createEndpoint(deps, auth.environmentId, body) },
});

export const getWebhookEndpoint: OperationHandler<'getWebhookEndpoint'> = async ({ params, auth, deps }) => ({
  status: 200,
  body: { data: await webhooks.getEndpoint(deps, auth.environmentId, params.endpointId) },
});

export const updateWebhookEndpoint: OperationHandler<'updateWebhookEndpoint'> = async ({ params, body, auth, deps }) => ({
  status: 200,
  body: { data: await webhooks.updateEndpoint(deps, auth.environmentId, params.endpointId, body) },
});

export const deleteWebhookEndpoint: OperationHandler<'deleteWebhookEndpoint'> = async ({ params, auth, deps }) => {
  await webhooks.deleteEndpoint(deps, auth.environmentId, params.endpointId);
  return { status: 204, body: undefined };
};

export const getWebhookEndpointSecret: OperationHandler<'getWebhookEndpointSecret'> = async ({ params, auth, deps }) => ({
  status: 200,
  body: { data: await webhooks.getSecret(deps, auth.environmentId, params.endpointId) },
});

export const rotateWebhookEndpointSecret: OperationHandler<'rotateWebhookEndpointSecret'> = async ({ params, body, auth, deps }) => ({
  status: 200,
  body: { data: await webhooks.rotateSecret(deps, auth.environmentId, params.endpointId, body?.gracePeriodSeconds) },
});

export const testWebhookEndpoint: OperationHandler<'testWebhookEndpoint'> = async ({ params, auth, deps }) => ({
  status: 200,
  body: { data: await webhooks.sendTest(deps, auth.environmentId, params.endpointId) },
});

export const listWebhookDeliveries: OperationHandler<'listWebhookDeliveries'> = async ({ params, query, auth, deps }) => ({
  status: 200,
  body: await webhooks.listDeliveries(deps, auth.environmentId, params.endpointId, pageRequest(query), { status: query?.status, eventType: query?.eventType }),
});

export const retryWebhookDelivery: OperationHandler<'retryWebhookDelivery'> = async ({ params, auth, deps }) => ({
  status: 200,
  body: { data: await webhooks.retryDelivery(deps, auth.environmentId, params.deliveryId) },
});

export const recoverWebhookEndpoint: OperationHandler<'recoverWebhookEndpoint'> = async ({ params, body, auth, deps }) => ({
  status: 200,
  body: { data: { queued: await webhooks.recoverEndpoint(deps, auth.environmentId, params.endpointId, body.since, body.until) } },
});
