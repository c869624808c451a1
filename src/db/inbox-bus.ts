// Says which subscribers' inboxes changed, to the streams of this process, once the change is
// committed (a stream that looked earlier would not see it). One bus per database (per knex
// instance, shared by its transactions), so the engine needs nothing beyond the transaction it
// writes in. On PostgreSQL the changing transaction also NOTIFYs the other API processes
// (repos/inbox.ts); inbox-listener.ts hears them and speaks on this same bus.
import { randomBytes } from 'node:crypto';
import type { Runner } from './knex.js';
import { databaseOf, tellAfterCommit } from './after-commit.js';

export type InboxListener = (subscriberKeys: string[] | '*') => void;

interface Bus {
  /** Names this process (this database handle) in its NOTIFYs, so its listener skips its own. */
  origin: string;
  listeners: Set<InboxListener>;
  /** Keys of transactions still open, by their outermost transaction, told after its commit. */
  pending: WeakMap<object, Set<string>>;
}

const buses = new WeakMap<object, Bus>();

/** A transaction's client is its own object, but shares its database's `config`: the bus is the database's. */
function busOf(db: Runner): Bus {
  const owner = databaseOf(db);
  let bus = buses.get(owner);
  if (!bus) buses.set(owner, (bus = { origin: randomBytes(8).toString('hex'), listeners: new Set(), pending: new WeakMap() }));
  return bus;
}

/** The name this process's NOTIFYs carry. */
export function originOf(db: Runner): string {
  return busOf(db).origin;
}

/** Calls `listener` with the subscribers whose inboxes changed, after each commit; until the returned function is called. */
export function listenInbox(db: Runner, listener: InboxListener): () => void {
  const bus = busOf(db);
  bus.listeners.add(listener);
  return () => bus.listeners.delete(listener);
}

/** Tells this process's listeners now (a change committed elsewhere, or `*`: look at every stream). */
export function tellInbox(db: Runner, subscriberKeys: string[] | '*'): void {
  for (const listener of busOf(db).listeners) {
    try {
      listener(subscriberKeys);
    } catch {
      // A listener's failure is its own; the others still hear.
    }
  }
}

/**
 * Tells the listeners about these subscribers once the transaction `trx` belongs to commits, all
 * of a transaction's at once; nothing if it rolls back. Outside a transaction, at once.
 */
export function tellInboxAfterCommit(trx: Runner, subscriberKeys: string[]): void {
  if (subscriberKeys.length === 0) return;
  tellAfterCommit(busOf(trx).pending, trx, subscriberKeys, (keys) => tellInbox(trx, [...keys]));
}
