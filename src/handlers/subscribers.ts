import type { OperationHandler } from '../http/types.js';
import { conflict, notFound, unprocessable } from '../errors.js';
import { isUniqueViolation } from '../db/errors.js';
import { pageRequest } from '../db/paginate.js';
import * as repo from '../db/repos/subscribers.js';

/** IANA names only: Intl knows them all (and their aliases), and rejects anything else. */
function checkTimezone(timezone: string | null | undefined): void {
  if (!timezone) return;
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: timezone });
  } catch {
    throw unprocessable(`timezone ${timezone} is not an IANA time zone`, [
      { field: 'body/timezone', message: `${timezone} is not an IANA time zone` },
    ]);
  }
}

const missing = (subscriberId: string) => notFound(`Subscriber ${subscriberId} not found`);

export const listSubscribers: OperationHandler<'listSubscribers'> = async ({ query, auth, deps }) => ({
  status: 200,
  body: await repo.listSubscribers(deps.db, auth.environmentId, pageRequest(query)),
});

export const createSubscriber: OperationHandler<'createSubscriber'> = async ({ body, auth, deps }) => {
  checkTimezone(body.timezone);
  try {
    await repo.insertSubscriber(deps.db, auth.environmentId, body, deps.clock.now());
  } catch (err) {
    if (isUniqueViolation(err)) throw conflict(`Subscriber ${body.subscriberId} already exists`);
    throw err;
  }
  return { status: 201, body: { data: (await repo.findSubscriber(deps.db, auth.environmentId, body.subscriberId))! } };
};

export const getSubscriber: OperationHandler<'getSubscriber'> = async ({ params, query, auth, deps }) => {
  const subscriber = await repo.findSubscriber(deps.db, auth.environmentId, params.subscriberId);
  if (!subscriber) throw missing(params.subscriberId);
  if (query.includeTopics) subscriber.topics = await repo.topicKeysOf(deps.db, auth.environmentId, params.subscriberId);
  return { status: 200, body: { data: subscriber } };
};

export const updateSubscriber: OperationHandler<'updateSubscriber'> = async ({ params, body, auth, deps }) => {
  checkTimezone(body.timezone);
  if (!(await repo.updateSubscriber(deps.db, auth.environmentId, params.subscriberId, body, deps.clock.now()))) {
    throw missing(params.subscriberId);
  }
  return { status: 200, body: { data: (await repo.findSubscriber(deps.db, auth.environmentId, params.subscriberId))! } };
};

export const deleteSubscriber: OperationHandler<'deleteSubscriber'> = async ({ params, auth, deps }) => {
  if (!(await repo.deleteSubscriber(deps.db, auth.environmentId, params.subscriberId))) throw missing(params.subscriberId);
  return { status: 200, body: { data: { acknowledged: true, status: 'deleted' } } };
};
