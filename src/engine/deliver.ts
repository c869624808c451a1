// A channel step: decide whether it may go out (conditions, preferences), find where it goes (the
// integration, the subscriber's address or credentials), render it, and send it.
import type { Deps } from '../deps.js';
import type { EventRecord } from '../db/repos/events.js';
import type { JobRecord } from '../db/repos/jobs.js';
import type { NewMessage } from '../db/repos/messages.js';
import { findSubscriber, type Subscriber } from '../db/repos/subscribers.js';
import { deliveryIntegrationOf, findIntegrationRow, readCredentials } from '../db/repos/integrations.js';
import { globalLayer, workflowLayer } from '../db/repos/preferences.js';
import { notificationRecipient } from '../db/repos/notifications.js';
import { PROVIDERS, type IntegrationCredentials, type ProviderId } from '../providers/catalogue.js';
import { senders } from '../providers/index.js';
import type { Step } from '../db/repos/workflows.js';
import { allowsChannel } from './preferences.js';
import type { Channel } from '../contract.js';
import type { Layer } from '../db/repos/preferences.js';
import { failedCondition } from './conditions.js';
import { render } from './templates.js';
import { destinationOf } from './destinations.js';

/** A send that cannot happen as things stand (no address, no integration): retrying will not help. */
export class Undeliverable extends Error {}

export interface Delivered {
  status: 'completed' | 'skipped';
  detail: string;
  providerId?: string;
  raw?: string;
  message?: NewMessage;
}

type ChannelStep = Extract<Step, { template: unknown }>;

interface Target {
  integrationId: string;
  providerId: ProviderId;
  credentials: IntegrationCredentials;
}

async function integrationFor(deps: Deps, environmentId: string, channel: Channel): Promise<Target> {
  const row = await deliveryIntegrationOf(deps.db, environmentId, channel);
  if (!row) throw new Undeliverable(`No active ${channel} integration in this environment`);
  return { integrationId: row.id, providerId: row.provider_id, credentials: readCredentials(row, deps.config.secret) };
}

/** The subscriber's credentials for a chat or push provider whose integration is active. */
async function subscriberChannel(deps: Deps, environmentId: string, subscriber: Subscriber, channel: Channel) {
  for (const entry of subscriber.channels) {
    if (PROVIDERS[entry.providerId].channel !== channel) continue;
    const row = await findIntegrationRow(deps.db, environmentId, entry._integrationId);
    if (row && (row.active === true || row.active === 1)) {
      return { entry, target: { integrationId: row.id, providerId: row.provider_id, credentials: readCredentials(row, deps.config.secret) } };
    }
  }
  throw new Undeliverable(`Subscriber ${subscriber.subscriberId} has no ${channel} credentials for an active integration`);
}

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

/** Renders the step's templates for one recipient; trigger overrides replace them for this event. */
function renderer(job: JobRecord, event: EventRecord, step: ChannelStep, subscriber: Subscriber) {
  const template = { ...step.template, ...(event.overrides[step.type] as Record<string, string> | undefined) } as Record<string, string | undefined>;
  const context = { payload: event.payload, subscriber, actor: event.actor ?? {}, step: job.state.digest ?? {}, transactionId: event.transactionId };
  return {
    template,
    text: (field: string) => (template[field] === undefined ? undefined : render(template[field]!, context, { escape: false })),
    html: (field: string) => render(template[field]!, context, { escape: true }),
  };
}

/** An in-app step's message: stored, not sent, so it needs no provider. */
export function inAppMessage(job: JobRecord, event: EventRecord, step: ChannelStep, recipient: Recipient): NewMessage {
  const { text } = renderer(job, event, step, recipient.subscriber!);
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
    url: text('url'),
  };
}

export const IN_APP_DELIVERED = 'Message stored in the in-app feed';

/** The execution detail of a job a worker had taken when it found its event canceled: it ends without running. */
export const CANCELED_BEFORE_RUN = 'Canceled with its event before it ran';

/** A send ready to go: where it goes (its destination's key) and the call that makes it. */
export interface Send {
  destination: string;
  send(): Promise<Delivered>;
}

