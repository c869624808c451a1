// Tells this process's send loop that webhook deliveries were queued, once they are committed, so
// that it claims them at once instead of at its next idle look (up to 100 ms later). One signal per
// database handle, as inbox-bus.ts has one bus; processes sharing the database find the deliveries
// at their next look.
import type { Runner } from './knex.js';
import { afterCommit, databaseOf, outermostTransaction } from './after-commit.js';

type Listener = () => void;

const listeners = new WeakMap<object, Set<Listener>>();
/** Transactions already due to tell at their commit: a transaction tells once, however many deliveries it queues. */
const telling = new WeakSet<object>();

/** Calls `listener` after each commit that queued deliveries, until the returned function is called. */
export function listenDeliveriesQueued(db: Runner, listener: Listener): () => void {
  const database = databaseOf(db);
  let set = listeners.get(database);
  if (!set) listeners.set(database, (set = new Set()));
  set.add(listener);
  return () => set.delete(listener);
}

/** Says that `trx` queued deliveries: its database's listeners hear once it commits. */
export function tellDeliveriesQueued(trx: Runner): void {
  const top = outermostTransaction(trx);
  if (top) {
    if (telling.has(top)) return;
    telling.add(top);
  }
  afterCommit(trx, () => {
    for (const listener of listeners.get(databaseOf(trx)) ?? []) listener();
  });
}
