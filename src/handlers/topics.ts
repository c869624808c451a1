import type { OperationHandler } from '../http/types.js';
import { pageRequest } from '../db/paginate.js';
import * as repo from '../db/repos/topics.js';
import * as topics from '../engine/topics.js';

export const listTopics: OperationHandler<'listTopics'> = async ({ query, auth, deps }) => ({
  status: 200,
  body: await repo.listTopics(deps.db, auth.environmentId, pageRequest(query), query?.key),
});

export const createTopic: OperationHandler<'createTopic'> = async ({ body, auth, deps }) => ({
  status: 201,
  body: { data: await topics.createTopic(deps, auth.environmentId, body) },
});

export const getTopic: OperationHandler<'getTopic'> = async ({ params, auth, deps }) => ({
  status: 200,
  body: { data: await topics.getTopic(deps, auth.environmentId, params.topicKey) },
});

export const deleteTopic: OperationHandler<'deleteTopic'> = async ({ params, auth, deps }) => {
  await topics.deleteTopic(deps, auth.environmentId, params.topicKey);
  return { status: 204, body: undefined };
};

export const listTopicSubscribers: OperationHandler<'listTopicSubscribers'> = async ({ params, query, auth, deps }) => ({
  status: 200,
  body: await topics.listTopicMembers(deps, auth.environmentId, params.topicKey, pageRequest(query)),
});

export const addTopicSubscribers: OperationHandler<'addTopicSubscribers'> = async ({ params, body, auth, deps }) => ({
  status: 200,
  body: { data: await topics.addTopicMembers(deps, auth.environmentId, params.topicKey, body.subscribers) },
});

export const removeTopicSubscribers: OperationHandler<'removeTopicSubscribers'> = async ({ params, body, auth, deps }) => ({
  status: 200,
  body: { data: await topics.removeTopicMembers(deps, auth.environmentId, params.topicKey, body.subscribers) },
});
