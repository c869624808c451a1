import type { OperationHandler } from '../http/types.js';
import { pageRequest } from '../db/paginate.js';
import { listFeed, markFeedMessage } from '../engine/messages.js';

export const listSubscriberMessages: OperationHandler<'listSubscriberMessages'> = async ({ params, query, auth, deps, reserve }) => ({
  status: 200,
  body: await listFeed(deps, auth.environmentId, params.subscriberId, pageRequest(query, reserve), query),
});

export const updateSubscriberMessage: OperationHandler<'updateSubscriberMessage'> = async ({ params, body, auth, deps }) => ({
  status: 200,
  body: { data: await markFeedMessage(deps, auth.environmentId, params.subscriberId, params.messageId, body) },
});
