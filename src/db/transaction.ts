import type { Knex } from 'knex';
import type { Db } from './knex.js';

/** A write transaction the engine holds and hands to repos, without knowing knex. */
export type Transaction = Knex.Transaction;

/** Runs `work` in one transaction: committed when it resolves, rolled back when it throws. */
export function inTransaction<T>(db: Db, work: (trx: Transaction) => Promise<T>): Promise<T> {
  return db.transaction(work);
}
