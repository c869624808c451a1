// A digest's jobs: the open digest of a key (its leader) and the jobs merged into it, the hand-over
// of an open digest to an heir when its leader's event is canceled, and, once the digest closed,
// the notifications that ride in its send. The rules are engine/digests.ts's; these are its rows.
import type { Db, Runner } from '../knex.js';
import { isPostgres, selectRows, selectRowsInBackground } from '../knex.js';
import { pacer } from '../../turns.js';
import { readJson, writeJson } from '../json.js';
import { jobRow, type NewJob } from './jobs.js';

/**
 * Inserts a digest job as the open digest of its key, unless another job holds that key already:
 * then nothing is inserted and undefined comes back. The unique index of open digests
 * (`jobs_open_digest`, partial: only jobs with a key) makes this safe against concurrent triggers.
 */
export async function insertDigestLeader(trx: Runner, job: NewJob & { digestKey: string }, now: Date): Promise<string | undefined> {
  const row = jobRow(job, now);
  const inserted = await trx('jobs').insert(row).onConflict(trx.raw('(digest_key) WHERE digest_key IS NOT NULL')).ignore().returning('id');
  return inserted.length > 0 ? row.id : undefined;
}

/** The open digest job for a key, locked on PostgreSQL so it cannot close while a job joins it. */
export async function findDigestLeader(trx: Runner, digestKey: string): Promise<{ id: string } | undefined> {
  const query = trx('jobs').where({ digest_key: digestKey }).first('id');
  if (isPostgres(trx as Db)) query.forUpdate();
  return query;
}

/** A job merged into a closed digest, as its send needs it: the notification that rides in it, and its event's payload while they fit. */
export interface DigestFollower {
  notificationId: string | null;
  payload?: unknown;
}

/**
 * Jobs merged into a closed digest, oldest first, each with its event's payload as long as the
 * payloads so far fit in `payloadBytes` (of their stored JSON) together; the first that does not,
 * and every one after it, come without. A digest may gather thousands of events of up to 1 MiB
 * each: reading them all would hold the event loop for seconds and carry gigabytes into its send.
 * The database measures the payloads (octet_length: `length`, which counts characters, read every
 * payload on SQLite) and reads only those that fit, in one statement run off the event loop once
 * the digest has closed (no job joins it after): on SQLite, reading the payloads on the loop 500
 * ids a statement held it for all of them together.
 */
export async function digestFollowers(db: Db, leaderId: string, payloadBytes: number): Promise<DigestFollower[]> {
  const rows = await selectRowsInBackground<{ notification_id: string | null; payload: string | null }>(
    db,
    `WITH followers AS (
      SELECT j.notification_id, j.event_id, j.created_at, j.id,
        sum(octet_length(ev.payload)) OVER (ORDER BY j.created_at, j.id ROWS UNBOUNDED PRECEDING) AS bytes_so_far
      FROM jobs j JOIN events ev ON ev.id = j.event_id
      WHERE j.merged_into = ? AND j.status = 'merged')
    SELECT notification_id, CASE WHEN bytes_so_far <= ? THEN (SELECT payload FROM events WHERE id = followers.event_id) END AS payload
    FROM followers ORDER BY created_at, id`,
    [leaderId, payloadBytes],
  );
  const pace = pacer();
  const followers: DigestFollower[] = [];
  for (const row of rows) {
    followers.push(row.payload === null ? { notificationId: row.notification_id } : { notificationId: row.notification_id, payload: readJson(row.payload, {}) });
    await pace();
  }
  return followers;
}

/**
 * The closed digest whose send a notification carries or rides in: its own digest job, once it
 * fired, or the one its job was merged into. Each half reads the notification's jobs by their index.
 */
const CLOSED_DIGEST_OF = `SELECT id, step_index FROM jobs WHERE notification_id = ? AND type = 'digest' AND status = 'completed'
  UNION SELECT d.id, d.step_index FROM jobs m JOIN jobs d ON d.id = m.merged_into WHERE m.notification_id = ? AND d.status = 'completed'`;

export async function closedDigestOf(trx: Runner, notificationId: string): Promise<{ id: string; step_index: number } | undefined> {
  const [digest] = await selectRows<{ id: string; step_index: number }>(trx, CLOSED_DIGEST_OF, [notificationId, notificationId]);
  return digest;
}

