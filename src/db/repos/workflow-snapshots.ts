// The workflows events were triggered with (migration 20261208_01): one stored copy of each version
// of a workflow, shared by its events, named by a digest of its text and its environment.
import { createHash } from 'node:crypto';
import { changeRows, isPostgres, type Db, type Runner } from '../knex.js';
import { writeTransaction } from '../group-commit.js';
import { afterOwnCommit, databaseOf } from '../after-commit.js';
import { boundedMapsBy } from '../../bounded-map.js';
import type { WorkflowSnapshot } from './events.js';

/**
 * How long a process trusts a snapshot it stored to be there without writing it again. Each write
 * moves its `used_at`, so every event that uses a snapshot is created within this of its `used_at`.
 */
const TRUSTED_MS = 60 * 60 * 1000;

/**
 * Retention keeps a snapshot this long past the environment's own retention: its `used_at` then lies
 * a day before any event still in flight that uses it (TRUSTED_MS, with room for clocks that differ
 * between processes), so removing it never races a trigger.
 */
export const SNAPSHOT_KEPT_PAST_RETENTION_MS = 24 * 60 * 60 * 1000;

/** Snapshots each database's process remembers storing, and when. */
const storedOf = boundedMapsBy<object, string, number>(10_000);

/** A workflow's snapshot: its text, and its name, a digest of that text apart for each environment. */
export function workflowSnapshot(environmentId: string, workflow: WorkflowSnapshot): { body: string; digest: string } {
  const body = JSON.stringify(workflow);
  return { body, digest: createHash('sha256').update(environmentId).update('\n').update(body).digest('base64url') };
}

const STORE = `INSERT INTO workflow_snapshots (environment_id, digest, body, used_at) VALUES (?, ?, ?, ?)
  ON CONFLICT (environment_id, digest) DO UPDATE SET used_at = excluded.used_at WHERE workflow_snapshots.used_at < excluded.used_at`;

/**
 * Makes sure the snapshot `digest` of `body` is stored, before an event that names it is written:
 * stored, or its `used_at` moved to `now`, unless this process did so in the last hour. Inside a
 * transaction it writes there, and is remembered once that commits (and every savepoint between).
 */
export async function storeWorkflowSnapshot(db: Db, environmentId: string, digest: string, body: string, now: Date): Promise<void> {
  const stored = storedOf(databaseOf(db));
  const at = stored.get(digest);
  if (at !== undefined && now.getTime() - at < TRUSTED_MS && now.getTime() >= at) return;
  await writeTransaction(db, (trx) => changeRows(trx, STORE, [environmentId, digest, body, now.toISOString()]), body.length);
  afterOwnCommit(db, () => stored.set(digest, now.getTime()));
}

/** Stores `workflow`'s snapshot (storeWorkflowSnapshot) and answers its name, for an event written with eventRow. */
export async function storeSnapshotOf(db: Db, environmentId: string, workflow: WorkflowSnapshot, now: Date): Promise<string> {
  const { body, digest } = workflowSnapshot(environmentId, workflow);
  await storeWorkflowSnapshot(db, environmentId, digest, body, now);
  return digest;
}

/**
 * Deletes up to `limit` of an environment's snapshots that no event uses and that no trigger has
 * used since `before` less SNAPSHOT_KEPT_PAST_RETENTION_MS; answers how many. Every event that uses
 * such a snapshot was created before `before`, so only those are looked through: after retention's
 * pass, the ones it keeps for their open work (a long delay may keep many). The outer condition on
 * `used_at` is checked again against a row a trigger moved meanwhile (PostgreSQL rereads a row
 * updated under a DELETE), which the subquery, read before, is not.
 */
export async function deleteUnusedSnapshots(db: Db, environmentId: string, before: Date, limit: number): Promise<number> {
  const unusedSince = new Date(before.getTime() - SNAPSHOT_KEPT_PAST_RETENTION_MS).toISOString();
  // PostgreSQL anti-joins the kept events once. SQLite would run a NOT EXISTS once a snapshot, each
  // scanning every kept event on the event loop, the write lock held; the list of the snapshots they
  // use it builds once.
  const [unused, bindings] = isPostgres(db)
    ? ['NOT EXISTS (SELECT 1 FROM events e WHERE e.environment_id = s.environment_id AND e.created_at < ? AND e.workflow_snapshot = s.digest)', [before.toISOString()]]
    : ['s.digest NOT IN (SELECT e.workflow_snapshot FROM events e WHERE e.environment_id = ? AND e.created_at < ? AND e.workflow_snapshot IS NOT NULL)', [environmentId, before.toISOString()]];
  return writeTransaction(db, (trx: Runner) =>
    changeRows(
      trx,
      `DELETE FROM workflow_snapshots WHERE environment_id = ? AND used_at < ? AND digest IN (
        SELECT s.digest FROM workflow_snapshots s WHERE s.environment_id = ? AND s.used_at < ? AND ${unused}
        LIMIT ?)`,
      [environmentId, unusedSince, environmentId, unusedSince, ...bindings, limit],
    ),
  );
}
