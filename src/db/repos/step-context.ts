// What a channel job is decided from, read in one statement: whom its notification is for, that
// subscriber with its channels, their two preference layers, and where the send would go (the
// channel's integration for email and SMS; for chat and push the subscriber's first credentials
// whose integration is active, with that integration). It answers exactly as the up to six
// separate reads it replaced did (test/db/step-context.test.ts keeps them to compare), in one round
// trip.
import { selectRows, type Runner } from '../knex.js';
import { readBool } from '../json.js';
import type { Channel } from '../../contract.js';
import { PROVIDERS } from '../../providers/catalogue.js';
import type { IntegrationRow } from './integrations.js';
import { toLayer, type Layer } from './preferences.js';
import { openChannelCredentials, channelOf, type SubscriberChannel } from './subscriber-channels.js';
import { SUBSCRIBER_COLUMNS, subscriberOfRows, type Subscriber, type SubscriberWithChannelRow } from './subscribers.js';

/** What a send needs of an integration: where it goes, through which provider, with what, and how fast. */
export type SendingIntegration = Pick<IntegrationRow, 'id' | 'provider_id' | 'credentials' | 'send_limits'>;

/** A subscriber's credentials for one chat or push integration, with that integration. */
export interface ChannelForSending {
  /** As the subscriber's answers show it (secret fields masked). */
  entry: SubscriberChannel;
  integration: SendingIntegration;
  /** The credentials as stored, to open for sending: under the notification's subscriber key, else the subscriber's own now. */
  stored: string;
}

export interface StepContextRead {
  /** Whom the notification is for: the subscriberId, and the internal key its rows were written under. */
  subscriberId: string;
  subscriberKey: string;
  /** The environment's subscriber with that subscriberId now; undefined when it was deleted. */
  subscriber?: Subscriber;
  /** The subscriber key's global layer and its layer for the workflow. */
  global: Layer;
  own: Layer;
  /** Email and SMS: the channel's primary active integration, else its oldest active one. */
  integration?: SendingIntegration;
  /** Chat and push: the subscriber's first credentials for the channel whose integration is active. */
  channel?: ChannelForSending;
}

export interface StepContextKey {
  notificationId: string;
  environmentId: string;
  /** The workflow's internal id (the event's snapshot's `id`), whose preference layer is read. */
  workflowKey: string;
  channel: Channel;
}

/** The credentials a chat or push send goes out with, in clear. */
export function credentialsForSending(channel: ChannelForSending, secret: string | undefined): SubscriberChannel['credentials'] {
  return openChannelCredentials(channel.stored, secret);
}

type StepContextRow = SubscriberWithChannelRow & {
  recipient_id: string;
  recipient_key: string;
  global_enabled: unknown;
  global_channels: string | null;
  own_enabled: unknown;
  own_channels: string | null;
  delivery_id: string | null;
  delivery_provider_id: IntegrationRow['provider_id'];
  delivery_credentials: string;
  delivery_send_limits: string | null;
  integration_environment_id: string | null;
  integration_active: unknown;
  integration_provider_id: IntegrationRow['provider_id'];
  integration_credentials: string;
  integration_send_limits: string | null;
  integration_primary_channel: string | null;
  stored_credentials: string | null;
};

