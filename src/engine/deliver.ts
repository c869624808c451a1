// A channel step, in three moves: read its context (loadStepContext, one statement: whom it is for,
// their preferences, where it would go), decide from that alone (decideStep, pure: conditions,
// preferences, template, destination), and send what was decided (sendDecided).
import type { Deps } from '../deps.js';
import type { EventRecord } from '../db/repos/events.js';
import type { JobRecord } from '../db/repos/jobs.js';
import type { NewMessage } from '../db/repos/messages.js';
import type { Subscriber } from '../db/repos/subscribers.js';
import { ownSendLimits, readCredentials } from '../db/repos/integrations.js';
import { credentialsForSending, readStepContext, type SendingIntegration } from '../db/repos/step-context.js';
import type { IntegrationCredentials, ProviderId, SendLimits } from '../providers/catalogue.js';
import { senders } from '../providers/index.js';
import type { ChatMessage, Delivery, EmailMessage, PushMessage, SendResult, SmsMessage } from '../providers/types.js';
import type { Step } from '../db/repos/workflows.js';
import { allowsChannel } from './preferences.js';
import type { Channel } from '../contract.js';
import type { Layer } from '../db/repos/preferences.js';
import { failedCondition } from './conditions.js';
import { adoptPrecompiled, overridesProblem, render, renderingMessage, templateData, TemplateOverBudget, uncompiled, type MessageTemplate } from './templates.js';
import { payloadChecks, THREADED_TEMPLATE_CHARS } from './payload-checks.js';
import { destinationOf } from './destinations.js';
import { yieldToEventLoop } from './worker-context.js';

import { Undeliverable } from './undeliverable.js';

export interface Delivered {
  status: 'completed' | 'skipped';
  detail: string;
  providerId?: string;
  raw?: string;
  message?: NewMessage;
}

export type ChannelStep = Extract<Step, { template: unknown }>;

interface Target {
  integrationId: string;
  providerId: ProviderId;
  credentials: IntegrationCredentials;
  /** The integration's own send limits, or null for its provider's. */
  sendLimits: SendLimits | null;
}

function targetOf(row: SendingIntegration, secret: string | undefined): Target {
  return { integrationId: row.id, providerId: row.provider_id, credentials: readCredentials(row, secret), sendLimits: ownSendLimits(row) };
}

type SubscriberChannel = Subscriber['channels'][number];

/** Who a send is for, with the preference layers that decide whether it may go out. */
export interface Recipient {
  subscriberId: string;
  subscriberKey: string;
  /** Undefined when the subscriber was deleted after the trigger. */
  subscriber?: Subscriber;
  global: Layer;
  own: Layer;
}

/** Why a send must not go out (deleted subscriber, unmet condition, preferences); undefined if it may. */
export function suppression(event: EventRecord, step: ChannelStep, recipient: Recipient): string | undefined {
  if (!recipient.subscriber) return `Subscriber ${recipient.subscriberId} was deleted`;
  const unmet = failedCondition(step.conditions, { payload: event.payload, subscriber: recipient.subscriber });
  if (unmet) return `Step condition not met: ${unmet}`;
  const channel = step.type as Channel;
  if (!allowsChannel(event.workflow, recipient.global, recipient.own, channel)) {
    return `The subscriber's preferences turn ${channel} off for this workflow`;
  }
  return undefined;
}

/** overridesProblem's answers, by the overrides object of a channel (an event's, read once for a batch of its recipients). */
const overridesChecks = new WeakMap<object, string | undefined>();

function overridesChecked(overrides: unknown): string | undefined {
  if (overrides === null || typeof overrides !== 'object') return undefined;
  if (!overridesChecks.has(overrides)) overridesChecks.set(overrides, overridesProblem(overrides));
  return overridesChecks.get(overrides);
}

