// Subscribers as the API changes them: profile checks, the 404 every subscriber route answers, and
// the 409 of a subscriberId taken.
import type { Deps } from '../deps.js';
import type { Body, ErrorDetail } from '../contract.js';
import { conflict, notFound, unprocessable } from '../errors.js';
import { isUniqueViolation } from '../db/errors.js';
import type { Db } from '../db/knex.js';
import * as repo from '../db/repos/subscribers.js';

export const subscriberNotFound = (subscriberId: string) => notFound(`Subscriber ${subscriberId} not found`);

/** The internal id of a subscriber that must exist: a 404 when it does not. */
export async function existingSubscriberKey(db: Db, environmentId: string, subscriberId: string): Promise<string> {
  const key = await repo.subscriberKey(db, environmentId, subscriberId);
  if (!key) throw subscriberNotFound(subscriberId);
  return key;
}

/** IANA names only: Intl knows them all (and their aliases), and rejects anything else. `field` is the subscriber's path. */
export function timezoneProblem(timezone: string | null | undefined, field: string): ErrorDetail | undefined {
  if (!timezone) return undefined;
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: timezone });
    return undefined;
  } catch {
    return { field: `${field}/timezone`, message: `${timezone} is not an IANA time zone` };
  }
}

function checkTimezone(timezone: string | null | undefined): void {
  const problem = timezoneProblem(timezone, 'body');
  if (problem) throw unprocessable(`timezone ${timezone} is not an IANA time zone`, [problem]);
}

export async function createSubscriber(deps: Deps, environmentId: string, input: Body<'createSubscriber'>): Promise<repo.Subscriber> {
  checkTimezone(input.timezone);
  try {
    await repo.insertSubscriber(deps.db, environmentId, input, deps.clock.now());
  } catch (err) {
    if (isUniqueViolation(err)) throw conflict(`Subscriber ${input.subscriberId} already exists`);
    throw err;
  }
  return (await repo.findSubscriber(deps.db, environmentId, input.subscriberId, true))!;
}

/** The subscriber, with the keys of its topics when asked. */
export async function getSubscriber(deps: Deps, environmentId: string, subscriberId: string, includeTopics?: boolean): Promise<repo.Subscriber> {
  const subscriber = await repo.findSubscriber(deps.db, environmentId, subscriberId, true);
  if (!subscriber) throw subscriberNotFound(subscriberId);
  if (includeTopics) subscriber.topics = await repo.topicKeysOf(deps.db, environmentId, subscriberId);
  return subscriber;
}

export async function updateSubscriber(
  deps: Deps,
  environmentId: string,
  subscriberId: string,
  patch: Body<'updateSubscriber'>,
): Promise<repo.Subscriber> {
  checkTimezone(patch.timezone);
  if (!(await repo.updateSubscriber(deps.db, environmentId, subscriberId, patch, deps.clock.now()))) throw subscriberNotFound(subscriberId);
  return (await repo.findSubscriber(deps.db, environmentId, subscriberId, true))!;
}

export async function deleteSubscriber(deps: Deps, environmentId: string, subscriberId: string): Promise<void> {
  if (!(await repo.deleteSubscriber(deps.db, environmentId, subscriberId))) throw subscriberNotFound(subscriberId);
}
