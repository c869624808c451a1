// The inbox's rules. Every change to an in-app message goes through one function per kind of
// change, below: `deliverInboxMessages` (new messages, from the job runner), `changeInboxMessage`
// (one message's seen/read/archived/action states, from the inbox and the secret-key API),
// `deleteInboxMessage`, `changeInboxMessages` (bulk) and `forgetMessagesOf` (retention). Each runs
// in the caller's transaction and writes, with the messages, the subscriber's counts and numbered
// events (`recordInboxChange`), a NOTIFY for the other API processes, and a wake for this one's
// streams after the commit; and, for states a change turns on, the webhook events
// `message.seen|read|archived` (webhook-events.ts).
import type { Deps } from '../deps.js';
import type { Runner } from '../db/knex.js';
import { writeTransaction } from '../db/group-commit.js';
import * as repo from '../db/repos/inbox.js';
import { stringifyWithRaw } from '../raw-json.js';
import { insertMessages, type NewMessage } from '../db/repos/messages.js';
import { originOf, tellInboxAfterCommit } from '../db/inbox-bus.js';
import { existingKeys } from '../db/repos/subscribers.js';
import { notFound, unprocessable } from '../errors.js';
import { existingSubscriberKey } from './subscribers.js';
import type { PageRequest, Page } from '../db/paginate.js';
import { pacer } from '../turns.js';
import { recordMessageChange, type MessageState as WebhookMessageState } from './webhook-events.js';

export type { InboxItem, InboxCounts } from '../db/repos/inbox.js';

/**
 * A change to record: each subscriber's counts move by `delta`; it gets `events`, numbered in
 * order, each told the counts after the change; `newMessages` of its messages are new, and get
 * their time in commit order (bumpCounts).
 */
interface SubscriberChange {
  subscriberKey: string;
  environmentId: string;
  delta: repo.InboxCounts;
  events: Array<(counts: repo.InboxCounts) => Record<string, unknown> & { type: repo.InboxEventType }>;
  newMessages?: number;
}

/**
 * What follows every change to messages, in the same transaction: the counts rows move (their
 * update locks them, so the events get gap-free numbers in commit order, and new messages their
 * time: `whileHeld` is given it), the events are stored, the other processes are told at commit
 * (NOTIFY, one a transaction), and this process's streams after it. Answers each subscriber's
 * counts after the change.
 */
async function recordInboxChange(
  trx: Runner,
  changes: SubscriberChange[],
  now: Date,
  whileHeld?: (bumped: ReadonlyMap<string, repo.BumpedCounts>) => Promise<void>,
): Promise<Map<string, repo.InboxCounts>> {
  // In one order (by subscriber) in every transaction, so two that share subscribers cannot deadlock on their counts rows.
  changes.sort((a, b) => (a.subscriberKey < b.subscriberKey ? -1 : a.subscriberKey > b.subscriberKey ? 1 : 0));
  const bumped = await repo.bumpCounts(
    trx,
    changes.map((c) => ({ subscriberKey: c.subscriberKey, environmentId: c.environmentId, ...c.delta, events: c.events.length, newMessages: c.newMessages ?? 0 })),
    now,
  );
  if (whileHeld) await whileHeld(bumped);
  const events: repo.InboxEventRow[] = [];
  const counts = new Map<string, repo.InboxCounts>();
  for (const change of changes) {
    const after = bumped.get(change.subscriberKey)!;
    const { seq, newMessagesMs: _, ...current } = after;
    counts.set(change.subscriberKey, current);
    change.events.forEach((event, i) => {
      const body = event(current);
      events.push({ subscriberKey: change.subscriberKey, environmentId: change.environmentId, seq: seq - change.events.length + 1 + i, type: body.type, payload: stringifyWithRaw(body, true)! });
    });
  }
  await repo.insertEvents(trx, events, now);
  const touched = changes.filter((c) => c.events.length > 0).map((c) => c.subscriberKey);
  await repo.notifyInboxChanged(trx, originOf(trx), touched);
  tellInboxAfterCommit(trx, touched);
  return counts;
}

/** A message's state as its webhook events carry it. */
function webhookState(
  row: Record<string, unknown>,
  state: { seen: boolean; read: boolean; archived: boolean },
  at: { seenAt?: string; readAt?: string } = {},
): WebhookMessageState {
  return {
    messageId: row.id as string,
    notificationId: row.notification_id as string,
    transactionId: row.transaction_id as string,
    subscriberId: row.subscriber_id as string,
    workflowId: row.workflow_key as string,
    seen: state.seen,
    read: state.read,
    archived: state.archived,
    ...at,
  };
}

