// The webhook outbox's one entrance: recordWebhookEvent writes an event for each endpoint of the
// environment that takes it, in the caller's transaction, so the event commits with the change it
// tells of or not at all. An environment without endpoints costs a map lookup (webhook-subscriptions.ts).
import type { Runner } from '../db/knex.js';
import { deliveryRows, insertDeliveries, writeDeliveryRows, type DeliveryRow } from '../db/repos/webhook-deliveries.js';
import { notificationRecipient, notificationsOfEvent } from '../db/repos/notifications.js';
import type { EventRecord } from '../db/repos/events.js';
import { digestRiderSlices } from '../db/repos/digest-jobs.js';
import type { NewMessage } from '../db/repos/messages.js';
import { subscriptionsFor } from '../db/webhook-subscriptions.js';
import type { Subscription, WebhookEventType } from '../db/repos/webhook-endpoints.js';
import { CHANNELS, type Channel, type Schemas } from '../contract.js';
import type { DecidedSend } from './deliver.js';
import { followsDigest } from './digests.js';
import { newId } from '../ids.js';
import { yieldToEventLoop } from '../turns.js';

export type { WebhookEventType };

/** The rendered message that only endpoints with `includeContent` get. */
export type MessageContent = Schemas['WebhookMessageContent'];

/** The event id, sent as `webhook-id`: the same at every try and to every endpoint. */
export function newEventId(now: Date): string {
  return `msg_${newId(now.getTime())}`;
}

function takes(subscription: Subscription, type: WebhookEventType): boolean {
  return subscription.eventTypes === null || subscription.eventTypes.includes(type);
}

/** The body Herald POSTs: `{type, timestamp, environmentId, data}`. */
export function webhookBody(type: WebhookEventType, environmentId: string, data: Record<string, unknown>, now: Date): string {
  return JSON.stringify({ type, timestamp: now.toISOString(), environmentId, data });
}

export interface EventOptions {
  /** Limits the event to some endpoints (a test event, another endpoint's disabling). */
  only?: (endpointId: string) => boolean;
  /**
   * The rendered message, added to `data` for endpoints with `includeContent` alone. Asked for only
   * when such an endpoint takes the event, so an event no one wants content of builds none.
   */
  content?: () => MessageContent | undefined;
  /**
   * Where the deliveries go instead of being written now: a caller recording many events (an in-app
   * batch's) writes them together with writeDeliveryRows, in one statement rather than one each.
   */
  outbox?: DeliveryRow[];
}

/**
 * Records one event for every enabled endpoint of the environment that takes `type`, in `trx`:
 * one event id, and at most two bodies (with and without the content). Answers the ids of the
 * deliveries written.
 */
export async function recordWebhookEvent(
  trx: Runner,
  environmentId: string,
  type: WebhookEventType,
  data: Record<string, unknown>,
  now: Date,
  options: EventOptions = {},
): Promise<string[]> {
  const { only, content, outbox } = options;
  const subscriptions = (await subscriptionsFor(trx, environmentId)).filter((s) => takes(s, type) && (only?.(s.endpointId) ?? true));
  if (subscriptions.length === 0) return [];
  const eventId = newEventId(now);
  let plain: string | undefined;
  let full: string | undefined;
  const bodyFor = (s: Subscription): string => {
    if (!s.includeContent) return (plain ??= webhookBody(type, environmentId, data, now));
    if (full !== undefined) return full;
    const rendered = content?.();
    return (full = rendered === undefined ? (plain ??= webhookBody(type, environmentId, data, now)) : webhookBody(type, environmentId, { ...data, ...rendered }, now));
  };
  const deliveries = subscriptions.map((s) => ({ environmentId, endpointId: s.endpointId, eventId, eventType: type, payload: bodyFor(s) }));
  if (outbox === undefined) return insertDeliveries(trx, deliveries, now);
  const rows = deliveryRows(deliveries, now);
  outbox.push(...rows);
  return rows.map((row) => row.id);
}

/** Whether any endpoint of the environment takes `type`: a caller with work of its own to do for an event asks first. */
async function wantsWebhookEvent(trx: Runner, environmentId: string, type: WebhookEventType): Promise<boolean> {
  return (await subscriptionsFor(trx, environmentId)).some((s) => takes(s, type));
}

/** What a `message.*` event says of the channel step it follows. */
export interface StepFacts {
  environmentId: string;
  notificationId: string;
  transactionId: string;
  subscriberId: string;
  workflowId: string;
  stepId: string | null;
  channel: Channel;
  providerId?: string | null;
  jobId: string;
}

function stepData(facts: StepFacts): Record<string, unknown> {
  const data: Record<string, unknown> = {
    notificationId: facts.notificationId,
    transactionId: facts.transactionId,
    subscriberId: facts.subscriberId,
    workflowId: facts.workflowId,
    stepId: facts.stepId ?? '',
    channel: facts.channel,
    jobId: facts.jobId,
  };
  if (facts.providerId) data.providerId = facts.providerId;
  return data;
}

