// What retention (engine/retention.ts) deletes, a small batch a transaction: notifications past
// their environment's retention with what hangs off them, then the events left without any, then
// the webhook deliveries that are over (their attempts cascade). The
// foreign keys cascade from a notification to its jobs and their execution details, and from an
// event to its own jobs (a fan-out's); messages are deleted by their notification. The kept count
// of notifications (migration 90) follows in the same transaction.
import { changeRows, inList, isPostgres, selectRows, type Db, type Transaction } from '../knex.js';
import { writeTransaction } from '../group-commit.js';
import { OPEN_JOB_STATUSES } from './jobs.js';

const OPEN = OPEN_JOB_STATUSES.map((status) => `'${status}'`).join(', ');

/**
 * Notifications (or events, or webhook deliveries) retention deletes a transaction. On SQLite a
 * batch holds the event loop, the longer the larger the file, so it is kept small; on PostgreSQL
 * the loop is free meanwhile, and larger batches go faster.
 * (`npm run bench -- --large`; bench/README.md, "Retention batches and page steps", has the A/B.)
 */
export function retentionBatchSize(db: Db): number {
  return isPostgres(db) ? 250 : 25;
}

/** Each environment and its own retention in days (null: the server's). */
export async function environmentRetention(db: Db): Promise<Array<{ id: string; retentionDays: number | null }>> {
  const rows = await selectRows<{ id: string; retention_days: number | null }>(db, 'SELECT id, retention_days FROM environments ORDER BY id', []);
  return rows.map((row) => ({ id: row.id, retentionDays: row.retention_days === null ? null : Number(row.retention_days) }));
}

/**
 * Where a pass over an environment's expired rows has got to: the last row deleted, by creation
 * time and id. Each batch reads on from there, so the rows a pass keeps (a delay still pending) are
 * read past once, not by every batch after them.
 */
export interface SweepPosition {
  createdAt: string;
  id: string;
}

/** Before every row. */
export const SWEEP_START: SweepPosition = { createdAt: '', id: '' };

/** A batch's deletes: how many, and the position the next batch goes on from (none when it found none). */
export interface DeletedBatch {
  deleted: number;
  last?: SweepPosition;
}

/**
 * An environment's notifications created before `before`, from a position on, oldest first, but for
 * those whose work is not over: a job of theirs still open (a pending delay or digest, a send to
 * retry), or merged into a digest that is still open (which reads their events when it closes).
 */
const EXPIRED_NOTIFICATIONS = `SELECT n.id, n.created_at FROM notifications n
  WHERE n.environment_id = ? AND n.created_at < ? AND (n.created_at, n.id) > (?, ?)
    AND NOT EXISTS (SELECT 1 FROM jobs j WHERE j.notification_id = n.id AND (j.status IN (${OPEN})
      OR (j.status = 'merged' AND EXISTS (SELECT 1 FROM jobs d WHERE d.id = j.merged_into AND d.status IN (${OPEN})))))
  ORDER BY n.created_at, n.id LIMIT ?`;

/** An environment's events created before `before`, from a position on, with no notification left and no job still open. */
const EXPIRED_EVENTS = `SELECT e.id, e.created_at FROM events e
  WHERE e.environment_id = ? AND e.created_at < ? AND (e.created_at, e.id) > (?, ?)
    AND NOT EXISTS (SELECT 1 FROM notifications n WHERE n.event_id = e.id)
    AND NOT EXISTS (SELECT 1 FROM jobs j WHERE j.event_id = e.id AND j.status IN (${OPEN}))
  ORDER BY e.created_at, e.id LIMIT ?`;

/** An environment's webhook deliveries created before `before`, from a position on, that are over (delivered, or failed for good). */
const EXPIRED_DELIVERIES = `SELECT id, created_at FROM webhook_deliveries
  WHERE environment_id = ? AND created_at < ? AND (created_at, id) > (?, ?) AND status IN ('succeeded', 'failed')
  ORDER BY created_at, id LIMIT ?`;

/** What must happen, in the deleting transaction, before the rows of these ids go (the inbox's counts of their messages). */
export type BeforeDelete = (trx: Transaction, ids: string[]) => Promise<void>;

/**
 * Deletes up to `limit` rows of `table` that `expired` (one of the statements above) finds, with
 * `alsoDelete`'s first, in one transaction, `beforeDelete` before either.
 */
