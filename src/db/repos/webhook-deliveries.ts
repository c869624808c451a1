// The webhook outbox and its tries. A delivery (one event to one endpoint) is written in the
// transaction of the change it tells of, claimed by a job runner under a lease as a job is, and
// ends succeeded or failed; each try leaves an attempt with the first KB of the answer.
import type { Db, Runner, Transaction } from '../knex.js';
import { changeRows, inList, isPostgres, selectRows } from '../knex.js';
import { insertRows } from '../insert-rows.js';
import { tellWorkQueued } from '../work-queued.js';
import type { Schemas } from '../../contract.js';
import { newId } from '../../ids.js';
import { readBool } from '../json.js';
import { chunks } from '../chunks.js';
import { anyLeasedDue, claimLeased, releaseLeased, renewLeased, type LeaseClaim, type LeasedQueue } from '../leased-queue.js';
import { paginate, type Page, type PageRequest } from '../paginate.js';

export type WebhookDelivery = Schemas['WebhookDelivery'];
export type DeliveryStatus = WebhookDelivery['status'];

export interface NewDelivery {
  environmentId: string;
  endpointId: string;
  eventId: string;
  eventType: string;
  payload: string;
}

export interface DeliveryRecord {
  id: string;
  environmentId: string;
  endpointId: string;
  eventId: string;
  eventType: string;
  payload: string;
  /** Tries made, this one included. */
  attempts: number;
  /** Whether this try was asked for by a retry or a recover. */
  manual: boolean;
  /** The endpoint's rate under which its turn, now come, was taken (pacing.ts); null: none taken. */
  pacedAtRate: number | null;
  createdAt: string;
}

/** The tries a delivery keeps showing in the list. */
const ATTEMPTS_SHOWN = 20;

/** The rows of new deliveries, their ids given: writeDeliveryRows writes them, several events' at once if need be. */
export function deliveryRows(deliveries: NewDelivery[], now: Date): DeliveryRow[] {
  const at = now.toISOString();
  return deliveries.map((d) => ({
    id: newId(now.getTime()),
    environment_id: d.environmentId,
    endpoint_id: d.endpointId,
    event_id: d.eventId,
    event_type: d.eventType,
    payload: d.payload,
    status: 'pending',
    attempts: 0,
    manual: false,
    run_at: at,
    created_at: at,
    updated_at: at,
  }));
}

export type DeliveryRow = Record<string, unknown> & { id: string };

/** Writes delivery rows (deliveryRows) in as few statements as insertRows takes, and wakes the senders. */
export async function writeDeliveryRows(trx: Runner, rows: DeliveryRow[]): Promise<void> {
  if (rows.length === 0) return;
  await insertRows(trx, 'webhook_deliveries', rows);
  tellWorkQueued(trx, 'webhooks');
}

export async function insertDeliveries(trx: Runner, deliveries: NewDelivery[], now: Date): Promise<string[]> {
  const rows = deliveryRows(deliveries, now);
  await writeDeliveryRows(trx, rows);
  return rows.map((row) => row.id);
}

export type DeliveryClaim = LeaseClaim;

/** The webhook deliveries as a leased queue (leased-queue.ts). */
const QUEUE: LeasedQueue = {
  table: 'webhook_deliveries',
  dueIndex: 'webhook_deliveries_due',
  due: `status = 'pending'`,
  leasedIndex: 'webhook_deliveries_leased',
  also: '',
  lapsedAt: 'lease_expires_at',
  // Due deliveries by environment, for a claim that leaves some environments out (migration of 2026-11-28).
  byEnvironment: { table: 'webhook_deliveries', index: 'webhook_deliveries_due_by_environment', due: `status = 'pending'` },
  // A test event has someone waiting for it in the dashboard: it goes ahead of a backlog (migration of 2026-12-07).
  first: { index: 'webhook_deliveries_due_tests', due: `status = 'pending' AND event_type = 'webhook.test'` },
  returning: 'id, environment_id, endpoint_id, event_id, event_type, payload, attempts, manual, paced_at_rate, created_at',
  released: 'pending',
};

