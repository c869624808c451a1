// The inbox's tables: the messages as a subscriber's browser sees them, each subscriber's counts
// row (inbox_counts) and numbered events (inbox_events). Every change goes through the engine's
// inbox functions (engine/inbox.ts), which call these in one transaction: the message rows, then
// the counts row (its update locks it, and so orders the subscriber's events), then the events.
// Who may reach the inbox (secrets, origins, tickets) is in inbox-access.ts.
import type { Db, Runner } from '../knex.js';
import { inList, isPostgres, selectPage, selectRows, changeRows } from '../knex.js';
import type { Schemas } from '../../contract.js';
import { yieldToEventLoop } from '../../turns.js';
import { readBool, readJson, setStoredJson } from '../json.js';
import { insertRows } from '../insert-rows.js';
import { bytesOf, toWireInSlices, type Page, type PageRequest } from '../paginate.js';

export type InboxItem = Schemas['InboxMessage'];
export type InboxCounts = Schemas['InboxCounts'];
export type InboxEventType = Schemas['InboxEvent']['type'];

export const NO_COUNTS: InboxCounts = { unread: 0, unseen: 0, total: 0, archived: 0 };

const ITEM_COLUMNS = `id, workflow_key, transaction_id, subject, content, url, avatar, primary_action, secondary_action,
  tags, data, seen, read, archived, seen_at, read_at, archived_at, created_at, notification_id, subscriber_id`;
/** The columns of an item that can be large: a message's fields render up to 1 MiB together, each up to 256 KiB. */
const LARGE_ITEM_COLUMNS = ['subject', 'content', 'url', 'avatar', 'primary_action', 'secondary_action', 'tags', 'data'];

/** A message row as the inbox answers it; `answered`, made only for an answer (its `data` as stored if large: setStoredJson). */
export function toItem(row: Record<string, unknown>, answered = false): InboxItem {
  const item: InboxItem = {
    messageId: row.id as string,
    workflowId: row.workflow_key as string,
    transactionId: row.transaction_id as string,
    body: row.content as string,
    tags: readJson<string[]>(row.tags, []),
    data: {},
    createdAt: row.created_at as string,
    seenAt: readBool(row.seen) ? ((row.seen_at as string | null) ?? (row.created_at as string)) : null,
    readAt: readBool(row.read) ? ((row.read_at as string | null) ?? (row.created_at as string)) : null,
    archivedAt: readBool(row.archived) ? ((row.archived_at as string | null) ?? (row.created_at as string)) : null,
  };
  setStoredJson(item, 'data', row.data, {}, answered);
  if (row.subject !== null && row.subject !== undefined) item.subject = row.subject as string;
  if (row.avatar !== null && row.avatar !== undefined) item.avatar = row.avatar as string;
  if (row.url !== null && row.url !== undefined) item.redirect = { url: row.url as string };
  const primary = readJson<InboxItem['primaryAction'] | null>(row.primary_action, null);
  if (primary) item.primaryAction = primary;
  const secondary = readJson<InboxItem['secondaryAction'] | null>(row.secondary_action, null);
  if (secondary) item.secondaryAction = secondary;
  return item;
}

/** The state of a message that its counts depend on. */
export interface MessageState {
  id: string;
  seen: boolean;
  read: boolean;
  archived: boolean;
}

/** A message a change touched: its state after, and the row's columns that say whose it is. */
export interface ChangedMessage extends MessageState {
  row: Record<string, unknown>;
}

export interface InboxFilters {
  status?: 'unread' | 'read' | 'unseen' | 'seen';
  archived?: 'exclude' | 'include' | 'only';
  workflowId?: string;
  tag?: string;
}

export interface Cursor {
  createdAt: string;
  id: string;
}

