import { changeRows, inList, isPostgres, selectBuiltPage, selectRows, selectRowsInBackground, type Db, type Runner } from '../knex.js';
import { CHANNELS } from '../../contract.js';
import { insertRows } from '../insert-rows.js';
import type { Schemas } from '../../contract.js';
import { readJson, setStoredJson, writeJson } from '../json.js';
import { chunks } from '../chunks.js';
import { pacer } from '../../turns.js';
import { bytesOf, countOf, pageOf, pageRows, toWireInSlices, type Page, type PageRequest } from '../paginate.js';
import type { ReserveForAnswer } from '../../answer-memory.js';
import type { Knex } from 'knex';
import { newId } from '../../ids.js';

export type Notification = Schemas['Notification'];
export type NotificationStatus = Schemas['NotificationStatus'];

export interface NewNotification {
  environmentId: string;
  eventId: string;
  transactionId: string;
  workflowKey: string;
  subscriberKey: string;
  subscriberId: string;
  channels: string[];
  /** Given when other rows written with it must point at it. */
  id?: string;
  /** `pending` unless it is written already settled (an in-app-only fan-out). */
  status?: NotificationStatus;
}

/** The row of a new notification (its id made here unless given). */
export function notificationRow(row: NewNotification, now: Date): Record<string, unknown> {
  const at = now.toISOString();
  return {
    id: row.id ?? newId(now.getTime()),
    environment_id: row.environmentId,
    event_id: row.eventId,
    transaction_id: row.transactionId,
    workflow_key: row.workflowKey,
    subscriber_key: row.subscriberKey,
    subscriber_id: row.subscriberId,
    channels: writeJson(row.channels),
    status: row.status ?? 'pending',
    created_at: at,
    updated_at: at,
  };
}

/**
 * Inserts one notification per recipient, skipping recipients the event already has one for (a
 * fan-out batch run twice), and returns the ids of those it created, by subscriber key.
 */
export async function insertNotifications(trx: Runner, rows: NewNotification[], now: Date): Promise<Map<string, string>> {
  const created = new Map<string, string>();
  if (rows.length === 0) return created;
  const inserted = await insertRows<{ id: string; subscriber_key: string }>(
    trx,
    'notifications',
    rows.map((row) => notificationRow(row, now)),
    { skipConflictsOn: ['event_id', 'subscriber_key'], returning: ['id', 'subscriber_key'] },
  );
  for (const row of inserted) created.set(row.subscriber_key, row.id);
  return created;
}

/** Whom a notification is for: read by every job of it, so a prepared statement. */
export async function notificationRecipient(db: Runner, id: string): Promise<{ subscriber_id: string; subscriber_key: string } | undefined> {
  const [row] = await selectRows<{ subscriber_id: string; subscriber_key: string }>(db, 'SELECT subscriber_id, subscriber_key FROM notifications WHERE id = ?', [id]);
  return row;
}

/**
 * The one place a notification's final status is decided, from its jobs and its event, as the
 * contract's NotificationStatus defines it: `failed` when a job of it failed; `canceled` when its
 * event was canceled before any of its channel steps was sent; else `completed`. Only a
 * notification still open is settled, and not one that only rides in a closed digest's send (its
 * one job is merged into the digest): that one takes the send's outcome (settleRiders).
 */
const SETTLE = `UPDATE notifications SET updated_at = ?, status = CASE
    WHEN EXISTS (SELECT 1 FROM jobs WHERE jobs.notification_id = notifications.id AND jobs.status = 'failed') THEN 'failed'
    WHEN EXISTS (SELECT 1 FROM events WHERE events.id = notifications.event_id AND events.canceled_at IS NOT NULL)
      AND NOT EXISTS (SELECT 1 FROM jobs WHERE jobs.notification_id = notifications.id AND jobs.status = 'completed'
        AND jobs.kind = 'step' AND jobs.type IN (${CHANNELS.map((channel) => `'${channel}'`).join(', ')})) THEN 'canceled'
    ELSE 'completed' END
  WHERE status IN ('pending', 'processing')
    AND (NOT EXISTS (SELECT 1 FROM jobs WHERE jobs.notification_id = notifications.id AND jobs.status = 'merged')
      OR EXISTS (SELECT 1 FROM jobs WHERE jobs.notification_id = notifications.id AND jobs.status <> 'merged'))`;

/** Notifications whose work is over (their last step done, or their event canceled) take their final status (SETTLE). */
export async function settleNotifications(trx: Runner, ids: string[], now: Date): Promise<void> {
  for (const part of chunks(ids)) {
    const list = inList(trx, 'id', part);
    await changeRows(trx, `${SETTLE} AND ${list.sql}`, [now.toISOString(), ...list.bindings]);
  }
}