/** What a message adds to its subscriber's counts. */
function share(state: { seen: boolean; read: boolean; archived: boolean }): repo.InboxCounts {
  const live = state.archived ? 0 : 1;
  return { unread: state.read ? 0 : live, unseen: state.seen ? 0 : live, total: live, archived: state.archived ? 1 : 0 };
}

function minus(a: repo.InboxCounts, b: repo.InboxCounts): repo.InboxCounts {
  return { unread: a.unread - b.unread, unseen: a.unseen - b.unseen, total: a.total - b.total, archived: a.archived - b.archived };
}

/**
 * Stores the messages in-app steps delivered (once per job), with each subscriber's counts and a
 * `notification.created` event per message: one statement per table, and one NOTIFY, however many
 * subscribers they are for (a batch of large messages calls it a group at a time).
 */
export async function deliverInboxMessages(trx: Runner, messages: NewMessage[], now: Date): Promise<void> {
  if (messages.length === 0) return;
  const stored = await insertMessages(trx, messages, now);
  const bySubscriber = new Map<string, Array<Record<string, unknown>>>();
  for (const row of stored) {
    const key = row.subscriber_key as string;
    const list = bySubscriber.get(key);
    if (list) list.push(row);
    else bySubscriber.set(key, [row]);
  }
  await recordInboxChange(
    trx,
    [...bySubscriber].map(([subscriberKey, rows]) => ({
      subscriberKey,
      environmentId: rows[0].environment_id as string,
      delta: { unread: rows.length, unseen: rows.length, total: rows.length, archived: 0 },
      newMessages: rows.length,
      events: rows.map((row) => (counts: repo.InboxCounts) => ({ type: 'notification.created' as const, item: repo.toItem(row, true), counts })),
    })),
    now,
    // A subscriber's messages take their time under its counts row, so in the order they commit,
    // whatever each worker's clock read: a feed followed with `after=` finds every one. Stored at
    // `now`, they move only when that is not later than the subscriber's newest (rarely).
    async (bumped) => {
      for (const [subscriberKey, { newMessagesMs: ms }] of bumped) {
        if (ms === undefined || ms === now.getTime()) continue;
        const rows = bySubscriber.get(subscriberKey)!;
        const createdAt = new Date(ms).toISOString();
        await repo.restampMessages(trx, rows.map((row) => row.id as string), createdAt);
        for (const row of rows) row.created_at = createdAt;
      }
    },
  );
}

export interface StateChange {
  seen?: boolean;
  read?: boolean;
  archived?: boolean;
  /** An action button's new status; `done` also reads the message. */
  action?: { which: 'primary' | 'secondary'; status: 'done' | 'pending' };
}

/**
 * Changes one message's states (reading implies seeing; so does acting on it), with its counts and
 * a `notification.updated` event; a change that changes nothing records nothing. Answers the item
 * as it is now, or undefined when the subscriber has no such message.
 */
export async function changeInboxMessage(
  trx: Runner,
  environmentId: string,
  subscriberKey: string,
  messageId: string,
  change: StateChange,
  now: Date,
): Promise<repo.InboxItem | undefined> {
  const locked = await repo.lockMessage(trx, subscriberKey, messageId);
  if (!locked) return undefined;
  const before = { seen: locked.seen, read: locked.read, archived: locked.archived };
  const actionDone = change.action?.status === 'done';
  // A read message is a seen one: reading sees it, and unseeing (alone) unreads it.
  const seen = change.read === true || actionDone ? true : (change.seen ?? before.seen);
  const read = actionDone ? true : !seen ? false : (change.read ?? before.read);
  const after = { seen, read, archived: change.archived ?? before.archived };
  let actionChanged = false;
  if (change.action) {
    const column = change.action.which === 'primary' ? 'primary_action' : 'secondary_action';
    const current = locked.row[column] ? (JSON.parse(String(locked.row[column])) as { label: string; url?: string; status: string }) : undefined;
    if (!current) throw unprocessable(`Message ${messageId} has no ${change.action.which} action`);
    if (current.status !== change.action.status) {
      actionChanged = true;
      await repo.writeAction(trx, messageId, column, { ...current, status: change.action.status });
    }
  }
  const stateChanged = after.seen !== before.seen || after.read !== before.read || after.archived !== before.archived;
  if (stateChanged) await repo.writeMessageState(trx, messageId, { id: messageId, ...after }, now);
  // Read only to be written, into the answer and the event: a large `data` as stored, not parsed.
  const item = (await repo.findItem(trx, subscriberKey, messageId, true))!;
  if (stateChanged) {
    const seenAt = item.seenAt ?? undefined;
    const readAt = item.readAt ?? undefined;
    await recordMessageChange(trx, environmentId, webhookState(locked.row, before), webhookState(locked.row, after, { seenAt, readAt }), now);
  }
  if (stateChanged || actionChanged) {
    await recordInboxChange(
      trx,
      [{ subscriberKey, environmentId, delta: minus(share(after), share(before)), events: [(counts) => ({ type: 'notification.updated', item, counts })] }],
      now,
    );
  }
  return item;
}

