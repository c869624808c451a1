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
import { yieldToEventLoop } from '../turns.js';

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

/** A step's template as its message renders it: the trigger's overrides replace its fields for this event. */
function templateOf(event: EventRecord, step: ChannelStep): Record<string, unknown> {
  return { ...step.template, ...(event.overrides[step.type] as Record<string, unknown> | undefined) };
}

/** How a message's fields are rendered from their templates: as text (undefined for a field that holds none) or, an email's body, as HTML. */
interface FieldRender {
  text(source: unknown): string | undefined;
  html(source: unknown): string;
}

/** Renders the step's templates for one recipient. */
function renderer(job: JobRecord, event: EventRecord, step: ChannelStep, subscriber: Subscriber): { template: Record<string, unknown>; fields: FieldRender } {
  // Checked at the trigger since; an event stored before then is checked here, once for all its recipients.
  const overBudget = overridesChecked(event.overrides[step.type]);
  if (overBudget) throw new TemplateOverBudget(`The trigger's ${step.type} overrides ${overBudget}`);
  const payload = event.payload;
  const context = templateData({ payload, subscriber, actor: event.actor ?? {}, step: job.state.digest ?? {}, transactionId: event.transactionId }, payload);
  return {
    template: templateOf(event, step),
    fields: {
      text: (source) => (typeof source !== 'string' ? undefined : render(source, context, { escape: false })),
      html: (source) => render(source as string, context, { escape: true }),
    },
  };
}

type ActionTemplate = { label?: unknown; url?: unknown } | undefined;

/**
 * The fields of each channel's message that its step's template renders, each as it renders it:
 * the one list that decideStep renders and compileStepTemplates compiles first (messageTemplates
 * records what it would render). An in-app step's nested fields (redirect, actions, data) too.
 */
const renderedFields = {
  in_app: (template, fields) => {
    const nested = template as { redirect?: { url?: unknown }; primaryAction?: ActionTemplate; secondaryAction?: ActionTemplate; data?: unknown };
    const action = (source: ActionTemplate) =>
      source && typeof source.label === 'string' ? { label: fields.text(source.label)!, ...(typeof source.url === 'string' ? { url: fields.text(source.url)! } : {}) } : undefined;
    const data =
      nested.data && typeof nested.data === 'object'
        ? Object.fromEntries(Object.entries(nested.data).filter(([, v]) => typeof v === 'string').map(([k, v]) => [k, fields.text(v)!]))
        : undefined;
    return {
      subject: fields.text(template.subject),
      content: fields.text(template.content)!,
      url: typeof nested.redirect?.url === 'string' ? fields.text(nested.redirect.url) : fields.text(template.url),
      avatar: fields.text(template.avatar),
      primaryAction: action(nested.primaryAction),
      secondaryAction: action(nested.secondaryAction),
      data,
    };
  },
  email: (template, fields) => ({ subject: fields.text(template.subject)!, html: fields.html(template.content), preheader: fields.text(template.preheader) }),
  sms: (template, fields) => ({ content: fields.text(template.content)! }),
  chat: (template, fields) => ({ content: fields.text(template.content)! }),
  push: (template, fields) => ({ title: fields.text(template.title)!, content: fields.text(template.content)! }),
} satisfies Record<Channel, (template: Record<string, unknown>, fields: FieldRender) => object>;

/** The templates a step's message renders (decideStep's, with the trigger's overrides), each as it renders it. */
function messageTemplates(event: EventRecord, step: ChannelStep): MessageTemplate[] {
  if (overridesChecked(event.overrides[step.type])) return []; // refused before anything is compiled
  const templates: MessageTemplate[] = [];
  const record = (escape: boolean) => (source: unknown) => {
    if (typeof source === 'string') templates.push({ source, escape });
    return '';
  };
  renderedFields[step.type as Channel](templateOf(event, step), { text: record(false), html: record(true) });
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
function inAppMessage(job: JobRecord, event: EventRecord, recipient: Recipient, rendered: ReturnType<typeof renderedFields.in_app>): NewMessage {
  return {
    environmentId: event.environmentId,
    subscriberKey: recipient.subscriberKey,
    subscriberId: recipient.subscriberId,
    notificationId: job.notificationId!,
    jobId: job.id,
    transactionId: event.transactionId,
    workflowKey: event.workflow.workflowId,
    ...rendered,
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
  const { template, fields } = renderer(job, event, step, subscriber);

  switch (channel) {
    case 'in_app':
      return { status: 'completed', detail: IN_APP_DELIVERED, providerId: 'herald', message: inAppMessage(job, event, recipient, renderedFields.in_app(template, fields)) };
    case 'email': {
      if (!subscriber.email) throw new Undeliverable(`Subscriber ${recipient.subscriberId} has no email address`);
      const target = context.integration ?? noIntegration('email');
      const message = { to: subscriber.email, ...renderedFields.email(template, fields), senderName: template.senderName as string | undefined };
      return { destination: destinationOf('email', target.integrationId), target, cost: 1, request: { channel, message }, detail: `Email sent to ${subscriber.email}` };
    }
    case 'sms': {
      if (!subscriber.phone) throw new Undeliverable(`Subscriber ${recipient.subscriberId} has no phone number`);
      const target = context.integration ?? noIntegration('sms');
      const message = { to: subscriber.phone, ...renderedFields.sms(template, fields) };
      return { destination: destinationOf('sms', target.integrationId), target, cost: 1, request: { channel, message }, detail: `SMS sent to ${subscriber.phone}` };
    }
    case 'chat': {
      const { entry, target } = context.channel ?? noCredentials(recipient, 'chat');
      if (!entry.credentials.webhookUrl) throw new Undeliverable(`Subscriber ${recipient.subscriberId} has no ${entry.providerId} webhook URL`);
      const message = { webhookUrl: entry.credentials.webhookUrl, ...renderedFields.chat(template, fields), channel: entry.credentials.channel };
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
        ...renderedFields.push(template, fields),
        // Sent as is; a trigger's push override of it takes its place.
        data: (template as { data?: Record<string, unknown> }).data,
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