/** Renders the step's templates for one recipient; trigger overrides replace them for this event. */
function renderer(job: JobRecord, event: EventRecord, step: ChannelStep, subscriber: Subscriber) {
  const overrides = event.overrides[step.type];
  // Checked at the trigger since; an event stored before then is checked here, once for all its recipients.
  const overBudget = overridesChecked(overrides);
  if (overBudget) throw new TemplateOverBudget(`The trigger's ${step.type} overrides ${overBudget}`);
  const template = { ...step.template, ...(overrides as Record<string, string> | undefined) } as Record<string, string | undefined>;
  const payload = event.payload;
  const context = templateData({ payload, subscriber, actor: event.actor ?? {}, step: job.state.digest ?? {}, transactionId: event.transactionId }, payload);
  return {
    template,
    text: (field: string) => (typeof template[field] !== 'string' ? undefined : render(template[field]!, context, { escape: false })),
    textOf: (source: string) => render(source, context, { escape: false }),
    html: (field: string) => render(template[field]!, context, { escape: true }),
  };
}

type ActionTemplate = { label: string; url?: string };

/** The fields each channel renders as text (besides an in-app step's nested ones, and an email's HTML content). */
const TEXT_FIELDS: Record<Channel, string[]> = {
  in_app: ['subject', 'content', 'url', 'avatar'],
  email: ['subject', 'preheader'],
  sms: ['content'],
  chat: ['content'],
  push: ['title', 'content'],
};

/** The templates a step's message renders (decideStep's, with the trigger's overrides), each as it renders it. */
function messageTemplates(event: EventRecord, step: ChannelStep): MessageTemplate[] {
  const overrides = event.overrides[step.type];
  if (overridesChecked(overrides)) return []; // refused before anything is compiled
  const template = { ...step.template, ...(overrides as Record<string, unknown> | undefined) } as Record<string, unknown>;
  const channel = step.type as Channel;
  const texts = TEXT_FIELDS[channel].map((field) => template[field]);
  if (channel === 'in_app') {
    const nested = template as { redirect?: { url?: unknown }; primaryAction?: Record<string, unknown>; secondaryAction?: Record<string, unknown>; data?: unknown };
    texts.push(nested.redirect?.url, nested.primaryAction?.label, nested.primaryAction?.url, nested.secondaryAction?.label, nested.secondaryAction?.url);
    if (nested.data && typeof nested.data === 'object') texts.push(...Object.values(nested.data));
  }
  const templates = texts.filter((source): source is string => typeof source === 'string').map((source) => ({ source, escape: false }));
  if (channel === 'email' && typeof template.content === 'string') templates.push({ source: template.content, escape: true });
  return templates;
}

/**
 * Compiles a step's new templates on the payload check thread when compiling them would hold the
 * event loop (THREADED_TEMPLATE_CHARS), for render to find them compiled; few short ones are left
 * to render, as is a template compiled already. Answers why they could not be compiled, when the
 * thread stopped twice on them. Once per job, or per event and step for a batch of its recipients.
 */
export async function compileStepTemplates(event: EventRecord, step: ChannelStep): Promise<string | undefined> {
  const { templates, chars } = uncompiled(messageTemplates(event, step));
  if (chars <= THREADED_TEMPLATE_CHARS) return undefined;
  const key = templates.map(({ source, escape }) => `${escape ? 'e' : 'n'}${source.length}:${source}`).join('');
  let compiled = compiling.get(key);
  if (!compiled) {
    compiled = compileOnThread(templates).finally(() => compiling.delete(key));
    compiling.set(key, compiled);
  }
  return compiled;
}

/** Compiles under way, by their templates: jobs that need the same at once (a fan-out's shards) wait for one. */
const compiling = new Map<string, Promise<string | undefined>>();

async function compileOnThread(templates: MessageTemplate[]): Promise<string | undefined> {
  const answered = await payloadChecks.precompile(templates);
  if ('stopped' in answered) return `The step's templates could not be compiled: ${answered.stopped}`;
  // Each turned into functions in a turn of its own: V8 compiles the code Handlebars wrote, which
  // grows with the expressions.
  for (const [i, made] of answered.made.entries()) {
    await yieldToEventLoop();
    adoptPrecompiled(templates[i]!, made);
  }
  await yieldToEventLoop();
  return undefined;
}