/** Where a message sits in the feed's order, for the `before`/`after`/`upTo` cursors. */
export async function cursorOf(db: Runner, subscriberKey: string, messageId: string): Promise<Cursor | undefined> {
  const [row] = await selectRows<{ created_at: string; id: string }>(db, 'SELECT created_at, id FROM messages WHERE subscriber_key = ? AND id = ?', [
    subscriberKey,
    messageId,
  ]);
  return row && { createdAt: row.created_at, id: row.id };
}

function filterSql(db: Runner, subscriberKey: string, filters: InboxFilters): { sql: string; bindings: unknown[] } {
  const where = ['subscriber_key = ?'];
  const bindings: unknown[] = [subscriberKey];
  const archived = filters.archived ?? 'exclude';
  // Booleans as literals: SQLite's read connection takes no boolean bindings, PostgreSQL no 0/1 for a boolean.
  if (archived !== 'include') where.push(archived === 'only' ? 'archived = TRUE' : 'archived = FALSE');
  if (filters.status === 'unread') where.push('read = FALSE');
  if (filters.status === 'read') where.push('read = TRUE');
  if (filters.status === 'unseen') where.push('seen = FALSE');
  if (filters.status === 'seen') where.push('seen = TRUE');
  if (filters.workflowId !== undefined) where.push('workflow_key = ?'), bindings.push(filters.workflowId);
  if (filters.tag !== undefined) {
    where.push(
      isPostgres(db as Db)
        ? 'tags IS NOT NULL AND EXISTS (SELECT 1 FROM jsonb_array_elements_text(tags::jsonb) t WHERE t = ?)'
        : 'tags IS NOT NULL AND EXISTS (SELECT 1 FROM json_each(tags) WHERE json_each.value = ?)',
    );
    bindings.push(filters.tag);
  }
  return { sql: where.join(' AND '), bindings };
}

/**
 * One page of the inbox, newest first. `before` lists what is older than a message; `after` the
 * `limit` messages just newer than one (the closest first in the query, answered newest first), so
 * a client that repeats `after` with the newest it got walks up without a gap.
 */
export async function listInbox(
  db: Runner,
  subscriberKey: string,
  filters: InboxFilters,
  page: PageRequest,
  cursor: { before?: Cursor; after?: Cursor },
): Promise<Page<InboxItem>> {
  const filter = filterSql(db, subscriberKey, filters);
  let sql = filter.sql;
  const bindings = [...filter.bindings];
  if (cursor.before) {
    sql += ' AND (created_at < ? OR (created_at = ? AND id < ?))';
    bindings.push(cursor.before.createdAt, cursor.before.createdAt, cursor.before.id);
  }
  if (cursor.after) {
    sql += ' AND (created_at > ? OR (created_at = ? AND id > ?))';
    bindings.push(cursor.after.createdAt, cursor.after.createdAt, cursor.after.id);
  }
  const order = cursor.after && !cursor.before ? 'ASC' : 'DESC';
  const offset = page.page * page.limit;
  // One more than asked says whether there is more, without counting what lies past the cursor.
  const paged = `FROM messages WHERE ${sql} ORDER BY created_at ${order}, id ${order} LIMIT ? OFFSET ?`;
  const pageBindings = [...bindings, page.limit + 1, offset] as never[];
  // With the count, the bytes of the page's large fields, measured without reading them, reserved
  // before the page is read (answer-memory.ts).
  const counted = `(SELECT COUNT(*) FROM messages WHERE ${filter.sql}) AS n`;
  const sized = `(SELECT sum(b) FROM (SELECT ${bytesOf(LARGE_ITEM_COLUMNS)} AS b ${paged}) p) AS b`;
  const [{ n, b }] = await selectRows<{ n: number | string; b?: number | string | null }>(
    db,
    page.reserve ? `SELECT ${counted}, ${sized}` : `SELECT ${counted}`,
    (page.reserve ? [...filter.bindings, ...pageBindings] : filter.bindings) as never[],
  );
  const totalCount = Number(n);
  await page.reserve?.(Number(b ?? 0));
  const rows = await selectPage<Record<string, unknown>>(db, `SELECT ${ITEM_COLUMNS} ${paged}`, pageBindings);
  const hasMore = rows.length > page.limit;
  const shown = rows.slice(0, page.limit);
  if (order === 'ASC') shown.reverse();
  return { data: await toWireInSlices(shown, (slice) => slice.map((row) => toItem(row, true))), totalCount, page: page.page, pageSize: page.limit, hasMore };
}

