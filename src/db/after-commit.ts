// Telling this process's listeners what a transaction wrote (an inbox changed, webhook deliveries
// queued) waits for its commit: a listener told earlier would look too soon, or at a change that is
// then rolled back.
import type { Runner } from './knex.js';

/** knex's transactor: its outermost one commits (a nested one's "commit" is a savepoint's release). */
type Transactor = { parentTransaction?: Transactor; executionPromise?: Promise<unknown> };

/**
 * The transaction whose commit makes `trx`'s writes visible: its outermost one (an Idempotency-Key
 * wraps the operation's own). Undefined outside a transaction.
 */
function outermostTransaction(trx: Runner): object | undefined {
  if (!trx.isTransaction) return undefined;
  let top = trx as unknown as Transactor;
  while (top.parentTransaction) top = top.parentTransaction;
  return top;
}

/**
 * Calls `tell` once `trx` commits (its outermost transaction), never if it rolls back; outside a
 * transaction, at once. A transaction knex does not say the end of is told at once too, rather than never.
 */
function afterCommit(trx: Runner, tell: () => void): void {
  const top = outermostTransaction(trx) as Transactor | undefined;
  if (!top) return tell();
  if (!top.executionPromise) return queueMicrotask(tell);
  top.executionPromise.then(tell, () => undefined);
}

/**
 * afterCommit, but never if `trx` is a savepoint that rolls back, or one between it and the
 * outermost transaction does: the outermost may commit without its writes (a keyed request records
 * the 4xx of an operation whose savepoint it rolled back), and `tell` must not take them for stored.
 */
export function afterOwnCommit(trx: Runner, tell: () => void): void {
  const own = trx as unknown as Transactor;
  if (!trx.isTransaction || !own.parentTransaction || !own.executionPromise) return afterCommit(trx, tell);
  own.executionPromise.then(() => afterOwnCommit(own.parentTransaction as unknown as Runner, tell), () => undefined);
}

/**
 * Gathers what a transaction's writes tell (`items`) in `pending`, by its outermost transaction, and
 * hands all of it to `tell` once, when that commits; nothing if it rolls back. Outside a
 * transaction, `items` are told at once.
 */
export function tellAfterCommit<T>(pending: WeakMap<object, Set<T>>, trx: Runner, items: Iterable<T>, tell: (items: Set<T>) => void): void {
  const top = outermostTransaction(trx);
  const gathered = top && pending.get(top);
  if (gathered) {
    for (const item of items) gathered.add(item);
    return;
  }
  const all = new Set(items);
  if (top) pending.set(top, all);
  afterCommit(trx, () => tell(all));
}

/** What a database handle and all its transactions share (their client's `config`): the key of a per-database registry. */
export function databaseOf(db: Runner): object {
  return (db.client as { config: object }).config;
}