/** Deletes one message, with its counts and a `notification.updated` event saying so. False when there is no such message. */
export async function deleteInboxMessage(trx: Runner, environmentId: string, subscriberKey: string, messageId: string, now: Date): Promise<boolean> {
  const locked = await repo.lockMessage(trx, subscriberKey, messageId);
  if (!locked) return false;
  await repo.deleteMessageRow(trx, messageId);
  await recordInboxChange(
    trx,
    [
      {
        subscriberKey,
        environmentId,
        delta: minus(repo.NO_COUNTS, share(locked)),
        events: [(counts) => ({ type: 'notification.updated', messageId, deleted: true, counts })],
      },
    ],
    now,
  );
  return true;
}

/**
 * Takes the messages of notifications retention is about to delete out of their subscribers'
 * counts, with one `counts` event each, in the deleting transaction (the messages go with their
 * notifications).
 */
export async function forgetMessagesOf(trx: Runner, notificationIds: string[], now: Date): Promise<void> {
  const bySubscriber = new Map<string, SubscriberChange>();
  for (const message of await repo.messagesOfNotifications(trx, notificationIds)) {
    let change = bySubscriber.get(message.subscriberKey);
    if (!change) {
      change = { subscriberKey: message.subscriberKey, environmentId: message.environmentId, delta: repo.NO_COUNTS, events: [(counts) => ({ type: 'counts', counts })] };
      bySubscriber.set(message.subscriberKey, change);
    }
    change.delta = minus(change.delta, share(message));
  }
  if (bySubscriber.size > 0) await recordInboxChange(trx, [...bySubscriber.values()], now);
}

/**
 * Sets states on every message up to `upTo` (all without it): seen first (reading implies it),
 * then read, then archived, each counted from the rows it actually changed; one `counts` event.
 * Answers how many messages changed and the counts after.
 */
export async function changeInboxMessages(
  trx: Runner,
  environmentId: string,
  subscriberKey: string,
  set: { seen?: boolean; read?: boolean; archived?: boolean },
  upTo: repo.Cursor | undefined,
  now: Date,
): Promise<{ updated: number; counts: repo.InboxCounts }> {
  const changed = new Set<string>();
  const delta = { ...repo.NO_COUNTS };
  // As for one message (changeInboxMessage): reading sees, unseeing unreads.
  const seen = set.read === true ? true : set.seen;
  const read = seen === false ? false : set.read;
  // The states the change turned on, message by message: each is a webhook event.
  const turnedOn: Array<{ row: repo.ChangedMessage; state: 'seen' | 'read' | 'archived' }> = [];
  if (seen !== undefined) {
    const rows = await repo.setStateUpTo(trx, subscriberKey, 'seen', seen, upTo, now);
    turnedOn.push(...(seen ? rows.map((row) => ({ row, state: 'seen' as const })) : []));
    for (const row of rows) {
      changed.add(row.id);
      if (!row.archived) delta.unseen += seen ? -1 : 1;
    }
  }
  if (read !== undefined) {
    const rows = await repo.setStateUpTo(trx, subscriberKey, 'read', read, upTo, now);
    turnedOn.push(...(read ? rows.map((row) => ({ row, state: 'read' as const })) : []));
    for (const row of rows) {
      changed.add(row.id);
      if (!row.archived) delta.unread += read ? -1 : 1;
    }
  }
  if (set.archived !== undefined) {
    const rows = await repo.setStateUpTo(trx, subscriberKey, 'archived', set.archived, upTo, now);
    turnedOn.push(...(set.archived ? rows.map((row) => ({ row, state: 'archived' as const })) : []));
    const sign = set.archived ? -1 : 1;
    for (const row of rows) {
      changed.add(row.id);
      delta.total += sign;
      delta.archived -= sign;
      if (!row.read) delta.unread += sign;
      if (!row.seen) delta.unseen += sign;
    }
  }
  if (changed.size === 0) {
    const { seq: _, ...counts } = await repo.readCounts(trx, subscriberKey);
    return { updated: 0, counts };
  }
  const counts = await recordInboxChange(trx, [{ subscriberKey, environmentId, delta, events: [(counts) => ({ type: 'counts', counts })] }], now);
  // A webhook event each: tens of thousands of rows to write when an endpoint takes them.
  const pace = pacer();
  for (const { row, state } of turnedOn) {
    await pace();
    const after = webhookState(row.row, row, { seenAt: (row.row.seen_at as string | null) ?? undefined, readAt: (row.row.read_at as string | null) ?? undefined });
    await recordMessageChange(trx, environmentId, { ...after, [state]: false }, after, now);
  }
  return { updated: changed.size, counts: counts.get(subscriberKey)! };
}

