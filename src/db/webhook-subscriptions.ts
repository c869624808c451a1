// Which endpoints of an environment take which webhook events, remembered per process: every
// state change asks, and nearly every environment has no endpoint, so the answer costs a map
// lookup instead of a query inside the change's transaction.
//
// A change to an environment's endpoints forgets its entry here at once (forgetSubscriptions), and
// in every other process: on PostgreSQL through NOTIFY, sent in the change's own transaction (so it
// is delivered when it commits) to each process LISTENing (listenForSubscriptionChanges). A read
// that raced a change to any environment's endpoints is not remembered (changes are rare, so one
// count of them serves every environment). The entries also expire (SUBSCRIPTIONS_TTL_MS), in case a notification is missed while a listening
// connection reconnects.
import type { Knex } from 'knex';
import type { Db, Runner } from './knex.js';
import { isPostgres } from './knex.js';
import { subscriptionsOf, type Subscription } from './repos/webhook-endpoints.js';
import { BoundedMap } from '../bounded-map.js';
import { listenOn } from './pg-listen.js';

export const SUBSCRIPTIONS_TTL_MS = 5_000;
const MAX_ENTRIES = 10_000;
const CHANNEL = 'herald_webhook_endpoints';

interface Entry {
  subscriptions: Subscription[];
  expiresAt: number;
}

// Environment ids are unique across databases, so one map serves every database of the process.
const entries = new BoundedMap<string, Entry>(MAX_ENTRIES);
/** How many times this process has forgotten endpoints. */
let changes = 0;

/** The enabled endpoints of an environment and what each takes; read through `db` (the caller's transaction) when not remembered. */
export async function subscriptionsFor(db: Runner, environmentId: string): Promise<Subscription[]> {
  const now = Date.now();
  const hit = entries.get(environmentId);
  if (hit && hit.expiresAt > now) return hit.subscriptions;
  const changesBefore = changes;
  const subscriptions = await subscriptionsOf(db, environmentId);
  if (changes === changesBefore) {
    entries.set(environmentId, { subscriptions, expiresAt: now + SUBSCRIPTIONS_TTL_MS });
  }
  return subscriptions;
}

/** Forgets what this process remembers of an environment's endpoints. */
export function forgetSubscriptions(environmentId?: string): void {
  changes++;
  if (environmentId === undefined) entries.clear();
  else entries.delete(environmentId);
}

/**
 * An environment's endpoints changed in `trx`: this process forgets them now (and again once the
 * change commits, for a read that raced it), other processes when the NOTIFY arrives.
 */
export async function subscriptionsChanged(trx: Knex.Transaction, environmentId: string): Promise<void> {
  forgetSubscriptions(environmentId);
  const forget = () => forgetSubscriptions(environmentId);
  trx.executionPromise.then(forget, forget);
  if (isPostgres(trx as unknown as Db)) await trx.raw('SELECT pg_notify(?, ?)', [CHANNEL, environmentId]);
}

/**
 * On PostgreSQL, the process's LISTEN connection (pg-listen.ts) hears other processes' changes to
 * endpoints, forgetting everything whenever a notification may have been missed. Answers how
 * to stop listening. Nothing to do on SQLite: one process writes it.
 */
export async function listenForSubscriptionChanges(db: Db, onError: (err: unknown) => void): Promise<() => Promise<void>> {
  if (!isPostgres(db)) return async () => undefined;
  const listening = listenOn(db, CHANNEL, { heard: (environmentId) => forgetSubscriptions(environmentId), missed: () => forgetSubscriptions(), error: onError });
  await listening.opened;
  return () => listening.close();
}