/** An in-app step's message: stored, not sent, so it needs no provider. Every field is rendered as text. */
function inAppMessage(job: JobRecord, event: EventRecord, step: ChannelStep, recipient: Recipient): NewMessage {
  const { template, text, textOf } = renderer(job, event, step, recipient.subscriber!);
  const nested = template as unknown as {
    redirect?: { url?: string };
    primaryAction?: ActionTemplate;
    secondaryAction?: ActionTemplate;
    data?: Record<string, string>;
  };
  const action = (source: ActionTemplate | undefined) =>
    source && typeof source.label === 'string' ? { label: textOf(source.label), ...(typeof source.url === 'string' ? { url: textOf(source.url) } : {}) } : undefined;
  const data = nested.data && typeof nested.data === 'object' ? Object.fromEntries(Object.entries(nested.data).filter(([, v]) => typeof v === 'string').map(([k, v]) => [k, textOf(v)])) : undefined;
  return {
    environmentId: event.environmentId,
    subscriberKey: recipient.subscriberKey,
    subscriberId: recipient.subscriberId,
    notificationId: job.notificationId!,
    jobId: job.id,
    transactionId: event.transactionId,
    workflowKey: event.workflow.workflowId,
    subject: text('subject'),
    content: text('content')!,
    url: typeof nested.redirect?.url === 'string' ? textOf(nested.redirect.url) : text('url'),
    avatar: text('avatar'),
    primaryAction: action(nested.primaryAction),
    secondaryAction: action(nested.secondaryAction),
    data,
    tags: event.workflow.tags,
  };
}

export const IN_APP_DELIVERED = 'Message stored in the in-app feed';

/** The execution detail of a job a worker had taken when it found its event canceled: it ends without running. */
export const CANCELED_BEFORE_RUN = 'Canceled with its event before it ran';

/** Everything a channel step is decided from, read before any decision. */
export interface StepContext {
  job: JobRecord;
  event: EventRecord;
  step: ChannelStep;
  recipient: Recipient;
  /** Email and SMS: the environment's active integration for the channel, if it has one. */
  integration?: Target;
  /** Chat and push: the subscriber's first credentials for the channel whose integration is active, with it. */
  channel?: { entry: SubscriberChannel; target: Target };
}

/**
 * Reads a channel step's context in one statement (repos/step-context.ts): whom it is for, their
 * preferences, and where it would go. Where it would go is given, and its credentials opened, only
 * for a send that may go out and has an address.
 */
export async function loadStepContext(deps: Deps, job: JobRecord, event: EventRecord, step: ChannelStep): Promise<StepContext> {
  const channel = step.type as Channel;
  const read = (await readStepContext(deps.db, { notificationId: job.notificationId!, environmentId: event.environmentId, workflowKey: event.workflow.id, channel }))!;
  const { subscriber } = read;
  const recipient: Recipient = { subscriberId: read.subscriberId, subscriberKey: read.subscriberKey, subscriber, global: read.global, own: read.own };
  const context: StepContext = { job, event, step, recipient };
  if (!subscriber || suppression(event, step, recipient)) return context;
  const secret = deps.config.secret;
  if ((channel === 'email' && subscriber.email) || (channel === 'sms' && subscriber.phone)) context.integration = read.integration && targetOf(read.integration, secret);
  if (read.channel) {
    const credentials = credentialsForSending(read.channel, secret);
    context.channel = { entry: { ...read.channel.entry, credentials }, target: targetOf(read.channel.integration, secret) };
  }
  return context;
}

/** A send decided on: where it goes (its destination's key), through which integration, with what. */
export interface DecidedSend {
  destination: string;
  target: Target;
  /** The exact address it goes to, where that is a destination of its own for send limits (a webhook URL). */
  address?: string;
  /** What it counts against send limits: messages (Expo counts each device token). */
  cost: number;
  request:
    | { channel: 'email'; message: EmailMessage }
    | { channel: 'sms'; message: SmsMessage }
    | { channel: 'chat'; message: ChatMessage }
    | { channel: 'push'; message: PushMessage };
  /** The execution detail once it is sent. */
  detail: string;
}

/**
 * What a step does, decided from its context alone: skipped (why), an in-app message, or a send;
 * throws Undeliverable when it has nowhere to go. The in-app batch makes the same decision for
 * many contexts at once.
 */
export function decideStep(context: StepContext): Delivered | DecidedSend {
  return renderingMessage(() => decideRendering(context));
}