/**
 * After an event is canceled: its notifications settled (SETTLE), but for those with a job still
 * running, which settle when it ends (settleNotifications).
 */
export async function settleCanceledNotifications(trx: Runner, eventId: string, now: Date): Promise<void> {
  await changeRows(
    trx,
    `${SETTLE} AND event_id = ? AND NOT EXISTS (SELECT 1 FROM jobs WHERE jobs.notification_id = notifications.id AND jobs.status = 'running')`,
    [now.toISOString(), eventId],
  );
}

/** A notification without its payload, for a list that shows none (the dashboard's Activity). */
export type NotificationSummary = Omit<Notification, 'payload'>;

function summaryOf(row: Record<string, unknown>): NotificationSummary {
  return {
    notificationId: row.id as string,
    _id: row.id as string,
    transactionId: row.transaction_id as string,
    workflowId: row.workflow_key as string,
    subscriberId: row.subscriber_id as string,
    _subscriberId: row.subscriber_id as string,
    channels: readJson(row.channels, []),
    status: row.status as NotificationStatus,
    _organizationId: row.organization_id as string,
    _environmentId: row.environment_id as string,
    createdAt: row.created_at as string,
    updatedAt: row.updated_at as string,
  };
}

/** A notification as the API answers it; `answered`, made only for an answer (its payload as stored if large: setStoredJson). */
function toWire(row: Record<string, unknown>, answered = false): Notification {
  const notification: Notification = Object.assign(summaryOf(row), { payload: {} });
  setStoredJson(notification, 'payload', row.payload, {}, answered);
  return notification;
}

// The columns summaryOf and toWire read, by name: on SQLite a read of `*` has its rows named one by one (sqlite.ts, postgres.ts).
const SUMMARY_COLUMNS = `n.id, n.environment_id, e.organization_id, n.transaction_id, n.workflow_key, n.subscriber_id,
  n.channels, n.status, n.created_at, n.updated_at`;

/** The environment's notifications with their columns; with `payload`, their event's payload too. */
function scoped(db: Db, environmentId: string, payload = true) {
  const query = db('notifications as n').join('environments as e', 'e.id', 'n.environment_id').where('n.environment_id', environmentId);
  return payload ? query.join('events as ev', 'ev.id', 'n.event_id').select(db.raw(`${SUMMARY_COLUMNS}, ev.payload`)) : query.select(db.raw(SUMMARY_COLUMNS));
}

export interface NotificationFilters {
  channel?: string;
  workflowId?: string;
  subscriberId?: string;
  transactionId?: string;
  status?: NotificationStatus;
  createdAfter?: string;
  createdBefore?: string;
}

/**
 * A `date-time` from the contract, written as stored times are. The contract's format (RFC 3339)
 * admits two forms JavaScript's Date does not read: a leap second (`23:59:60`, here the instant
 * after 23:59:59) and an offset of hours alone (`+01`). Times beyond the four-digit years stored
 * times have are held at the ends of that range, so they still compare as text.
 */
function storedInstant(value: string): string {
  const text = value.replace(/([+-]\d\d)$/, '$1:00');
  const leap = /(\d\d:\d\d):60/;
  const ms = leap.test(text) ? Date.parse(text.replace(leap, '$1:59')) + 1000 : Date.parse(text);
  const first = Date.parse('0000-01-01T00:00:00.000Z');
  const last = Date.parse('9999-12-31T23:59:59.999Z');
  return new Date(Number.isNaN(ms) ? first : Math.min(last, Math.max(first, ms))).toISOString();
}

const FILTERS = ['channel', 'workflowId', 'subscriberId', 'transactionId', 'status', 'createdAfter', 'createdBefore'] as const satisfies ReadonlyArray<keyof NotificationFilters>;

/**
 * A notification names `channel` among its channels (a JSON array of names, in text): word for word
 * the condition of the channel's partial index (migration 20261125_89), so that a list can use it.
 */
function channelCondition(channel: string): string {
  return `channels LIKE '%"${channel}"%'`;
}

/**
 * The environment's notifications that pass the filters, without the page's joins: what a page
 * is picked from and its total counted on, each filter through its own index (migration 89).
 */