/** Sends the step now: `prepareDelivery`, then the send, with nothing in between. */
export async function deliver(deps: Deps, job: JobRecord, event: EventRecord, step: ChannelStep): Promise<Delivered> {
  const prepared = await prepareDelivery(deps, job, event, step);
  return 'send' in prepared ? prepared.send() : prepared;
}

/**
 * Everything a channel step does before the network: reads whom it is for, decides whether it may
 * go out, renders it and finds its provider and destination. Answers the outcome when nothing is
 * sent (skipped, in-app), or the send to make; throws Undeliverable when it cannot go anywhere.
 */
export async function prepareDelivery(deps: Deps, job: JobRecord, event: EventRecord, step: ChannelStep): Promise<Delivered | Send> {
  const env = event.environmentId;
  const notification = (await notificationRecipient(deps.db, job.notificationId!))!;
  const [subscriber, global, own] = await Promise.all([
    findSubscriber(deps.db, env, notification.subscriber_id),
    globalLayer(deps.db, notification.subscriber_key),
    workflowLayer(deps.db, notification.subscriber_key, event.workflow.id),
  ]);
  const recipient: Recipient = { subscriberId: notification.subscriber_id, subscriberKey: notification.subscriber_key, subscriber, global, own };
  const skip = suppression(event, step, recipient);
  if (skip) return { status: 'skipped', detail: skip };
  const channel = step.type as Channel;
  const { template, text, html } = renderer(job, event, step, subscriber!);
  const delivery = { deliveryId: job.id };

  switch (channel) {
    case 'in_app':
      return { status: 'completed', detail: IN_APP_DELIVERED, providerId: 'herald', message: inAppMessage(job, event, step, recipient) };
    case 'email': {
      if (!subscriber!.email) throw new Undeliverable(`Subscriber ${recipient.subscriberId} has no email address`);
      const target = await integrationFor(deps, env, 'email');
      const message = { to: subscriber!.email, subject: text('subject')!, html: html('content'), preheader: text('preheader'), senderName: template.senderName };
      return {
        destination: destinationOf('email', target.integrationId),
        async send() {
          const sent = await senders.email[target.providerId]!.send(message, target.credentials, delivery);
          return { status: 'completed', detail: `Email sent to ${subscriber!.email}`, providerId: target.providerId, raw: sent.raw };
        },
      };
    }
    case 'sms': {
      if (!subscriber!.phone) throw new Undeliverable(`Subscriber ${recipient.subscriberId} has no phone number`);
      const target = await integrationFor(deps, env, 'sms');
      const message = { to: subscriber!.phone, content: text('content')! };
      return {
        destination: destinationOf('sms', target.integrationId),
        async send() {
          const sent = await senders.sms[target.providerId]!.send(message, target.credentials, delivery);
          return { status: 'completed', detail: `SMS sent to ${subscriber!.phone}`, providerId: target.providerId, raw: sent.raw };
        },
      };
    }
    case 'chat': {
      const { entry, target } = await subscriberChannel(deps, env, subscriber!, 'chat');
      if (!entry.credentials.webhookUrl) throw new Undeliverable(`Subscriber ${recipient.subscriberId} has no ${entry.providerId} webhook URL`);
      const message = { webhookUrl: entry.credentials.webhookUrl, content: text('content')!, channel: entry.credentials.channel };
      return {
        destination: destinationOf('chat', target.integrationId, message.webhookUrl),
        async send() {
          const sent = await senders.chat[target.providerId]!.send(message, target.credentials, delivery);
          return { status: 'completed', detail: `Posted to the ${entry.providerId} webhook`, providerId: target.providerId, raw: sent.raw };
        },
      };
    }
    case 'push': {
      const { entry, target } = await subscriberChannel(deps, env, subscriber!, 'push');
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
        async send() {
          const sent = await senders.push[target.providerId]!.send(message, target.credentials, delivery);
          return { status: 'completed', detail: `Push sent to ${deviceTokens.length} device(s)`, providerId: target.providerId, raw: sent.raw };
        },
      };
    }
  }
}