// --- what the inbox operations call ------------------------------------------------------------

/** Whom a subscriber token speaks for, as the engine needs it. */
export interface InboxOwner {
  environmentId: string;
  subscriberId: string;
}

async function keyOf(deps: Deps, owner: InboxOwner): Promise<string> {
  return existingSubscriberKey(deps.db, owner.environmentId, owner.subscriberId);
}

async function cursor(deps: Deps, subscriberKey: string, messageId: string | undefined): Promise<repo.Cursor | undefined> {
  if (messageId === undefined) return undefined;
  const found = await repo.cursorOf(deps.db, subscriberKey, messageId);
  if (!found) throw notFound(`Message ${messageId} not found in this inbox`);
  return found;
}

export async function listInbox(
  deps: Deps,
  owner: InboxOwner,
  page: PageRequest,
  query: repo.InboxFilters & { before?: string; after?: string },
): Promise<Page<repo.InboxItem> & { counts: repo.InboxCounts }> {
  const key = await keyOf(deps, owner);
  const [before, after] = [await cursor(deps, key, query.before), await cursor(deps, key, query.after)];
  const filters = { status: query.status, archived: query.archived, workflowId: query.workflowId, tag: query.tag };
  const listed = await repo.listInbox(deps.db, key, filters, page, { before, after });
  const { seq: _, ...counts } = await repo.readCounts(deps.db, key);
  return { ...listed, counts };
}

export async function inboxCounts(deps: Deps, owner: InboxOwner): Promise<repo.InboxCounts> {
  const { seq: _, ...counts } = await repo.readCounts(deps.db, await keyOf(deps, owner));
  return counts;
}

export async function markInboxMessage(deps: Deps, owner: InboxOwner, messageId: string, change: StateChange): Promise<repo.InboxItem> {
  const key = await keyOf(deps, owner);
  const item = await writeTransaction(deps.db, (trx) => changeInboxMessage(trx, owner.environmentId, key, messageId, change, deps.clock.now()));
  if (!item) throw notFound(`Message ${messageId} not found in this inbox`);
  return item;
}

export async function removeInboxMessage(deps: Deps, owner: InboxOwner, messageId: string): Promise<void> {
  const key = await keyOf(deps, owner);
  if (!(await writeTransaction(deps.db, (trx) => deleteInboxMessage(trx, owner.environmentId, key, messageId, deps.clock.now())))) {
    throw notFound(`Message ${messageId} not found in this inbox`);
  }
}

export async function markInboxMessages(
  deps: Deps,
  owner: InboxOwner,
  set: { seen?: boolean; read?: boolean; archived?: boolean },
  upTo: string | undefined,
): Promise<{ updated: number; counts: repo.InboxCounts }> {
  const key = await keyOf(deps, owner);
  const until = await cursor(deps, key, upTo);
  return writeTransaction(deps.db, (trx) => changeInboxMessages(trx, owner.environmentId, key, set, until, deps.clock.now()));
}

/** The subscriber's key, for a stream (404 when the subscriber is gone). */
export async function inboxSubscriberKey(deps: Deps, owner: InboxOwner): Promise<string> {
  return keyOf(deps, owner);
}

/** Which of these subscribers' keys (of open streams) no longer name a subscriber: it was deleted, in any process. */
export async function goneSubscriberKeys(deps: Deps, keys: readonly string[]): Promise<Set<string>> {
  const existing = await existingKeys(deps.db, keys);
  return new Set(keys.filter((key) => !existing.has(key)));
}