function filtered(db: Db, environmentId: string, filters: NotificationFilters) {
  const query = db('notifications').where('environment_id', environmentId);
  if (filters.workflowId) query.where('workflow_key', filters.workflowId);
  if (filters.subscriberId) query.where('subscriber_id', filters.subscriberId);
  if (filters.transactionId) query.where('transaction_id', filters.transactionId);
  if (filters.status) query.where('status', filters.status);
  // Times are stored as ISO strings in UTC with milliseconds, so they compare as text once the
  // filter is written the same way.
  if (filters.createdAfter) query.where('created_at', '>=', storedInstant(filters.createdAfter));
  if (filters.createdBefore) query.where('created_at', '<', storedInstant(filters.createdBefore));
  if (filters.channel) {
    // A channel's name is written into the text, as its partial index's condition is, or the
    // planner cannot use that index; only the contract's names are (it admits no other).
    if ((CHANNELS as readonly string[]).includes(filters.channel)) query.whereRaw(channelCondition(filters.channel));
    else query.where('channels', 'like', `%"${filters.channel}"%`);
  }
  return query;
}

/** A kept total: the sum of its shards (one on SQLite; on PostgreSQL several, so that writers never share a row). */
async function keptTotal(db: Db, sql: string, bindings: string[]): Promise<number> {
  const [row] = await selectRows<{ n: number | string | null }>(db, sql, bindings);
  return Number(row?.n ?? 0);
}

/** The environment's notifications, all of them: kept by the triggers of migration 90 in each write's transaction. */
export function countNotifications(db: Db, environmentId: string): Promise<number> {
  return keptTotal(db, 'SELECT sum(total) AS n FROM notification_counts WHERE environment_id = ?', [environmentId]);
}

/** The filters whose totals are kept, one value at a time (migration 20261127_02), and the facet each is kept under. */
export const KEPT_FACETS = { status: 'status', channel: 'channel', workflowId: 'workflow' } as const;

/** The kept total of one filter alone (one shard on SQLite, one per connection on PostgreSQL). */
export function countNotificationFacet(db: Db, environmentId: string, facet: (typeof KEPT_FACETS)[keyof typeof KEPT_FACETS], value: string): Promise<number> {
  return keptTotal(db, 'SELECT sum(total) AS n FROM notification_facet_counts WHERE environment_id = ? AND facet = ? AND value = ?', [environmentId, facet, value]);
}

/**
 * A list's exact total: kept for no filter or for one kept facet alone, else counted through the
 * filters' index.
 */
function totalOf(db: Db, environmentId: string, filters: NotificationFilters): Promise<number> {
  const used = FILTERS.filter((name) => filters[name]);
  if (used.length === 0) return countNotifications(db, environmentId);
  const [only] = used;
  if (used.length === 1 && only in KEPT_FACETS) {
    const facet = only as keyof typeof KEPT_FACETS;
    return countNotificationFacet(db, environmentId, KEPT_FACETS[facet], filters[facet]!);
  }
  return countOf(filtered(db, environmentId, filters));
}

/** The advisory lock that lets one process at a time fold (any constant both sides agree on). */
const FOLD_LOCK = 7_243_001;

/** The totals kept in a shard per PostgreSQL connection: each table, and the columns that name a total besides its shard. */
const SHARDED_TOTALS = [
  { table: 'notification_facet_counts', key: ['environment_id', 'facet', 'value'] },
  { table: 'notification_hour_counts', key: ['environment_id', 'hour'] },
];

/**
 * PostgreSQL keeps facet and hour totals in one shard per connection: fold the shards of
 * connections that have ended into shard 0, so the rows summed stay about as many as the
 * connections open. Only ended connections' rows are touched, which no writer holds (but a new
 * connection that happens to reuse an ended one's pid), and one process folds at a time. (SQLite
 * has shard 0 only.)
 */
export async function foldEndedCountShards(db: Db): Promise<number> {
  if (!isPostgres(db)) return 0;
  return db.transaction(async (trx) => {
    const [{ locked }] = await selectRows<{ locked: boolean }>(trx, 'SELECT pg_try_advisory_xact_lock(?) AS locked', [FOLD_LOCK]);
    if (!locked) return 0;
    let folded = 0;
    for (const { table, key } of SHARDED_TOTALS) {
      const columns = key.join(', ');
      folded += await changeRows(
        trx,
        `WITH ended AS (
         DELETE FROM ${table} WHERE shard <> 0 AND shard NOT IN (SELECT pid FROM pg_stat_activity)
         RETURNING ${columns}, total)
       INSERT INTO ${table} (${columns}, shard, total)
         SELECT ${columns}, 0, sum(total) FROM ended GROUP BY ${columns} ORDER BY ${columns}
         ON CONFLICT (${columns}, shard) DO UPDATE SET total = ${table}.total + EXCLUDED.total`,
        [],
      );
    }
    return folded;
  });
}

/** The hour a time falls in, as the hour totals name it (migration 20261206_02): 'YYYY-MM-DDTHH', UTC. */
function hourOf(at: Date): string {
  return at.toISOString().slice(0, 13);
}

