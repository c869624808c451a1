import { changeRows, isPostgres, type Binding, type Db, type Runner } from './knex.js';
import { yieldToEventLoop } from '../turns.js';

/** The rows one statement of a large delete removes on SQLite (deleteInParts). */
export const DELETED_AT_ONCE = 1_000;

/**
 * Deletes the rows of `table` that `where` (with its `bindings`) matches, in the caller's
 * transaction. SQLite runs each statement on the event loop: a topic's 100,000 memberships removed
 * by one statement held the loop throughout. So there the rows go DELETED_AT_ONCE at a time, the
 * loop turning between parts; PostgreSQL's one statement leaves the loop free.
 */
export async function deleteInParts(trx: Runner, table: string, where: string, bindings: readonly Binding[]): Promise<void> {
  if (isPostgres(trx as Db)) {
    await changeRows(trx, `DELETE FROM ${table} WHERE ${where}`, bindings);
    return;
  }
  const part = `DELETE FROM ${table} WHERE rowid IN (SELECT rowid FROM ${table} WHERE ${where} LIMIT ?)`;
  while ((await changeRows(trx, part, [...bindings, DELETED_AT_ONCE])) === DELETED_AT_ONCE) await yieldToEventLoop();
}