function deleteExpired(expired: string, table: string, alsoDelete?: { table: string; column: string }) {
  return (db: Db, environmentId: string, before: Date, limit: number, after: SweepPosition, beforeDelete?: BeforeDelete): Promise<DeletedBatch> =>
    writeTransaction(db, async (trx) => {
      const rows = await selectRows<{ id: string; created_at: string }>(trx, expired, [environmentId, before.toISOString(), after.createdAt, after.id, limit]);
      if (rows.length === 0) return { deleted: 0 };
      const ids = rows.map((row) => row.id);
      if (beforeDelete) await beforeDelete(trx, ids);
      if (alsoDelete) {
        const dependents = inList(trx, alsoDelete.column, ids);
        await changeRows(trx, `DELETE FROM ${alsoDelete.table} WHERE ${dependents.sql}`, dependents.bindings);
      }
      const deleted = inList(trx, 'id', ids);
      await changeRows(trx, `DELETE FROM ${table} WHERE ${deleted.sql}`, deleted.bindings);
      const last = rows[rows.length - 1];
      return { deleted: rows.length, last: { createdAt: last.created_at, id: last.id } };
    });
}

/**
 * Deletes up to `limit` of an environment's notifications created before `before` (EXPIRED_NOTIFICATIONS),
 * after `after`, with their messages, jobs and execution details, in one transaction. Fewer than
 * `limit` once none is left. The caller's `beforeDelete` takes the messages out of their
 * subscribers' inbox counts.
 */
export const deleteExpiredNotifications = deleteExpired(EXPIRED_NOTIFICATIONS, 'notifications', { table: 'messages', column: 'notification_id' });

/** Deletes up to `limit` of an environment's events created before `before` that nothing needs any more (EXPIRED_EVENTS). */
export const deleteExpiredEvents = deleteExpired(EXPIRED_EVENTS, 'events');

/** Deletes up to `limit` of an environment's webhook deliveries past its retention (EXPIRED_DELIVERIES), with their attempts. */
export const deleteExpiredWebhookDeliveries = deleteExpired(EXPIRED_DELIVERIES, 'webhook_deliveries');

/**
 * SQLite: whether the file gives deleted pages back (auto_vacuum = INCREMENTAL, set on every new
 * file by sqlite.ts), and how many pages are free. A file made before that keeps its pages (for new
 * rows) until a VACUUM rewrites it (README: retention). PostgreSQL: null; its autovacuum reuses them.
 */
export async function freeSpace(db: Db): Promise<{ incremental: boolean; freePages: number } | null> {
  if (isPostgres(db)) return null;
  const [mode] = (await db.raw('PRAGMA auto_vacuum')) as Array<{ auto_vacuum: number }>;
  const [free] = (await db.raw('PRAGMA freelist_count')) as Array<{ freelist_count: number }>;
  return { incremental: mode.auto_vacuum === 2, freePages: free.freelist_count };
}

/** SQLite (auto_vacuum = INCREMENTAL): gives up to `pages` free pages back to the file system. */
export async function giveBackPages(db: Db, pages: number): Promise<void> {
  if (isPostgres(db)) return;
  // In a transaction of its own, as every long write on SQLite, so that it waits its turn while the
  // write-ahead log is long (db/checkpointer.ts). Run to its end with exec: a prepared statement's
  // run() steps it once, which gives back one page.
  await db.transaction(async (trx) => {
    const connection = (await trx.client.acquireConnection()) as { exec(sql: string): unknown };
    connection.exec(`PRAGMA incremental_vacuum(${Math.max(1, Math.floor(pages))})`);
  });
}

/** Sets an environment's own retention in days (null: the server's HERALD_RETENTION_DAYS; 0: for ever). False when there is no such environment. */
export async function setEnvironmentRetention(db: Db, environmentId: string, days: number | null): Promise<boolean> {
  return (await changeRows(db, 'UPDATE environments SET retention_days = ? WHERE id = ?', [days, environmentId])) > 0;
}

/** Every environment with its organization and its own retention (null: the server's), for the operator's CLI. */
export async function listEnvironmentRetention(db: Db): Promise<Array<{ id: string; organizationId: string; name: string; retentionDays: number | null }>> {
  const rows = await selectRows<{ id: string; organization_id: string; name: string; retention_days: number | null }>(
    db,
    'SELECT id, organization_id, name, retention_days FROM environments ORDER BY organization_id, name',
    [],
  );
  return rows.map((row) => ({ id: row.id, organizationId: row.organization_id, name: row.name, retentionDays: row.retention_days === null ? null : Number(row.retention_days) }));
}