/** The message as the inbox answers it; `answered` when it is read only to be written (see toItem). */
export async function findItem(db: Runner, subscriberKey: string, messageId: string, answered = false): Promise<InboxItem | undefined> {
  const [row] = await selectRows<Record<string, unknown>>(db, `SELECT ${ITEM_COLUMNS} FROM messages WHERE subscriber_key = ? AND id = ?`, [subscriberKey, messageId]);
  return row && toItem(row, answered);
}


/** A message's state, its row locked on PostgreSQL until the transaction ends (SQLite writes one transaction at a time). */
export async function lockMessage(trx: Runner, subscriberKey: string, messageId: string): Promise<(MessageState & { row: Record<string, unknown> }) | undefined> {
  const lock = isPostgres(trx as Db) ? ' FOR UPDATE' : '';
  const [row] = await selectRows<Record<string, unknown>>(trx, `SELECT ${ITEM_COLUMNS} FROM messages WHERE subscriber_key = ? AND id = ?${lock}`, [
    subscriberKey,
    messageId,
  ]);
  return row && { id: row.id as string, seen: readBool(row.seen), read: readBool(row.read), archived: readBool(row.archived), row };
}

/** Writes a message's new states; a state set keeps the first time it was set. */
export async function writeMessageState(trx: Runner, messageId: string, next: MessageState, now: Date): Promise<void> {
  const at = now.toISOString();
  await changeRows(
    trx,
    `UPDATE messages SET
       seen = ?, seen_at = CASE WHEN ? THEN COALESCE(seen_at, ?) ELSE NULL END,
       read = ?, read_at = CASE WHEN ? THEN COALESCE(read_at, ?) ELSE NULL END,
       archived = ?, archived_at = CASE WHEN ? THEN COALESCE(archived_at, ?) ELSE NULL END
     WHERE id = ?`,
    [next.seen, next.seen, at, next.read, next.read, at, next.archived, next.archived, at, messageId] as never[],
  );
}

export async function writeAction(trx: Runner, messageId: string, column: 'primary_action' | 'secondary_action', action: unknown): Promise<void> {
  await changeRows(trx, `UPDATE messages SET ${column} = ? WHERE id = ?`, [JSON.stringify(action), messageId]);
}

/** The messages of these notifications, each with whose it is and the states its counts depend on. */
export async function messagesOfNotifications(trx: Runner, notificationIds: string[]): Promise<Array<MessageState & { subscriberKey: string; environmentId: string }>> {
  const list = inList(trx, 'notification_id', notificationIds);
  const rows = await selectRows<Record<string, unknown>>(trx, `SELECT id, subscriber_key, environment_id, seen, read, archived FROM messages WHERE ${list.sql}`, list.bindings);
  return rows.map((row) => ({
    id: row.id as string,
    subscriberKey: row.subscriber_key as string,
    environmentId: row.environment_id as string,
    seen: readBool(row.seen),
    read: readBool(row.read),
    archived: readBool(row.archived),
  }));
}

export async function deleteMessageRow(trx: Runner, messageId: string): Promise<void> {
  await changeRows(trx, 'DELETE FROM messages WHERE id = ?', [messageId]);
}

/**
 * The messages one statement of a bulk change sets on SQLite, which runs each statement on the
 * event loop: "mark all as read" over an inbox of 10,000 messages held it throughout.
 */
export const CHANGED_AT_ONCE = 1_000;

const CHANGED_COLUMNS = 'id, seen, read, archived, seen_at, read_at, notification_id, subscriber_id, transaction_id, workflow_key, created_at';

