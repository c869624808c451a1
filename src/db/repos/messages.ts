import type { Db, Runner } from '../knex.js';
import { insertRows } from '../insert-rows.js';
import { textOf } from '../chunks.js';
import type { Schemas } from '../../contract.js';
import { newId } from '../../ids.js';
import { readBool } from '../json.js';
import { bytesOf, paginate, type Page, type PageRequest } from '../paginate.js';

export type InAppMessage = Schemas['InAppMessage'];

export interface NewMessage {
  /** Given when an event written with it names it (a webhook's message.delivered). */
  id?: string;
  environmentId: string;
  subscriberKey: string;
  subscriberId: string;
  notificationId: string;
  jobId: string;
  transactionId: string;
  workflowKey: string;
  subject?: string;
  content: string;
  url?: string;
  avatar?: string;
  primaryAction?: { label: string; url?: string };
  secondaryAction?: { label: string; url?: string };
  data?: Record<string, string>;
  tags?: string[];
}

/** About how many characters a message stores: its text fields and its `data`'s values. */
export function messageChars(message: NewMessage): number {
  return textOf(message) + (message.data ? textOf(message.data) : 0);
}

/**
 * Stores in-app messages, once per job: a job run again after a crash leaves no second copy.
 * Answers the rows it stored. Only engine/inbox.ts calls it, with the counts and events that go
 * with them.
 */
export async function insertMessages(trx: Runner, messages: NewMessage[], now: Date): Promise<Array<Record<string, unknown>>> {
  const at = now.toISOString();
  const rows = messages.map((message) => ({
    id: message.id ?? newId(now.getTime()),
    environment_id: message.environmentId,
    subscriber_key: message.subscriberKey,
    subscriber_id: message.subscriberId,
    notification_id: message.notificationId,
    job_id: message.jobId,
    transaction_id: message.transactionId,
    workflow_key: message.workflowKey,
    subject: message.subject ?? null,
    content: message.content,
    url: message.url ?? null,
    avatar: message.avatar ?? null,
    primary_action: message.primaryAction ? JSON.stringify({ ...message.primaryAction, status: 'pending' }) : null,
    secondary_action: message.secondaryAction ? JSON.stringify({ ...message.secondaryAction, status: 'pending' }) : null,
    data: message.data ? JSON.stringify(message.data) : null,
    tags: message.tags && message.tags.length > 0 ? JSON.stringify(message.tags) : null,
    seen: false,
    read: false,
    archived: false,
    created_at: at,
  }));
  const inserted = new Set((await insertRows<{ id: string }>(trx, 'messages', rows, { skipConflictsOn: ['job_id'], returning: ['id'] })).map((row) => row.id));
  return rows.filter((row) => inserted.has(row.id));
}

/** The columns toWire reads, by name: a read of `*` is named row by row on SQLite and not kept prepared on PostgreSQL (sqlite.ts, postgres.ts). */
const MESSAGE_COLUMNS = ['id', 'subscriber_id', 'notification_id', 'transaction_id', 'workflow_key', 'subject', 'content', 'url', 'seen', 'read', 'seen_at', 'read_at', 'created_at'];

function toWire(row: Record<string, unknown>): InAppMessage {
  const message: InAppMessage = {
    messageId: row.id as string,
    subscriberId: row.subscriber_id as string,
    notificationId: row.notification_id as string,
    transactionId: row.transaction_id as string,
    workflowId: row.workflow_key as string,
    content: row.content as string,
    seen: readBool(row.seen),
    read: readBool(row.read),
    createdAt: row.created_at as string,
  };
  if (row.subject !== null) message.subject = row.subject as string;
  if (row.url !== null) message.url = row.url as string;
  if (row.seen_at !== null) message.seenAt = row.seen_at as string;
  if (row.read_at !== null) message.readAt = row.read_at as string;
  return message;
}

export async function listMessages(
  db: Db,
  subscriberKey: string,
  page: PageRequest,
  filters: { read?: boolean; seen?: boolean },
): Promise<Page<InAppMessage>> {
  const query = db('messages').where({ subscriber_key: subscriberKey }).select(MESSAGE_COLUMNS);
  if (filters.read !== undefined) query.where('read', filters.read);
  if (filters.seen !== undefined) query.where('seen', filters.seen);
  return paginate<Record<string, unknown>, InAppMessage>(
    query,
    page,
    [
      { column: 'created_at', order: 'desc' },
      { column: 'id', order: 'desc' },
    ],
    (rows) => rows.map(toWire),
    query,
    bytesOf(['subject', 'content', 'url']),
  );
}

export async function findMessage(db: Runner, subscriberKey: string, messageId: string): Promise<InAppMessage | undefined> {
  const row = await db('messages').where({ subscriber_key: subscriberKey, id: messageId }).first(MESSAGE_COLUMNS);
  return row ? toWire(row) : undefined;
}
