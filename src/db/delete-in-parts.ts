import { setImmediate as nextTurn } from 'node:timers/promises';
import { changeRows, type Binding, type Runner } from './knex.js';

/** The rows one statement of a large delete removes on SQLite (deleteInParts). */
export const DELETED_AT_ONCE = 1_000;

/**
 * Runs `deletePart`, a DELETE of at most DELETED_AT_ONCE rows (its last `?` is that limit), until
 * it removes fewer. For SQLite, which runs each statement on the event loop: a topic's 100,000
 * memberships removed by one statement held the loop throughout. The loop turns between parts;
 * the caller's transaction stays one.
 */
export async function deleteInParts(trx: Runner, deletePart: string, bindings: readonly Binding[]): Promise<void> {
  while ((await changeRows(trx, deletePart, [...bindings, DELETED_AT_ONCE])) === DELETED_AT_ONCE) await nextTurn();
}