/**
 * Sets one state on every message of the subscriber up to the cursor that does not have it yet,
 * and answers the changed messages' other states (to count them). The WHERE
 * re-checks the state under the row's lock on PostgreSQL, so two concurrent calls never count a
 * message twice. SQLite goes CHANGED_AT_ONCE messages at a time, oldest first, the loop turning
 * between the parts (the caller's transaction stays one); PostgreSQL's one statement leaves the
 * loop free.
 */
export async function setStateUpTo(
  trx: Runner,
  subscriberKey: string,
  state: 'seen' | 'read' | 'archived',
  value: boolean,
  upTo: Cursor | undefined,
  now: Date,
): Promise<ChangedMessage[]> {
  const at = value ? now.toISOString() : null;
  const set = `UPDATE messages SET ${state} = ?, ${state}_at = ${value ? `COALESCE(${state}_at, ?)` : '?'}`;
  let mine = `subscriber_key = ? AND ${state} = ?`;
  const mineBindings: unknown[] = [subscriberKey, !value];
  if (upTo) {
    mine += ' AND (created_at < ? OR (created_at = ? AND id <= ?))';
    mineBindings.push(upTo.createdAt, upTo.createdAt, upTo.id);
  }
  if (isPostgres(trx as Db)) {
    const rows = await selectRows<Record<string, unknown>>(trx, `${set} WHERE ${mine} RETURNING ${CHANGED_COLUMNS}`, [value, at, ...mineBindings] as never[]);
    return rows.map(changedMessage);
  }
  const changed: ChangedMessage[] = [];
  let after: Record<string, unknown> | undefined;
  for (;;) {
    const past = after ? ' AND (created_at > ? OR (created_at = ? AND id > ?))' : '';
    const pastBindings = after ? [after.created_at, after.created_at, after.id] : [];
    const rows = await selectRows<Record<string, unknown>>(
      trx,
      `${set} WHERE rowid IN (SELECT rowid FROM messages WHERE ${mine}${past} ORDER BY created_at, id LIMIT ?) RETURNING ${CHANGED_COLUMNS}`,
      [value, at, ...mineBindings, ...pastBindings, CHANGED_AT_ONCE] as never[],
    );
    rows.sort(byAge);
    for (const row of rows) changed.push(changedMessage(row));
    if (rows.length < CHANGED_AT_ONCE) return changed;
    after = rows[rows.length - 1];
    await yieldToEventLoop();
  }
}

/** Oldest first, as the subscriber's index orders them (and so as one statement over it returned them). */
const byAge = (a: Record<string, unknown>, b: Record<string, unknown>) =>
  a.created_at === b.created_at ? ((a.id as string) < (b.id as string) ? -1 : 1) : (a.created_at as string) < (b.created_at as string) ? -1 : 1;

const changedMessage = (row: Record<string, unknown>): ChangedMessage => ({
  id: row.id as string,
  seen: readBool(row.seen),
  read: readBool(row.read),
  archived: readBool(row.archived),
  row,
});

export async function readCounts(db: Runner, subscriberKey: string): Promise<InboxCounts & { seq: number }> {
  const [row] = await selectRows<Record<string, number | string>>(db, 'SELECT unread, unseen, total, archived, seq FROM inbox_counts WHERE subscriber_key = ?', [subscriberKey]);
  return row ? countsOf(row) : { ...NO_COUNTS, seq: 0 };
}

function countsOf(row: Record<string, unknown>): InboxCounts & { seq: number } {
  return { unread: Number(row.unread), unseen: Number(row.unseen), total: Number(row.total), archived: Number(row.archived), seq: Number(row.seq) };
}

/** One subscriber's share of a change: how its counts move, how many events it gets, and how many new messages it stamps. */
export interface CountsChange {
  subscriberKey: string;
  environmentId: string;
  unread: number;
  unseen: number;
  total: number;
  archived: number;
  events: number;
  newMessages: number;
}