/**
 * Hours whose notifications retention removed leave a kept total of 0 behind, a row an hour per
 * environment for ever: those up to `before`'s hour go (read through the key, from the oldest). A
 * total of 0 adds nothing to any sum, so this changes no count, whichever shard it is in.
 */
export async function dropEmptyHourTotals(db: Db, environmentId: string, before: Date): Promise<number> {
  return changeRows(db, `DELETE FROM notification_hour_counts WHERE environment_id = ? AND hour <= ? AND total = 0`, [environmentId, hourOf(before)]);
}

/**
 * The page's ids, each with the bytes of the payload its row will carry (its event's, measured
 * without reading it, for the page's rows only), reserved before the rows are read (answer-memory.ts).
 */
async function idsReserved(db: Db, paged: Knex.QueryBuilder, offset: number, reserve: ReserveForAnswer): Promise<string[]> {
  const sized = db
    .queryBuilder()
    .select('p.id', db.raw(`(SELECT ${bytesOf(['ev.payload'])} FROM notifications n2 JOIN events ev ON ev.id = n2.event_id WHERE n2.id = p.id) AS b`))
    .from(paged.clone().select('created_at').as('p'))
    .orderBy([
      { column: 'p.created_at', order: 'desc' },
      { column: 'p.id', order: 'desc' },
    ]);
  const rows = await pageRows<{ id: string; b: number | string | null }>(sized, offset);
  await reserve(rows.reduce((sum, row) => sum + Number(row.b ?? 0), 0));
  return rows.map((row) => row.id);
}

/**
 * One page of notifications, newest first, with the exact total: the total kept for the whole
 * environment or for one status, channel or workflow, or for other filters counted from their
 * index; the page's ids from the same index (off the event loop once deep), then only those rows
 * read with their joins (off the event loop if they are large).
 */
export async function listNotifications(db: Db, environmentId: string, page: PageRequest, filters: NotificationFilters): Promise<Page<Notification>> {
  const { totalCount, rows } = await pageOfRows(db, environmentId, page, filters, true);
  return pageOf(await toWireInSlices(rows, (slice) => slice.map((row) => toWire(row, true))), totalCount, page);
}

/** listNotifications without the payloads, which are neither read nor reserved for. */
export async function listNotificationSummaries(db: Db, environmentId: string, page: PageRequest, filters: NotificationFilters): Promise<Page<NotificationSummary>> {
  const { totalCount, rows } = await pageOfRows(db, environmentId, page, filters, false);
  return pageOf(rows.map(summaryOf), totalCount, page);
}

async function pageOfRows(db: Db, environmentId: string, page: PageRequest, filters: NotificationFilters, payload: boolean) {
  const totalCount = await totalOf(db, environmentId, filters);
  const offset = page.page * page.limit;
  if (offset >= totalCount) return { totalCount, rows: [] };
  const picked = filtered(db, environmentId, filters).select('id').orderBy([
    { column: 'created_at', order: 'desc' },
    { column: 'id', order: 'desc' },
  ]);
  const paged = picked.limit(page.limit).offset(offset);
  const ids =
    payload && page.reserve ? await idsReserved(db, paged, offset, page.reserve) : (await pageRows<{ id: string }>(paged, offset)).map((row) => row.id);
  if (ids.length === 0) return { totalCount, rows: [] };
  const rows = await selectBuiltPage<Record<string, unknown>>(scoped(db, environmentId, payload).whereIn('n.id', ids));
  const byId = new Map(rows.map((row) => [row.id as string, row]));
  return { totalCount, rows: ids.flatMap((id) => (byId.has(id) ? [byId.get(id)!] : [])) };
}

/** The notification; `answered` when it is read only to be answered (see toWire). */
export async function findNotification(db: Db, environmentId: string, notificationId: string, answered = false): Promise<Notification | undefined> {
  const row = await scoped(db, environmentId).where('n.id', notificationId).first();
  return row ? toWire(row, answered) : undefined;
}

const STAT_STATUSES = ['pending', 'processing', 'completed', 'failed', 'canceled'] as const;

const HOUR_MS = 3_600_000;

/**
 * How many notifications were made since `since`, from kept totals (migration 20261206_02): the
 * whole hours after the one `since` falls in, and a count of that hour's rows from `since` on.
 */