/** Claims due deliveries, and those whose worker's lease ran out, for this worker (claimLeased), as claimDueJobs claims jobs. */
export async function claimDueDeliveries(db: Db, options: DeliveryClaim): Promise<DeliveryRecord[]> {
  const rows = await claimLeased(db, QUEUE, options);
  return rows.map((row) => ({
    id: row.id as string,
    environmentId: row.environment_id as string,
    endpointId: row.endpoint_id as string,
    eventId: row.event_id as string,
    eventType: row.event_type as string,
    payload: row.payload as string,
    attempts: Number(row.attempts),
    manual: readBool(row.manual),
    pacedAtRate: row.paced_at_rate === null || row.paced_at_rate === undefined ? null : Number(row.paced_at_rate),
    createdAt: row.created_at as string,
  }));
}

/** Whether claimDueDeliveries would find a delivery now (as jobsDue for jobs): a read, no write. */
export function deliveriesDue(db: Db, now: Date): Promise<boolean> {
  return anyLeasedDue(db, QUEUE, now);
}

export interface DeliveryChange {
  status: 'pending' | 'succeeded' | 'failed';
  runAt?: Date;
  /** The try did not happen (a busy destination, the endpoint's rate): its attempt is given back. */
  refundAttempt?: boolean;
  /** The delivery took its turn (its runAt) under this rate of its endpoint. Any other change forgets it: a turn is for its time. */
  pacedAtRate?: number;
}

/** Moves a delivery on, only while `owner` holds it. Answers whether it did. */
export async function finishDelivery(trx: Runner, id: string, owner: string, change: DeliveryChange, now: Date): Promise<boolean> {
  const at = now.toISOString();
  const refund = change.refundAttempt ? ', attempts = attempts - 1' : '';
  const manual = change.refundAttempt ? '' : ', manual = false';
  return (
    (await changeRows(
      trx,
      `UPDATE webhook_deliveries SET status = ?, run_at = ?, lease_owner = NULL, lease_expires_at = NULL, updated_at = ?, paced_at_rate = ?${refund}${manual}
        WHERE id = ? AND lease_owner = ? AND status = 'running'`,
      [change.status, (change.runAt ?? now).toISOString(), at, change.pacedAtRate ?? null, id, owner],
    )) > 0
  );
}

/** The most of an endpoint's due deliveries one deferral moves: its earliest, those a claim would reach first. */
const DEFERRED_AT_ONCE = 500;

/**
 * The endpoint's pending deliveries due before `until` (its earliest DEFERRED_AT_ONCE) wait until
 * then: its destination turned one away (its breaker open, its sends hanging), and would
 * turn each of them away too. Claimed one at a time and put back, they would take the claims and
 * the writes of the environment's other endpoints, ahead of whose deliveries they stand in due
 * order. Their tries are untouched. On PostgreSQL the rows another transaction holds (a claim) are
 * skipped. The caller gives one `until` for all of a turn (EndpointWaits): rows moved there already
 * are not moved again. A row that had taken its turn under the endpoint's rate takes another: come
 * due together, they would otherwise all go at once.
 */
export async function deferEndpointDeliveries(trx: Runner, endpointId: string, until: Date, now: Date): Promise<number> {
  const postgres = isPostgres(trx);
  const table = postgres ? 'webhook_deliveries' : 'webhook_deliveries INDEXED BY webhook_deliveries_due_by_endpoint';
  return changeRows(
    trx,
    `UPDATE webhook_deliveries SET run_at = ?, updated_at = ?, paced_at_rate = NULL
      WHERE id IN (SELECT id FROM ${table} WHERE status = 'pending' AND endpoint_id = ? AND run_at < ? ORDER BY run_at, id LIMIT ?${postgres ? ' FOR UPDATE SKIP LOCKED' : ''})
        AND status = 'pending'`,
    [until.toISOString(), now.toISOString(), endpointId, until.toISOString(), DEFERRED_AT_ONCE],
  );
}

export interface NewAttempt {
  deliveryId: string;
  attempt: number;
  trigger: 'scheduled' | 'manual';
  statusCode?: number;
  durationMs: number;
  response?: string;
  error?: string;
}

function attemptRow(attempt: NewAttempt, now: Date): Record<string, unknown> {
  return {
    id: newId(now.getTime()),
    delivery_id: attempt.deliveryId,
    attempt: attempt.attempt,
    trigger: attempt.trigger,
    status_code: attempt.statusCode ?? null,
    duration_ms: attempt.durationMs,
    response: attempt.response ?? null,
    error: attempt.error ?? null,
    created_at: now.toISOString(),
  };
}

