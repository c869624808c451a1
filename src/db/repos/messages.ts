import type { Db, Runner } from '../knex.js';
import { insertRows } from '../insert-rows.js';
import type { Schemas } from '../../contract.js';
import { newId } from '../../ids.js';
import { readBool } from '../json.js';
import { paginate, type Page, type PageRequest } from '../paginate.js';

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
}

/** Stores in-app messages, once per job: a job run again after a crash leaves no second copy. */
export async function insertMessages(trx: Runner, messages: NewMessage[], now: Date): Promise<void> {
  const at = now.toISOString();
  await insertRows(
    trx,
    'messages',
    messages.map((message) => ({
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
      seen: false,
      read: false,
      created_at: at,
    })),
    { skipConflictsOn: ['job_id'] },
  );
}

/** The columns toWire reads, by name: a read of `*` is named row by row on SQLite and not kept prepared on PostgreSQL (knex.ts). */
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
  );
}

export async function findMessage(db: Runner, subscriberKey: string, messageId: string): Promise<InAppMessage | undefined> {
  const row = await db('messages').where({ subscriber_key: subscriberKey, id: messageId }).first(MESSAGE_COLUMNS);
  return row ? toWire(row) : undefined;
}

/** Marks a message seen/read (reading implies seeing); the first time of each is kept. */
export async function markMessage(db: Runner, subscriberKey: string, messageId: string, change: { seen?: boolean; read?: boolean }, now: Date): Promise<boolean> {
  const at = now.toISOString();
  const seen = change.read === true ? true : change.seen;
  const columns: Record<string, unknown> = {};
  if (seen !== undefined) {
    columns.seen = seen;
    columns.seen_at = seen ? db.raw('coalesce(seen_at, ?)', [at]) : null;
  }
  if (change.read !== undefined) {
    columns.read = change.read;
    columns.read_at = change.read ? db.raw('coalesce(read_at, ?)', [at]) : null;
  }
  return (await db('messages').where({ subscriber_key: subscriberKey, id: messageId }).update(columns)) > 0;
}
