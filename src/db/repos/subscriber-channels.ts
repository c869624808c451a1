import type { Knex } from 'knex';
import { inList, selectRows, type Db, type Runner } from '../knex.js';
import type { Schemas } from '../../contract.js';
import { readJson, writeJson } from '../json.js';

export type SubscriberChannel = Schemas['SubscriberChannel'];

/** The chat and push credentials of several subscribers (by internal id), in one query. */
export async function channelsBySubscriber(db: Runner, subscriberIds: string[]): Promise<Map<string, SubscriberChannel[]>> {
  const channels = new Map<string, SubscriberChannel[]>(subscriberIds.map((id) => [id, []]));
  if (subscriberIds.length === 0) return channels;
  const ids = inList(db, 'c.subscriber_id', subscriberIds);
  const rows = await selectRows<ChannelRow & { subscriber_id: string }>(
    db,
    `SELECT c.subscriber_id, c.provider_id, c.credentials, i.id AS integration_id, i.identifier
     FROM subscriber_channels c JOIN integrations i ON i.id = c.integration_id
     WHERE ${ids.sql} ORDER BY c.created_at, c.integration_id`,
    ids.bindings,
  );
  for (const row of rows) channels.get(row.subscriber_id)!.push(channelOf(row));
  return channels;
}

/** A subscriber_channels row's columns, with its integration's identifier. */
export interface ChannelRow {
  provider_id: SubscriberChannel['providerId'];
  credentials: string;
  integration_id: string;
  identifier: string;
}

/** A channel row as the API shows it. */
export function channelOf(row: ChannelRow): SubscriberChannel {
  return {
    providerId: row.provider_id,
    integrationIdentifier: row.identifier,
    _integrationId: row.integration_id,
    credentials: readJson(row.credentials, {}),
  };
}

export interface SubscriberChannelWrite {
  /** The subscriber's internal id (subscriberKey). */
  subscriberKey: string;
  integrationId: string;
  providerId: SubscriberChannel['providerId'];
  credentials: SubscriberChannel['credentials'];
}

/**
 * Sets a subscriber's credentials for one integration, replacing any it had: one row per
 * (subscriber, integration), so a second PUT overwrites rather than adds.
 */
export async function upsertSubscriberChannel(db: Db | Knex.Transaction, input: SubscriberChannelWrite, now: Date): Promise<void> {
  const at = now.toISOString();
  await db('subscriber_channels')
    .insert({
      subscriber_id: input.subscriberKey,
      integration_id: input.integrationId,
      provider_id: input.providerId,
      credentials: writeJson(input.credentials),
      created_at: at,
      updated_at: at,
    })
    .onConflict(['subscriber_id', 'integration_id'])
    .merge(['provider_id', 'credentials', 'updated_at']);
}
