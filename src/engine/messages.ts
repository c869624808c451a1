// A subscriber's in-app feed as the API reads and marks it: every route answers 404 for an
// unknown subscriber before it looks at the messages.
import type { Deps } from '../deps.js';
import type { Body, QueryParams } from '../contract.js';
import { notFound } from '../errors.js';
import type { Page, PageRequest } from '../db/paginate.js';
import * as repo from '../db/repos/messages.js';
import { existingSubscriberKey } from './subscribers.js';
import { writeTransaction } from '../db/group-commit.js';
import { changeInboxMessage } from './inbox.js';

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

/**
 * Marks one message of the subscriber's feed seen or read, and answers it as it is now: the same
 * change as the inbox's (engine/inbox.ts), so the counts and every open inbox stream follow.
 */
export async function markFeedMessage(
  deps: Deps,
  environmentId: string,
  subscriberId: string,
  messageId: string,
  change: Body<'updateSubscriberMessage'>,
): Promise<repo.InAppMessage> {
  const key = await existingSubscriberKey(deps.db, environmentId, subscriberId);
  const now = deps.clock.now();
  // The mark, its counts and inbox event, and the webhook events it makes (message.seen,
  // message.read) commit together (changeInboxMessage).
  const changed = await writeTransaction(deps.db, async (trx) => {
    return (await changeInboxMessage(trx, environmentId, key, messageId, { seen: change.seen, read: change.read }, now)) !== undefined;
  });
  if (!changed) throw notFound(`Message ${messageId} not found in the feed of ${subscriberId}`);
  return (await repo.findMessage(deps.db, key, messageId))!;
}

