// Topics as the API changes them: a key taken answers 409, an unknown topic 404, and members are
// added or removed by subscriberId, the unknown ones listed rather than refused.
import type { Deps } from '../deps.js';
import type { Body, Schemas } from '../contract.js';
import { ApiError, conflict, notFound } from '../errors.js';
import { isUniqueViolation } from '../db/errors.js';
import type { Page, PageRequest } from '../db/paginate.js';
import * as repo from '../db/repos/topics.js';

export const topicNotFound = (topicKey: string) => notFound(`Topic ${topicKey} not found`);

type MembershipResult = Schemas['TopicSubscribersResultResponse']['data'];

async function topicRow(deps: Deps, environmentId: string, topicKey: string): Promise<repo.TopicRow> {
  const row = await repo.findTopicRow(deps.db, environmentId, topicKey);
  if (!row) throw topicNotFound(topicKey);
  return row;
}

export async function createTopic(deps: Deps, environmentId: string, body: Body<'createTopic'>): Promise<repo.Topic> {
  // The schema's oneOf makes sure exactly one of the two names is there.
  const topicKey = (body.topicKey ?? body.key)!;
  try {
    await repo.insertTopic(deps.db, environmentId, { topicKey, name: body.name }, deps.clock.now());
  } catch (err) {
    if (isUniqueViolation(err)) throw conflict(`Topic ${topicKey} already exists`);
    throw err;
  }
  return (await repo.findTopic(deps.db, environmentId, topicKey))!;
}

/** How long a client told a topic's fan-out is under way waits before it asks again, in seconds. */
const FANOUT_RETRY_AFTER_SECONDS = 5;

/**
 * Deletes a topic and its memberships, unless a fan-out of it is under way: that reads the members
 * as it goes, so deleting them would lose the rest of an acknowledged trigger (409, Retry-After).
 */
export async function deleteTopic(deps: Deps, environmentId: string, topicKey: string): Promise<void> {
  await deps.db.transaction(async (trx) => {
    const topicId = await repo.holdTopicForDelete(trx, environmentId, topicKey);
    if (!topicId) throw topicNotFound(topicKey);
    const fanouts = await repo.fanoutsOfTopic(trx, environmentId, topicId);
    if (fanouts > 0) {
      const message = `Topic ${topicKey} is being fanned out to (${fanouts} fan-out${fanouts === 1 ? '' : 's'} under way, reading its members as they go): delete it once they end`;
      throw new ApiError(409, message, undefined, { 'Retry-After': String(FANOUT_RETRY_AFTER_SECONDS) });
    }
    await repo.deleteTopic(trx, topicId);
  });
}

export async function getTopic(deps: Deps, environmentId: string, topicKey: string): Promise<repo.Topic> {
  const topic = await repo.findTopic(deps.db, environmentId, topicKey);
  if (!topic) throw topicNotFound(topicKey);
  return topic;
}

export async function listTopicMembers(deps: Deps, environmentId: string, topicKey: string, page: PageRequest): Promise<Page<repo.TopicMember>> {
  const topic = await topicRow(deps, environmentId, topicKey);
  return repo.listMembers(deps.db, topic.id, page);
}

/** Applies `write` to the subscribers that exist; the others are answered as not found. */
async function changeMembers(deps: Deps, environmentId: string, topicKey: string, subscriberIds: string[], write: typeof repo.addMembers): Promise<MembershipResult> {
  const topic = await topicRow(deps, environmentId, topicKey);
  const { found, notFound: unknown } = await repo.resolveSubscribers(deps.db, environmentId, subscriberIds);
  if (found.size > 0) await write(deps.db, topic.id, [...found.values()], deps.clock.now());
  return { succeeded: [...found.keys()], failed: { notFound: unknown } };
}

export const addTopicMembers = (deps: Deps, environmentId: string, topicKey: string, subscriberIds: string[]) =>
  changeMembers(deps, environmentId, topicKey, subscriberIds, repo.addMembers);

export const removeTopicMembers = (deps: Deps, environmentId: string, topicKey: string, subscriberIds: string[]) =>
  changeMembers(deps, environmentId, topicKey, subscriberIds, repo.removeMembers);
