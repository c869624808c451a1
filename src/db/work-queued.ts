// Tells this process's job runner which kinds of work a transaction queued for now (in-app jobs,
// control steps, sends, webhook deliveries), once it commits: each of the runner's loops is woken
// by its own kind alone, at once instead of at its next idle look (up to 100 ms later), and never
// for work it would not find yet or that was rolled back. One signal per database handle, as
// inbox-bus.ts has one bus; processes sharing the database find the work at their next look.
import type { Runner } from './knex.js';
import { databaseOf, tellAfterCommit } from './after-commit.js';

/** The job lanes of repos/jobs.ts that a loop claims from, and webhook deliveries. */
export type QueuedWork = 'in_app' | 'control' | 'send' | 'webhooks';

type Listener = (work: ReadonlySet<QueuedWork>) => void;

const listeners = new WeakMap<object, Set<Listener>>();
/** What each open transaction has queued so far, told together at its commit. */
const queuedBy = new WeakMap<object, Set<QueuedWork>>();

/** Calls `listener` after each commit that queued work, with its kinds; until the returned function is called. */
export function listenWorkQueued(db: Runner, listener: Listener): () => void {
  const database = databaseOf(db);
  let set = listeners.get(database);
  if (!set) listeners.set(database, (set = new Set()));
  set.add(listener);
  return () => set.delete(listener);
}

/** Says that `trx` queued work of this kind, due now: its database's listeners hear once it commits. */
export function tellWorkQueued(trx: Runner, work: QueuedWork): void {
  tellAfterCommit(queuedBy, trx, [work], (kinds) => {
    for (const listener of listeners.get(databaseOf(trx)) ?? []) listener(kinds);
  });
}
