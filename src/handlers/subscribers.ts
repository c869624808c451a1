import type { OperationHandler } from '../http/types.js';
import { pageRequest } from '../db/paginate.js';
import * as repo from '../db/repos/subscribers.js';
import * as subscribers from '../engine/subscribers.js';

export const listSubscribers: OperationHandler<'listSubscribers'> = async ({ query, auth, deps, reserve }) => ({
  status: 200,
  body: await repo.listSubscribers(deps.db, auth.environmentId, pageRequest(query, reserve)),
});

export const createSubscriber: OperationHandler<'createSubscriber'> = async ({ body, auth, deps }) => ({
  status: 201,
  body: { data: await subscribers.createSubscriber(deps, auth.environmentId, body) },
});

export const getSubscriber: OperationHandler<'getSubscriber'> = async ({ params, query, auth, deps }) => ({
  status: 200,
  body: { data: await subscribers.getSubscriber(deps, auth.environmentId, params.subscriberId, query.includeTopics) },
});

export const updateSubscriber: OperationHandler<'updateSubscriber'> = async ({ params, body, auth, deps }) => ({
  status: 200,
  body: { data: await subscribers.updateSubscriber(deps, auth.environmentId, params.subscriberId, body) },
});

export const deleteSubscriber: OperationHandler<'deleteSubscriber'> = async ({ params, auth, deps }) => {
  await subscribers.deleteSubscriber(deps, auth.environmentId, params.subscriberId);
  return { status: 200, body: { data: { acknowledged: true, status: 'deleted' } } };
};
