import type { OperationHandler } from '../http/types.js';
import { notFound } from '../errors.js';
import { pageRequest } from '../db/paginate.js';
import { subscriberKey } from '../db/repos/subscribers.js';
import * as repo from '../db/repos/messages.js';
import type { Deps } from '../deps.js';

async function keyOf(deps: Deps, environmentId: string, subscriberId: string): Promise<string> {
  const key = await subscriberKey(deps.db, environmentId, subscriberId);
  if (!key) throw notFound(`Subscriber ${subscriberId} not found`);
  return key;
}

export const listSubscriberMessages: OperationHandler<'listSubscriberMessages'> = async ({ params, query, auth, deps }) => {
  const key = await keyOf(deps, auth.environmentId, params.subscriberId);
  return { status: 200, body: await repo.listMessages(deps.db, key, pageRequest(query), { read: query.read, seen: query.seen }) };
};

export const updateSubscriberMessage: OperationHandler<'updateSubscriberMessage'> = async ({ params, body, auth, deps }) => {
  const key = await keyOf(deps, auth.environmentId, params.subscriberId);
  if (!(await repo.markMessage(deps.db, key, params.messageId, body, deps.clock.now()))) {
    throw notFound(`Message ${params.messageId} not found in the feed of ${params.subscriberId}`);
  }
  return { status: 200, body: { data: (await repo.findMessage(deps.db, key, params.messageId))! } };
};