/** Why a step was skipped, from its execution detail (deliver.ts `suppression`, schedule.ts). */
function skipReason(detail: string): 'preference' | 'condition' | 'throttled' | 'other' {
  if (detail.startsWith('Step condition not met')) return 'condition';
  if (detail.includes('preferences turn')) return 'preference';
  if (/throttl/i.test(detail)) return 'throttled';
  return 'other';
}

/** A send's rendered message, as decided (deliver.ts): what an event about it carries with `includeContent`. */
export type SentRequest = DecidedSend['request'];

/**
 * What a channel step's outcome tells the webhooks (execute.ts, in-app-batch.ts, schedule.ts record
 * it with the outcome). `sent` is the message a send rendered, and `message` the in-app message
 * stored: the content comes from them, rendered once, for the send.
 */
export type StepEvent =
  | { type: 'message.sent'; sent?: SentRequest }
  | { type: 'message.delivered'; messageId: string; message: NewMessage }
  | { type: 'message.skipped'; detail: string; reason?: ReturnType<typeof skipReason> }
  | { type: 'message.failed'; attempts: number; error: WebhookError; sent?: SentRequest }
  | { type: 'message.attempt_failed'; attempt: number; maxAttempts: number; nextAttemptAt: Date; error: WebhookError; sent?: SentRequest };

/** What a send's event carries with `includeContent`: the fields its channel's message has. */
function sentContent(sent: SentRequest): MessageContent {
  switch (sent.channel) {
    case 'email': {
      const { subject, html, preheader } = sent.message;
      return preheader ? { subject, content: html, preheader } : { subject, content: html };
    }
    case 'sms':
    case 'chat':
      return { content: sent.message.content };
    case 'push':
      return { title: sent.message.title, content: sent.message.content };
  }
}

/** What `message.delivered` carries with `includeContent`: the stored in-app item's rendered fields (those it has). */
function storedContent(message: NewMessage): MessageContent {
  const { subject, content, url, avatar, primaryAction, secondaryAction, data } = message;
  const fields: MessageContent = { content };
  if (subject !== undefined) fields.subject = subject;
  if (url !== undefined) fields.url = url;
  if (avatar !== undefined) fields.avatar = avatar;
  if (primaryAction !== undefined) fields.primaryAction = primaryAction;
  if (secondaryAction !== undefined) fields.secondaryAction = secondaryAction;
  if (data !== undefined) fields.data = data;
  return fields;
}

function contentOf(event: StepEvent): MessageContent | undefined {
  if (event.type === 'message.delivered') return storedContent(event.message);
  if (event.type !== 'message.skipped' && event.sent) return sentContent(event.sent);
  return undefined;
}

/**
 * The outcomes that the notifications riding in a digest's send hear of too: what happened to the
 * send. A retry to come (`message.attempt_failed`) is the carrying notification's alone.
 */
const TOLD_TO_RIDERS: ReadonlySet<WebhookEventType> = new Set(['message.sent', 'message.delivered', 'message.failed', 'message.skipped']);

export interface WebhookError {
  message: string;
  providerStatus?: string;
}

/** The step a job ran, for a `message.*` event; the subscriber is read (one indexed row) only when an endpoint takes the event. */
export interface JobFacts {
  environmentId: string;
  notificationId: string;
  transactionId: string;
  workflowId: string;
  stepId: string | null;
  channel: string;
  providerId?: string | null;
  jobId: string;
  subscriberId?: string;
  /** The step's place in its workflow's steps: a step after a digest step may carry other notifications. */
  stepIndex: number;
  steps: ReadonlyArray<{ type: string }>;
}

/** The facts of a step's job and its event, as recordStepEvent takes them. */
export function jobFacts(
  job: { id: string; environmentId: string; notificationId: string; stepId: string | null; type: string; stepIndex: number },
  event: Pick<EventRecord, 'transactionId' | 'workflow'>,
  known: { providerId?: string | null; subscriberId?: string } = {},
): JobFacts {
  return {
    environmentId: job.environmentId,
    notificationId: job.notificationId,
    transactionId: event.transactionId,
    workflowId: event.workflow.workflowId,
    stepId: job.stepId,
    channel: job.type,
    jobId: job.id,
    stepIndex: job.stepIndex,
    steps: event.workflow.steps,
    ...known,
  };
}

/**
 * Records a step's event (and its digest riders'); with `outbox`, the deliveries go there to be
 * written by the caller (EventOptions), but for a digest's riders': those are written a slice at a
 * time, with what the outbox holds then.
 */