function madeSince(environmentId: string, since: Date): { sql: string; bindings: string[] } {
  const nextHour = new Date(Math.floor(since.getTime() / HOUR_MS) * HOUR_MS + HOUR_MS).toISOString();
  return {
    sql: `(SELECT coalesce(sum(total), 0) FROM notification_hour_counts WHERE environment_id = ? AND hour > ?)
      + (SELECT count(*) FROM notifications WHERE environment_id = ? AND created_at >= ? AND created_at < ?)`,
    bindings: [environmentId, hourOf(since), environmentId, since.toISOString(), nextHour],
  };
}

/**
 * The counts behind GET /notifications/stats, exact and from kept totals: by status and channel as
 * the list's filters keep them, and the last 7 and 30 days by the hour. The two hours the windows
 * start in are counted from their rows, off the event loop (selectRowsInBackground).
 */
export async function notificationStats(db: Db, environmentId: string, now: Date) {
  const [week, month] = [7, 30].map((days) => madeSince(environmentId, new Date(now.getTime() - days * 86_400_000)));
  const rows = await selectRowsInBackground<{ facet: string; value: string; n: number | string }>(
    db,
    `SELECT facet, value, sum(total) AS n FROM notification_facet_counts WHERE environment_id = ? AND facet IN ('status', 'channel') GROUP BY facet, value
      UNION ALL SELECT 'made', 'week', ${week.sql}
      UNION ALL SELECT 'made', 'month', ${month.sql}`,
    [environmentId, ...week.bindings, ...month.bindings],
  );
  const kept = new Map(rows.map((row) => [`${row.facet}:${row.value}`, Number(row.n)]));
  const counted = <Name extends string>(facet: string, names: readonly Name[]) =>
    Object.fromEntries(names.map((name) => [name, kept.get(`${facet}:${name}`) ?? 0])) as Record<Name, number>;
  return {
    weeklySent: kept.get('made:week')!,
    monthlySent: kept.get('made:month')!,
    byChannel: counted('channel', CHANNELS),
    byStatus: counted('status', STAT_STATUSES),
  };
}

/** Notifications whose payloads rode in another's digest send take its status, once they are still open. */
export async function settleRiders(trx: Runner, leaderId: string, riders: string[], now: Date): Promise<void> {
  const pace = pacer();
  for (const part of chunks(riders, MOVED_AT_ONCE)) {
    await pace();
    const list = inList(trx, 'id', part);
    await changeRows(
      trx,
      `UPDATE notifications SET status = (SELECT status FROM notifications WHERE id = ?), updated_at = ?
        WHERE ${list.sql} AND status IN ('pending', 'processing')`,
      [leaderId, now.toISOString(), ...list.bindings],
    );
  }
}

/** Whom each notification is for, by notification id, with the bytes of the subscriber's `data` (measured by the database without reading it). */
export async function notificationRecipients(db: Runner, ids: string[]): Promise<Map<string, { subscriber_id: string; subscriber_key: string; data_bytes: number }>> {
  const recipients = new Map<string, { subscriber_id: string; subscriber_key: string; data_bytes: number }>();
  for (const part of chunks(ids)) {
    const rows: Array<{ id: string; subscriber_id: string; subscriber_key: string; data_bytes: number | string | null }> = await db('notifications as n')
      .leftJoin('subscribers as s', 's.id', 'n.subscriber_key')
      .whereIn('n.id', part)
      .select('n.id', 'n.subscriber_id', 'n.subscriber_key', db.raw('octet_length(s.data) as data_bytes'));
    for (const row of rows) recipients.set(row.id, { ...row, data_bytes: Number(row.data_bytes ?? 0) });
  }
  return recipients;
}

/**
 * Notifications a statement moves at once when there may be tens of thousands (a digest's riders):
 * each row moved writes its indexes and kept totals, so a statement of many holds the event loop.
 */
const MOVED_AT_ONCE = 100;

/** Pending notifications are under way: a step of theirs was claimed, or one is done and another to come. */
export async function markNotificationsProcessing(trx: Runner, ids: string[], now: Date): Promise<void> {
  // The loop turns between the parts.
  const pace = pacer();
  for (const part of chunks(ids, MOVED_AT_ONCE)) {
    await trx('notifications').whereIn('id', part).where('status', 'pending').update({ status: 'processing', updated_at: now.toISOString() });
    await pace();
  }
}


/** An event's notifications with one of `statuses`, with whom each is for (a webhook's notification.canceled). */
export async function notificationsOfEvent(trx: Runner, eventId: string, statuses: NotificationStatus[]): Promise<Array<{ id: string; subscriber_id: string }>> {
  return selectRows<{ id: string; subscriber_id: string }>(
    trx,
    `SELECT id, subscriber_id FROM notifications WHERE event_id = ? AND status IN (${statuses.map(() => '?').join(', ')})`,
    [eventId, ...statuses],
  );
}
