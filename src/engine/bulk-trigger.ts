// POST /events/trigger/bulk: many triggers in one request, each answered on its own.
import type { Deps } from '../deps.js';
import type { Auth, Schemas } from '../contract.js';
import { ApiError } from '../errors.js';
import { recipientsOf, trigger } from './trigger.js';
import { bulkTriggerStore } from '../db/trigger-store.js';
import { groupsOf } from '../db/chunks.js';
import { newCheckBudget } from '../json-schema.js';
import { yieldToEventLoop } from '../turns.js';

type TriggerRequest = Schemas['TriggerRequest'];
type TriggerResult = Schemas['TriggerResult'];

/**
 * Events of one bulk request in progress at once: a quarter of the largest request. Commits are
 * shared across requests, so many requests in flight still commit together, while each holds only
 * a quarter of its events in memory.
 */
const BULK_EVENTS_AT_ONCE = 25;
/**
 * Recipients of one bulk request in progress at once: their writes share a commit, which SQLite
 * makes on the event loop, so 25 events of 100 inline subscribers each held it for hundreds of ms.
 * An event with more recipients runs alone.
 */
const BULK_RECIPIENTS_AT_ONCE = 100;

/** The events in parts of at most BULK_EVENTS_AT_ONCE events and BULK_RECIPIENTS_AT_ONCE recipients. */
function partsOf(events: TriggerRequest[]): TriggerRequest[][] {
  return groupsOf(events, (event) => (Array.isArray(event.to) ? event.to.length : 1), BULK_RECIPIENTS_AT_ONCE, BULK_EVENTS_AT_ONCE);
}

/**
 * Each event on its own: one that would be rejected alone is answered `error` in its place. They
 * are checked side by side, a few at a time, so that their writes share commits (on SQLite,
 * db/group-commit.ts) or statements (on PostgreSQL, db/new-events.ts) and the subscribers they
 * name are read together (bulkTriggerStore); each workflow is read once for the whole request.
 * Only an event that depends on an earlier one (a subscriber it gives inline) waits for it.
 */
export async function triggerBulk(deps: Deps, auth: Auth, events: TriggerRequest[]): Promise<TriggerResult[]> {
  const store = bulkTriggerStore(deps.db, auth.environmentId);
  // One budget for the whole request's payload checks: a bulk request costs what one trigger may.
  const budget = newCheckBudget();
  const checked = async (event: TriggerRequest): Promise<TriggerResult> => {
    try {
      return await trigger(deps, auth, event, store, budget);
    } catch (err) {
      if (!(err instanceof ApiError) || err.status >= 500) throw err;
      const reasons = err.details?.map((detail) => `${detail.field.replace(/^body\//, '')} ${detail.message}`) ?? [err.message];
      return { acknowledged: true, status: 'error', error: reasons };
    }
  };
  // In order where order shows: an event starts once the earlier events it depends on are done. It
  // depends on the last one that gave inline a subscriber it names or gives (so it finds the
  // subscriber, or updates it last), and on the last one with its transactionId (so the first
  // keeps the id and the later one is refused, as two requests in turn would be).
  const lastWith = new Map<string, Promise<unknown>>();
  const one = (event: TriggerRequest): Promise<TriggerResult> => {
    const { named, inline } = recipientsOf(event);
    const given = inline.map(({ subscriber }) => `subscriber ${subscriber.subscriberId}`);
    const transaction = event.transactionId === undefined ? [] : [`transaction ${event.transactionId}`];
    const dependsOn = [...[...named.keys()].map((id) => `subscriber ${id}`), ...given, ...transaction];
    const earlier = dependsOn.flatMap((key) => lastWith.get(key) ?? []);
    const result = earlier.length > 0 ? Promise.all(earlier).then(() => checked(event)) : checked(event);
    for (const key of [...given, ...transaction]) lastWith.set(key, result.catch(() => undefined));
    return result;
  };
  const results: TriggerResult[] = [];
  for (const [i, part] of partsOf(events).entries()) {
    // With an Idempotency-Key the request is one transaction, and on SQLite its statements run on
    // the event loop: each part gives the loop back before it begins, as a fan-out's slices do.
    if (i > 0) await yieldToEventLoop();
    results.push(...(await Promise.all(part.map(one))));
  }
  return results;
}