/** A subscriber's counts and last event number after a change, and the time of its new messages (epoch ms), if it has any. */
export type BumpedCounts = InboxCounts & { seq: number; newMessagesMs?: number };

/** Statements of at most this many rows: 8 values a row stays under SQLite's bound-variable limit. */
const BUMP_CHUNK = 2000;

/**
 * Moves the counts of many subscribers and takes their next event numbers, in one statement per
 * chunk: an upsert whose update locks each row until the transaction ends, so a subscriber's
 * events are numbered in commit order, without a gap. Its new messages get a time in that order
 * too: `now`, or 1 ms after its newest message so far (the row keeps its time) when that is not
 * earlier, whichever worker's clock `now` was read from and when. Answers each subscriber's counts
 * after the change, its new last `seq`, and the time of its new messages.
 */
export async function bumpCounts(trx: Runner, changes: CountsChange[], now: Date): Promise<Map<string, BumpedCounts>> {
  const out = new Map<string, BumpedCounts>();
  const greatest = isPostgres(trx as Db) ? 'GREATEST' : 'max';
  for (let start = 0; start < changes.length; start += BUMP_CHUNK) {
    const chunk = changes.slice(start, start + BUMP_CHUNK);
    const rows = await selectRows<Record<string, unknown>>(
      trx,
      `INSERT INTO inbox_counts (subscriber_key, environment_id, unread, unseen, total, archived, seq, last_message_ms)
       VALUES ${chunk.map(() => '(?, ?, ?, ?, ?, ?, ?, ?)').join(', ')}
       ON CONFLICT (subscriber_key) DO UPDATE SET
         unread = inbox_counts.unread + excluded.unread, unseen = inbox_counts.unseen + excluded.unseen,
         total = inbox_counts.total + excluded.total, archived = inbox_counts.archived + excluded.archived,
         seq = inbox_counts.seq + excluded.seq,
         last_message_ms = CASE WHEN excluded.last_message_ms IS NULL THEN inbox_counts.last_message_ms
           ELSE ${greatest}(excluded.last_message_ms, COALESCE(inbox_counts.last_message_ms, 0) + 1) END
       RETURNING subscriber_key, unread, unseen, total, archived, seq, last_message_ms`,
      chunk.flatMap((c) => [c.subscriberKey, c.environmentId, c.unread, c.unseen, c.total, c.archived, c.events, c.newMessages > 0 ? now.getTime() : null]) as never[],
    );
    const withMessages = new Set(chunk.filter((c) => c.newMessages > 0).map((c) => c.subscriberKey));
    for (const row of rows) {
      const key = row.subscriber_key as string;
      out.set(key, withMessages.has(key) ? { ...countsOf(row), newMessagesMs: Number(row.last_message_ms) } : countsOf(row));
    }
  }
  return out;
}

/** Gives a subscriber's new messages, stored at another time than the one bumpCounts answered, that time. */
export async function restampMessages(trx: Runner, ids: string[], createdAt: string): Promise<void> {
  const { sql, bindings } = inList(trx, 'id', ids);
  await changeRows(trx, `UPDATE messages SET created_at = ? WHERE ${sql}`, [createdAt, ...bindings]);
}

export interface InboxEventRow {
  subscriberKey: string;
  environmentId: string;
  seq: number;
  type: InboxEventType;
  payload: string;
}

export async function insertEvents(trx: Runner, events: InboxEventRow[], now: Date): Promise<void> {
  const at = now.toISOString();
  await insertRows(
    trx,
    'inbox_events',
    events.map((e) => ({ subscriber_key: e.subscriberKey, seq: e.seq, environment_id: e.environmentId, type: e.type, payload: e.payload, created_at: at })),
  );
}

/** The channel the API processes LISTEN on: its payload names the subscribers whose inboxes changed. */
export const INBOX_CHANNEL = 'herald_inbox';
/** NOTIFY's payload must stay under 8,000 bytes: a longer list is sent as `*` (look at all of them). */
const MAX_NOTIFY_BYTES = 7000;

