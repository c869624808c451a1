import type { OperationHandler } from '../http/types.js';
import type { Db } from '../db/knex.js';
import { conflict, notFound } from '../errors.js';
import { isUniqueViolation } from '../db/errors.js';
import { pageRequest } from '../db/paginate.js';
import * as repo from '../db/repos/topics.js';

const missing = (topicKey: string) => notFound(`Topic ${topicKey} not found`);

async function topicRow(db: Db, environmentId: string, topicKey: string): Promise<repo.TopicRow> {
  const row = await repo.findTopicRow(db, environmentId, topicKey);
  if (!row) throw missing(topicKey);
  return row;
}

export const listTopics: OperationHandler<'listTopics'> = async ({ query, auth, deps }) => ({
  status: 200,
  body: await repo.listTopics(deps.db, auth.environmentId, pageRequest(query), query?.key),
});

export const createTopic: OperationHandler<'createTopic'> = async ({ body, auth, deps }) => {
  // The schema's oneOf makes sure exactly one of the two names is there.
  const topicKey = (body.topicKey ?? body.key)!;
  try {
    await repo.insertTopic(deps.db, auth.environmentId, { topicKey, name: body.name }, deps.clock.now());
  } catch (err) {
    if (isUniqueViolation(err)) throw conflict(`Topic ${topicKey} already exists`);
    throw err;
  }
  return { status: 201, body: { data: (await repo.findTopic(deps.db, auth.environmentId, topicKey))! } };
};

export const getTopic: OperationHandler<'getTopic'> = async ({ params, auth, deps }) => {
  const topic = await repo.findTopic(deps.db, auth.environmentId, params.topicKey);
  if (!topic) throw missing(params.topicKey);
  return { status: 200, body: { data: topic } };
};

export const deleteTopic: OperationHandler<'deleteTopic'> = async ({ params, auth, deps }) => {
  if (!(await repo.deleteTopic(deps.db, auth.environmentId, params.topicKey))) throw missing(params.topicKey);
  return { status: 204, body: undefined };
};

export const listTopicSubscribers: OperationHandler<'listTopicSubscribers'> = async ({ params, query, auth, deps }) => {
  const topic = await topicRow(deps.db, auth.environmentId, params.topicKey);
  return { status: 200, body: await repo.listMembers(deps.db, topic.id, pageRequest(query)) };
};

export const addTopicSubscribers: OperationHandler<'addTopicSubscribers'> = async ({ params, body, auth, deps }) => {
  const topic = await topicRow(deps.db, auth.environmentId, params.topicKey);
  const { found, notFound: unknown } = await repo.resolveSubscribers(deps.db, auth.environmentId, body.subscribers);
  if (found.size > 0) await repo.addMembers(deps.db, topic.id, [...found.values()], deps.clock.now());
  return { status: 200, body: { data: { succeeded: [...found.keys()], failed: { notFound: unknown } } } };
};

export const removeTopicSubscribers: OperationHandler<'removeTopicSubscribers'> = async ({ params, body, auth, deps }) => {
  const topic = await topicRow(deps.db, auth.environmentId, params.topicKey);
  const { found, notFound: unknown } = await repo.resolveSubscribers(deps.db, auth.environmentId, body.subscribers);
  if (found.size > 0) await repo.removeMembers(deps.db, topic.id, [...found.values()], deps.clock.now());
  return { status: 200, body: { data: { succeeded: [...found.keys()], failed: { notFound: unknown } } } };
};