export async function addAttempt(trx: Runner, attempt: NewAttempt, now: Date): Promise<void> {
  await insertRows(trx, 'webhook_attempts', [attemptRow(attempt, now)]);
}

/**
 * Successful tries, recorded together (finishDelivery and addAttempt for many at once): each
 * delivery `owner` still holds ends succeeded and keeps its try, and its endpoint fails no longer. Answers the ids it ended; a delivery whose lease was lost keeps no try, as with
 * finishDelivery. A delivery tried twice (its lease lapsed during the first try) keeps its last.
 */
export async function finishSucceeded(trx: Transaction, tries: readonly NewAttempt[], owner: string, now: Date): Promise<string[]> {
  const at = now.toISOString();
  const last = new Map<string, NewAttempt>();
  for (const attempt of tries) if ((last.get(attempt.deliveryId)?.attempt ?? 0) <= attempt.attempt) last.set(attempt.deliveryId, attempt);
  const ended = new Set<string>();
  const endpoints = new Set<string>();
  for (const part of chunks([...last.keys()])) {
    const list = inList(trx, 'id', part);
    // UPDATE … RETURNING through selectRows: inside a transaction it runs on the transaction's connection.
    const rows = await selectRows<{ id: string; endpoint_id: string }>(
      trx,
      `UPDATE webhook_deliveries SET status = 'succeeded', run_at = ?, lease_owner = NULL, lease_expires_at = NULL, updated_at = ?, manual = false
        WHERE lease_owner = ? AND status = 'running' AND ${list.sql} RETURNING id, endpoint_id`,
      [at, at, owner, ...list.bindings],
    );
    for (const row of rows) {
      ended.add(row.id);
      endpoints.add(row.endpoint_id);
    }
  }
  const kept = [...last.values()].filter((attempt) => ended.has(attempt.deliveryId));
  if (kept.length > 0) await insertRows(trx, 'webhook_attempts', kept.map((attempt) => attemptRow(attempt, now)));
  if (endpoints.size > 0) {
    const list = inList(trx, 'id', [...endpoints]);
    await changeRows(trx, `UPDATE webhook_endpoints SET failing_since = NULL WHERE failing_since IS NOT NULL AND ${list.sql}`, list.bindings);
  }
  return [...ended];
}

export function renewDeliveryLeases(db: Db, owner: string, ids: readonly string[], until: Date): Promise<number> {
  return renewLeased(db, QUEUE, owner, ids, until);
}

/** Gives claimed deliveries back untouched (their attempt too). */
export function releaseDeliveries(db: Db, ids: string[], owner: string, now: Date): Promise<void> {
  return releaseLeased(db, QUEUE, ids, owner, now);
}

const DELIVERY_COLUMNS = ['id', 'endpoint_id', 'event_id', 'event_type', 'status', 'run_at', 'created_at', 'updated_at'];

async function withAttempts(db: Runner, rows: Array<Record<string, unknown>>): Promise<WebhookDelivery[]> {
  const attempts = new Map<string, Array<Record<string, unknown>>>();
  for (const part of chunks(rows.map((row) => row.id as string))) {
    const found: Array<Record<string, unknown>> = await db('webhook_attempts')
      .whereIn('delivery_id', part)
      .orderBy([{ column: 'created_at' }, { column: 'id' }])
      .select('delivery_id', 'attempt', 'trigger', 'status_code', 'duration_ms', 'response', 'error', 'created_at');
    for (const row of found) {
      const list = attempts.get(row.delivery_id as string) ?? [];
      list.push(row);
      attempts.set(row.delivery_id as string, list);
    }
  }
  return rows.map((row) => {
    // A claimed delivery shows as pending: its try is under way.
    const status = (row.status === 'running' ? 'pending' : row.status) as DeliveryStatus;
    const delivery: WebhookDelivery = {
      deliveryId: row.id as string,
      endpointId: row.endpoint_id as string,
      eventId: row.event_id as string,
      eventType: row.event_type as WebhookDelivery['eventType'],
      status,
      attempts: (attempts.get(row.id as string) ?? []).slice(-ATTEMPTS_SHOWN).map((a) => {
        const attempt: WebhookDelivery['attempts'][number] = {
          attempt: Number(a.attempt),
          trigger: a.trigger as 'scheduled' | 'manual',
          durationMs: Number(a.duration_ms),
          createdAt: a.created_at as string,
        };
        if (a.status_code !== null) attempt.statusCode = Number(a.status_code);
        if (a.response !== null) attempt.response = a.response as string;
        if (a.error !== null) attempt.error = a.error as string;
        return attempt;
      }),
      createdAt: row.created_at as string,
      updatedAt: row.updated_at as string,
    };
    if (status === 'pending') delivery.nextAttemptAt = row.run_at as string;
    return delivery;
  });
}