// A row per channel of the subscriber (one with null channel columns when it has none, or none is
// found), in findSubscriber's order; every other part is at most one row (a primary key, or the
// LIMIT 1 of the delivery integration), so it repeats on each. Plain LEFT JOINs, each through an
// index, as SUBSCRIBER_BY_ID's: the notification first, by its primary key.
// The preferences and the credentials for sending are read by the notification's subscriber key,
// the subscriber by its subscriberId: a subscriber deleted and created again under the same
// subscriberId is found, without the old key's preferences, and sent to with its own credentials.
// The delivery integration is read only for a channel bound (email, SMS): NULL matches no row.
// Exported for its plan's test.
export const STEP_CONTEXT = `SELECT n.subscriber_id AS recipient_id, n.subscriber_key AS recipient_key,
  ${SUBSCRIBER_COLUMNS},
  c.provider_id, c.credentials, c.integration_id, i.identifier,
  i.environment_id AS integration_environment_id, i.active AS integration_active, i.provider_id AS integration_provider_id,
  i.primary_channel AS integration_primary_channel,
  i.credentials AS integration_credentials, i.send_limits AS integration_send_limits,
  sc.credentials AS stored_credentials,
  g.enabled AS global_enabled, g.channels AS global_channels,
  w.enabled AS own_enabled, w.channels AS own_channels,
  d.id AS delivery_id, d.provider_id AS delivery_provider_id, d.credentials AS delivery_credentials, d.send_limits AS delivery_send_limits
  FROM notifications n
  LEFT JOIN subscribers s ON s.environment_id = ? AND s.subscriber_id = n.subscriber_id
  LEFT JOIN environments e ON e.id = s.environment_id
  LEFT JOIN subscriber_global_preferences g ON g.subscriber_id = n.subscriber_key
  LEFT JOIN subscriber_workflow_preferences w ON w.subscriber_id = n.subscriber_key AND w.workflow_id = ?
  LEFT JOIN integrations d ON d.id = (SELECT di.id FROM integrations di WHERE di.environment_id = ? AND di.channel = ? AND di.active = TRUE
    ORDER BY CASE WHEN di.primary_channel IS NULL THEN 1 ELSE 0 END, di.created_at, di.id LIMIT 1)
  LEFT JOIN subscriber_channels c ON c.subscriber_id = s.id
  LEFT JOIN integrations i ON i.id = c.integration_id
  LEFT JOIN subscriber_channels sc ON sc.subscriber_id = n.subscriber_key AND sc.integration_id = c.integration_id
  WHERE n.id = ?
  ORDER BY c.created_at, c.integration_id`;

/** Reads everything a channel job is decided from, in one statement; undefined when its notification is gone. */
export async function readStepContext(db: Runner, key: StepContextKey): Promise<StepContextRead | undefined> {
  const { environmentId, channel } = key;
  const deliveryChannel = channel === 'email' || channel === 'sms' ? channel : null;
  const rows = await selectRows<StepContextRow>(db, STEP_CONTEXT, [environmentId, key.workflowKey, environmentId, deliveryChannel, key.notificationId]);
  if (rows.length === 0) return undefined;
  const [first] = rows;
  const read: StepContextRead = {
    subscriberId: first.recipient_id,
    subscriberKey: first.recipient_key,
    subscriber: subscriberOfRows(rows),
    // A layer's channels are never null: null columns are a layer not stored.
    global: toLayer(first.global_channels === null ? undefined : { enabled: first.global_enabled, channels: first.global_channels }),
    own: toLayer(first.own_channels === null ? undefined : { enabled: first.own_enabled, channels: first.own_channels }),
  };
  if (first.delivery_id !== null) {
    read.integration = { id: first.delivery_id, provider_id: first.delivery_provider_id, credentials: first.delivery_credentials, send_limits: first.delivery_send_limits };
  }
  if ((channel === 'chat' || channel === 'push') && read.subscriber) read.channel = activeChannel(rows, environmentId, channel);
  return read;
}

/**
 * The subscriber's credentials for `channel` whose integration is the environment's and active: those
 * of the channel's primary integration when the subscriber has some, else the first.
 */
function activeChannel(rows: StepContextRow[], environmentId: string, channel: Channel): ChannelForSending | undefined {
  let chosen: StepContextRow | undefined;
  for (const row of rows) {
    if (row.identifier === null || PROVIDERS[row.provider_id]?.channel !== channel) continue;
    if (row.integration_environment_id !== environmentId || !readBool(row.integration_active)) continue;
    if (row.integration_primary_channel === channel) {
      chosen = row;
      break;
    }
    chosen ??= row;
  }
  if (!chosen) return undefined;
  const integration = { id: chosen.integration_id, provider_id: chosen.integration_provider_id, credentials: chosen.integration_credentials, send_limits: chosen.integration_send_limits };
  // Sent with what is stored under the notification's subscriber key; when the subscriber was
  // deleted and created again under the same subscriberId, with what the subscriber has now
  // (never with the masked form the entry shows).
  return { entry: channelOf(chosen), integration, stored: chosen.stored_credentials ?? chosen.credentials };
}