/** A notification riding in a closed digest's send, with its event's transactionId. */
export interface DigestRider {
  notificationId: string;
  transactionId: string;
}

/** Riders a statement reads at once (digestRiderSlices). */
export const RIDERS_A_READ = 500;

/**
 * The notifications, other than `notificationId`, riding in the send of the closed digest it
 * carries (their jobs are still merged into it), each with its event's transactionId, about in the
 * order they joined it: `size` a statement with the event loop turning between, as tens of
 * thousands read and sorted in one statement held it. Each slice starts after the last one's row in
 * the index of merged jobs, whose entries SQLite keeps in rowid order within a digest (PostgreSQL:
 * by id, which sorts by creation time).
 */
export async function* digestRiderSlices(trx: Runner, notificationId: string, size = RIDERS_A_READ): AsyncGenerator<DigestRider[]> {
  const digest = await closedDigestOf(trx, notificationId);
  if (!digest) return;
  const at = isPostgres(trx as Db) ? 'id' : 'rowid';
  const pace = pacer();
  let after: string | number = isPostgres(trx as Db) ? '' : 0;
  for (;;) {
    const rows = await selectRows<{ at: string | number; notification_id: string | null; transaction_id: string }>(
      trx,
      `SELECT j.${at} AS at, j.notification_id, ev.transaction_id FROM jobs j JOIN events ev ON ev.id = j.event_id
        WHERE j.merged_into = ? AND j.status = 'merged' AND j.${at} > ? ORDER BY j.${at} LIMIT ${size}`,
      [digest.id, after],
    );
    const riders = rows.flatMap((row) =>
      row.notification_id === null || row.notification_id === notificationId ? [] : [{ notificationId: row.notification_id, transactionId: row.transaction_id }],
    );
    if (riders.length > 0) yield riders;
    if (rows.length < size) return;
    after = rows[rows.length - 1].at;
    await pace();
  }
}

/** The follower to carry a digest on: the oldest job merged into it whose event is not canceled. */
export async function digestHeirOf(trx: Runner, digestId: string): Promise<{ id: string; event_id: string; notification_id: string } | undefined> {
  return trx('jobs as f')
    .join('events as e', 'e.id', 'f.event_id')
    .where({ 'f.merged_into': digestId, 'f.status': 'merged' })
    .whereNull('e.canceled_at')
    .orderBy([{ column: 'f.created_at' }, { column: 'f.id' }])
    .first('f.id', 'f.event_id', 'f.notification_id');
}

/** An open digest's leader lets go of its key (its event was canceled). */
export async function dropDigestKey(trx: Runner, leaderId: string, now: Date): Promise<void> {
  await trx('jobs').where({ id: leaderId }).update({ digest_key: null, updated_at: now.toISOString() });
}

/** `heirId` leads the open digest `leader` led, with its key and window; the other followers merge into it. */
export async function handDigestLeadTo(trx: Runner, heirId: string, leader: { id: string; digestKey: string; runAt: string }, now: Date): Promise<void> {
  const at = now.toISOString();
  await trx('jobs').where({ id: heirId }).update({ status: 'delayed', digest_key: leader.digestKey, run_at: leader.runAt, merged_into: null, updated_at: at });
  await trx('jobs').where({ merged_into: leader.id, status: 'merged' }).update({ merged_into: heirId, updated_at: at });
}

/** The ids of a notification's jobs merged into a digest. */
export async function mergedJobIdsOf(trx: Runner, notificationId: string): Promise<string[]> {
  const rows: Array<{ id: string }> = await trx('jobs').where({ notification_id: notificationId, status: 'merged' }).select('id');
  return rows.map((row) => row.id);
}

/** A waiting job goes on for another event and notification, with the state it is given. */
export async function moveJob(trx: Runner, jobId: string, to: { eventId: string; notificationId: string; state: Record<string, unknown> }, now: Date): Promise<void> {
  await trx('jobs')
    .where({ id: jobId })
    .update({ event_id: to.eventId, notification_id: to.notificationId, state: writeJson(to.state), updated_at: now.toISOString() });
}

/**
 * Closes a digest a worker holds (its key is dropped, so a trigger joining now opens a new one);
 * false when the worker no longer holds it.
 */
export async function closeDigest(trx: Runner, jobId: string, owner: string): Promise<boolean> {
  return (await trx('jobs').where({ id: jobId, lease_owner: owner, status: 'running' }).update({ digest_key: null })) > 0;
}