export async function recordStepEvent(trx: Runner, facts: JobFacts, event: StepEvent, now: Date, outbox?: DeliveryRow[]): Promise<void> {
  if (!(CHANNELS as readonly string[]).includes(facts.channel)) return;
  if (!(await wantsWebhookEvent(trx, facts.environmentId, event.type))) return;
  const subscriberId = facts.subscriberId ?? (await notificationRecipient(trx, facts.notificationId))?.subscriber_id ?? '';
  const data = stepData({ ...facts, channel: facts.channel as Channel, subscriberId });
  switch (event.type) {
    case 'message.delivered':
      Object.assign(data, { messageId: event.messageId, providerId: 'herald' });
      break;
    case 'message.skipped':
      Object.assign(data, { reason: event.reason ?? skipReason(event.detail), detail: event.detail });
      break;
    case 'message.failed':
      Object.assign(data, { attempts: event.attempts, error: event.error });
      break;
    case 'message.attempt_failed':
      Object.assign(data, { attempt: event.attempt, maxAttempts: event.maxAttempts, retryable: true, nextAttemptAt: event.nextAttemptAt.toISOString(), error: event.error });
      break;
  }
  // The content is the send's own rendering, picked once and shared by its event and its riders' events.
  let rendered: MessageContent | undefined | null = null;
  const content = () => (rendered === null ? (rendered = contentOf(event)) : rendered);
  await recordWebhookEvent(trx, facts.environmentId, event.type, data, now, { content, outbox });
  if (!TOLD_TO_RIDERS.has(event.type) || !followsDigest(facts.steps, facts.stepIndex)) return;
  // The notifications riding in this one's digest hear of the send that carried them, each as itself.
  // A slice's deliveries are written before the next slice is read (with what the caller's outbox
  // held before them, in the same order), the loop turning between: a digest's tens of thousands
  // written at the end, in statements of thousands of rows, held it for all of them.
  const rows = outbox ?? [];
  for await (const riders of digestRiderSlices(trx, facts.notificationId)) {
    for (const rider of riders) {
      const riderData = { ...data, notificationId: rider.notificationId, transactionId: rider.transactionId, digestedInto: facts.notificationId };
      await recordWebhookEvent(trx, facts.environmentId, event.type, riderData, now, { content, outbox: rows });
    }
    await writeDeliveryRows(trx, rows.splice(0));
    await yieldToEventLoop();
  }
}

/**
 * `notification.canceled` for each notification of a canceled event that `settle` moved from open to
 * canceled: `settle` runs between the two reads, in the same transaction. Nothing is read when no
 * endpoint takes the event.
 */
export async function recordCanceledNotifications(
  trx: Runner,
  event: { id: string; environmentId: string; transactionId: string; workflow: { workflowId: string } },
  now: Date,
  settle: () => Promise<void>,
  only?: string,
): Promise<void> {
  if (!(await wantsWebhookEvent(trx, event.environmentId, 'notification.canceled'))) return settle();
  const mine = (rows: Array<{ id: string; subscriber_id: string }>) => (only === undefined ? rows : rows.filter((row) => row.id === only));
  const open = new Set(mine(await notificationsOfEvent(trx, event.id, ['pending', 'processing'])).map((row) => row.id));
  await settle();
  if (open.size === 0) return;
  for (const row of mine(await notificationsOfEvent(trx, event.id, ['canceled']))) {
    if (!open.has(row.id)) continue;
    const data = { notificationId: row.id, transactionId: event.transactionId, subscriberId: row.subscriber_id, workflowId: event.workflow.workflowId };
    await recordWebhookEvent(trx, event.environmentId, 'notification.canceled', data, now);
  }
}

/** An in-app message's state, as `message.seen|read|archived` carry it. */
export interface MessageState {
  messageId: string;
  notificationId: string;
  transactionId: string;
  subscriberId: string;
  workflowId: string;
  seen: boolean;
  read: boolean;
  archived?: boolean;
  seenAt?: string;
  readAt?: string;
}

/**
 * `message.seen`, `message.read` and `message.archived` for each of them that a change turned on,
 * in the change's transaction: the secret-key API's mark (messages.ts) and the inbox's call it
 * with the message as it was and as it is.
 */
export async function recordMessageChange(trx: Runner, environmentId: string, before: MessageState, after: MessageState, now: Date): Promise<void> {
  const data: Record<string, unknown> = {
    messageId: after.messageId,
    notificationId: after.notificationId,
    transactionId: after.transactionId,
    subscriberId: after.subscriberId,
    workflowId: after.workflowId,
    seen: after.seen,
    read: after.read,
  };
  if (after.archived !== undefined) data.archived = after.archived;
  if (after.seenAt !== undefined) data.seenAt = after.seenAt;
  if (after.readAt !== undefined) data.readAt = after.readAt;
  if (after.seen && !before.seen) await recordWebhookEvent(trx, environmentId, 'message.seen', data, now);
  if (after.read && !before.read) await recordWebhookEvent(trx, environmentId, 'message.read', data, now);
  if (after.archived && !before.archived) await recordWebhookEvent(trx, environmentId, 'message.archived', data, now);
}