function decideRendering(context: StepContext): Delivered | DecidedSend {
  const { job, event, step, recipient } = context;
  const skip = suppression(event, step, recipient);
  if (skip) return { status: 'skipped', detail: skip };
  const subscriber = recipient.subscriber!;
  const channel = step.type as Channel;
  const { template, text, html } = renderer(job, event, step, subscriber);

  switch (channel) {
    case 'in_app':
      return { status: 'completed', detail: IN_APP_DELIVERED, providerId: 'herald', message: inAppMessage(job, event, step, recipient) };
    case 'email': {
      if (!subscriber.email) throw new Undeliverable(`Subscriber ${recipient.subscriberId} has no email address`);
      const target = context.integration ?? noIntegration('email');
      const message = { to: subscriber.email, subject: text('subject')!, html: html('content'), preheader: text('preheader'), senderName: template.senderName };
      return { destination: destinationOf('email', target.integrationId), target, cost: 1, request: { channel, message }, detail: `Email sent to ${subscriber.email}` };
    }
    case 'sms': {
      if (!subscriber.phone) throw new Undeliverable(`Subscriber ${recipient.subscriberId} has no phone number`);
      const target = context.integration ?? noIntegration('sms');
      const message = { to: subscriber.phone, content: text('content')! };
      return { destination: destinationOf('sms', target.integrationId), target, cost: 1, request: { channel, message }, detail: `SMS sent to ${subscriber.phone}` };
    }
    case 'chat': {
      const { entry, target } = context.channel ?? noCredentials(recipient, 'chat');
      if (!entry.credentials.webhookUrl) throw new Undeliverable(`Subscriber ${recipient.subscriberId} has no ${entry.providerId} webhook URL`);
      const message = { webhookUrl: entry.credentials.webhookUrl, content: text('content')!, channel: entry.credentials.channel };
      return {
        destination: destinationOf('chat', target.integrationId, message.webhookUrl),
        target,
        address: message.webhookUrl,
        cost: 1,
        request: { channel, message },
        detail: `Posted to the ${entry.providerId} webhook`,
      };
    }
    case 'push': {
      const { entry, target } = context.channel ?? noCredentials(recipient, 'push');
      const deviceTokens = entry.credentials.deviceTokens ?? [];
      if (deviceTokens.length === 0) throw new Undeliverable(`Subscriber ${recipient.subscriberId} has no ${entry.providerId} device tokens`);
      const message = {
        deviceTokens,
        title: text('title')!,
        content: text('content')!,
        data: (step.template as { data?: Record<string, unknown> }).data,
        subscriberId: recipient.subscriberId,
      };
      // A push webhook posts to its own URL (the integration's); Expo to its API.
      const url = (target.credentials as { webhookUrl?: string }).webhookUrl;
      return {
        destination: destinationOf('push', target.integrationId, url),
        target,
        address: url,
        cost: deviceTokens.length,
        request: { channel, message },
        detail: `Push sent to ${deviceTokens.length} device(s)`,
      };
    }
  }
}

function noIntegration(channel: Channel): never {
  throw new Undeliverable(`No active ${channel} integration in this environment`);
}

function noCredentials(recipient: Recipient, channel: Channel): never {
  throw new Undeliverable(`Subscriber ${recipient.subscriberId} has no ${channel} credentials for an active integration`);
}

/** Sends what was decided through its provider, with the job's id as the delivery id (the same on every retry). */
export async function sendDecided(decided: DecidedSend, delivery: Delivery): Promise<Delivered> {
  const { target, request } = decided;
  let sent: SendResult;
  switch (request.channel) {
    case 'email':
      sent = await senders.email[target.providerId]!.send(request.message, target.credentials, delivery);
      break;
    case 'sms':
      sent = await senders.sms[target.providerId]!.send(request.message, target.credentials, delivery);
      break;
    case 'chat':
      sent = await senders.chat[target.providerId]!.send(request.message, target.credentials, delivery);
      break;
    case 'push':
      sent = await senders.push[target.providerId]!.send(request.message, target.credentials, delivery);
      break;
  }
  return { status: 'completed', detail: sent.note ? `${decided.detail}: ${sent.note}` : decided.detail, providerId: target.providerId, raw: sent.raw };
}