/**
 * PostgreSQL: tells every API process, when this transaction commits (and only then), which
 * subscribers' inboxes changed; one notification per transaction, however many subscribers.
 * SQLite: nothing (one process; its streams are woken after the commit, inbox-bus.ts).
 */
export async function notifyInboxChanged(trx: Runner, origin: string, subscriberKeys: string[]): Promise<void> {
  if (!isPostgres(trx as Db) || subscriberKeys.length === 0) return;
  let payload = `${origin} ${subscriberKeys.join(',')}`;
  if (payload.length > MAX_NOTIFY_BYTES) payload = `${origin} *`;
  await selectRows(trx, 'SELECT pg_notify(?, ?)', [INBOX_CHANNEL, payload]);
}

export interface StoredEvent {
  subscriberKey: string;
  seq: number;
  type: InboxEventType;
  payload: string;
  createdAt: string;
}

/** The events of one subscriber after `seq`, in order, at most `limit`. */
export async function eventsAfter(db: Runner, subscriberKey: string, seq: number, limit: number): Promise<StoredEvent[]> {
  const rows = await selectRows<Record<string, unknown>>(
    db,
    'SELECT subscriber_key, seq, type, payload, created_at FROM inbox_events WHERE subscriber_key = ? AND seq > ? ORDER BY seq LIMIT ?',
    [subscriberKey, seq, limit],
  );
  return rows.map(storedEvent);
}

function storedEvent(row: Record<string, unknown>): StoredEvent {
  return { subscriberKey: row.subscriber_key as string, seq: Number(row.seq), type: row.type as InboxEventType, payload: row.payload as string, createdAt: row.created_at as string };
}

/** The oldest event still kept for a subscriber (0 when none): a stream behind it has a gap. */
export async function oldestSeq(db: Runner, subscriberKey: string): Promise<number> {
  const [row] = await selectRows<{ seq: number | string | null }>(db, 'SELECT MIN(seq) AS seq FROM inbox_events WHERE subscriber_key = ?', [subscriberKey]);
  return Number(row?.seq ?? 0);
}

/**
 * The events after each cursor, for many subscribers in one statement: a stream hub wakes
 * thousands of streams after one fan-out batch with one query. Each subscriber's events come in
 * `seq` order.
 */
export async function eventsAfterMany(db: Runner, cursors: Array<{ subscriberKey: string; seq: number }>): Promise<StoredEvent[]> {
  if (cursors.length === 0) return [];
  const json = JSON.stringify(cursors.map((c) => ({ k: c.subscriberKey, s: c.seq })));
  const sql = isPostgres(db as Db)
    ? `SELECT e.subscriber_key, e.seq, e.type, e.payload, e.created_at
       FROM json_to_recordset(?::json) AS c(k text, s bigint)
       JOIN inbox_events e ON e.subscriber_key = c.k AND e.seq > c.s
       ORDER BY e.subscriber_key, e.seq`
    : `SELECT e.subscriber_key, e.seq, e.type, e.payload, e.created_at
       FROM json_each(?) AS c
       JOIN inbox_events e ON e.subscriber_key = json_extract(c.value, '$.k') AND e.seq > json_extract(c.value, '$.s')
       ORDER BY e.subscriber_key, e.seq`;
  return (await selectRows<Record<string, unknown>>(db, sql, [json])).map(storedEvent);
}


/** Forgets events older than `before` (retention keeps them INBOX_EVENTS_KEPT_MS); at most `limit` a call. */
export async function pruneEvents(db: Db, before: Date, limit: number): Promise<number> {
  return changeRows(
    db,
    `DELETE FROM inbox_events WHERE (subscriber_key, seq) IN (SELECT subscriber_key, seq FROM inbox_events WHERE created_at < ? LIMIT ?)`,
    [before.toISOString(), limit],
  );
}
