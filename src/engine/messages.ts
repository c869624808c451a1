// A subscriber's in-app feed as the API reads and marks it: every route answers 404 for an
// unknown subscriber before it looks at the messages.
import type { Deps } from '../deps.js';
import type { Body, QueryParams } from '../contract.js';
import { notFound } from '../errors.js';
import type { Page, PageRequest } from '../db/paginate.js';
import * as repo from '../db/repos/messages.js';
import { existingSubscriberKey } from './subscribers.js';
import { recordMessageChange, type MessageState } from './webhook-events.js';

export async function listFeed(
  deps: Deps,
  environmentId: string,
  subscriberId: string,
  page: PageRequest,
  filters: Pick<QueryParams<'listSubscriberMessages'>, 'read' | 'seen'>,
): Promise<Page<repo.InAppMessage>> {
  const key = await existingSubscriberKey(deps.db, environmentId, subscriberId);
  return repo.listMessages(deps.db, key, page, { read: filters.read, seen: filters.seen });
}

/** Marks one message of the subscriber's feed seen or read, and answers it as it is now. */
export async function markFeedMessage(
  deps: Deps,
  environmentId: string,
  subscriberId: string,
  messageId: string,
  change: Body<'updateSubscriberMessage'>,
): Promise<repo.InAppMessage> {
  const key = await existingSubscriberKey(deps.db, environmentId, subscriberId);
  const now = deps.clock.now();
  // The mark and the webhook events it makes (message.seen, message.read) commit together.
  return deps.db.transaction(async (trx) => {
    const before = await repo.findMessage(trx, key, messageId);
    if (!before) throw notFound(`Message ${messageId} not found in the feed of ${subscriberId}`);
    await repo.markMessage(trx, key, messageId, change, now);
    const after = (await repo.findMessage(trx, key, messageId))!;
    await recordMessageChange(trx, environmentId, state(before), state(after), now);
    return after;
  });
}

function state(message: repo.InAppMessage): MessageState {
  return { ...message, workflowId: message.workflowId };
}