export interface DeliveryFilters {
  status?: DeliveryStatus;
  eventType?: string;
}

export async function listDeliveries(db: Db, environmentId: string, endpointId: string, page: PageRequest, filters: DeliveryFilters): Promise<Page<WebhookDelivery>> {
  const query = db('webhook_deliveries').where({ environment_id: environmentId, endpoint_id: endpointId }).select(DELIVERY_COLUMNS);
  if (filters.status === 'pending') query.whereIn('status', ['pending', 'running']);
  else if (filters.status) query.where('status', filters.status);
  if (filters.eventType) query.where('event_type', filters.eventType);
  return paginate<Record<string, unknown>, WebhookDelivery>(
    query,
    page,
    [
      { column: 'created_at', order: 'desc' },
      { column: 'id', order: 'desc' },
    ],
    (rows) => withAttempts(db, rows),
  );
}

export async function findDelivery(db: Runner, environmentId: string, deliveryId: string): Promise<WebhookDelivery | undefined> {
  const row = await db('webhook_deliveries').where({ environment_id: environmentId, id: deliveryId }).first(DELIVERY_COLUMNS);
  return row ? (await withAttempts(db, [row]))[0] : undefined;
}

/**
 * A delivery is due now, by hand: a finished one starts a fresh schedule; a pending one keeps its
 * count. One a worker holds is left to it. Answers whether it was the environment's.
 */
export async function retryDelivery(trx: Runner, environmentId: string, deliveryId: string, now: Date): Promise<boolean> {
  const at = now.toISOString();
  const changed = await changeRows(
    trx,
    `UPDATE webhook_deliveries SET attempts = CASE WHEN status = 'pending' THEN attempts ELSE 0 END, status = 'pending', manual = true, paced_at_rate = NULL, run_at = ?, updated_at = ?
      WHERE environment_id = ? AND id = ? AND status <> 'running'`,
    [at, at, environmentId, deliveryId],
  );
  if (changed > 0) {
    tellWorkQueued(trx, 'webhooks');
    return true;
  }
  return (await trx('webhook_deliveries').where({ environment_id: environmentId, id: deliveryId }).first('id')) !== undefined;
}

/** Every failed delivery of the endpoint's events created in [since, until) is due now, with a fresh schedule. */
export async function recoverDeliveries(trx: Runner, endpointId: string, since: string, until: string, now: Date): Promise<number> {
  const at = now.toISOString();
  const recovered = await changeRows(
    trx,
    `UPDATE webhook_deliveries SET status = 'pending', attempts = 0, manual = true, paced_at_rate = NULL, run_at = ?, updated_at = ?
      WHERE endpoint_id = ? AND status = 'failed' AND created_at >= ? AND created_at < ?`,
    [at, at, endpointId, since, until],
  );
  if (recovered > 0) tellWorkQueued(trx, 'webhooks');
  return recovered;
}

/** The endpoint's deliveries still to make fail (it was disabled). */
export async function failPendingDeliveries(trx: Runner, endpointId: string, now: Date): Promise<void> {
  await changeRows(trx, `UPDATE webhook_deliveries SET status = 'failed', updated_at = ? WHERE endpoint_id = ? AND status = 'pending'`, [now.toISOString(), endpointId]);
}

/** A delivery whose endpoint is gone (deleted after a process recorded the event) is dropped. */
export async function dropDelivery(db: Runner, id: string, owner: string): Promise<void> {
  await changeRows(db, `DELETE FROM webhook_deliveries WHERE id = ? AND lease_owner = ?`, [id, owner]);
}
