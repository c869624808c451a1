import type { Knex } from 'knex';
import { inList, selectPage, selectRows, type Db, type Runner } from '../knex.js';
import { pacer } from '../../turns.js';
import type { Schemas } from '../../contract.js';
import { readJson } from '../json.js';
import { isSealed, maskUrl, open, seal } from '../../crypto.js';

export type SubscriberChannel = Schemas['SubscriberChannel'];

/**
 * The chat and push credentials of several subscribers (by internal id), in one query. `paged`, for
 * a list's page: its credentials may be large (100 device tokens of 4 KiB a channel), so they are
 * read as a page is (off the event loop when large: selectPage) and parsed with the loop turning
 * between rows.
 */
export async function channelsBySubscriber(db: Runner, subscriberIds: string[], paged = false): Promise<Map<string, SubscriberChannel[]>> {
  const channels = new Map<string, SubscriberChannel[]>(subscriberIds.map((id) => [id, []]));
  if (subscriberIds.length === 0) return channels;
  const ids = inList(db, 'c.subscriber_id', subscriberIds);
  // Put in order here, not by the statement: SQLite sorts every row before it answers the first, so
  // a page's large credentials would all be read on the event loop before selectPage could tell.
  const sql = `SELECT c.subscriber_id, c.provider_id, c.credentials, i.id AS integration_id, i.identifier, c.created_at
     FROM subscriber_channels c JOIN integrations i ON i.id = c.integration_id
     WHERE ${ids.sql}`;
  const rows = await (paged ? selectPage : selectRows)<ChannelRow & { subscriber_id: string; created_at: string }>(db, sql, ids.bindings);
  // Both ASCII (an ISO time, a hex id): compared as the statement's ORDER BY compared them.
  rows.sort((a, b) => (a.created_at < b.created_at ? -1 : a.created_at > b.created_at ? 1 : a.integration_id < b.integration_id ? -1 : a.integration_id > b.integration_id ? 1 : 0));
  const pace = paged ? pacer() : undefined;
  for (const row of rows) {
    channels.get(row.subscriber_id)!.push(channelOf(row));
    if (pace) await pace();
  }
  return channels;
}

/** A subscriber_channels row's columns, with its integration's identifier. */
export interface ChannelRow {
  provider_id: SubscriberChannel['providerId'];
  credentials: string;
  integration_id: string;
  identifier: string;
}

/**
 * The fields of a subscriber's channel credentials that are secrets: whoever has a chat webhook's
 * URL can post to the channel. With a secret they are sealed at rest (each field on its own, the
 * rest of the JSON stays readable), and they are masked in every answer; `_shown` keeps the masked
 * form beside the sealed value, so answers need no key.
 */
const SECRET_FIELDS = ['webhookUrl'] as const;
const SHOWN = '_shown';

type StoredCredentials = Record<string, unknown> & { [SHOWN]?: Record<string, string> };

/** The credentials as stored: secret fields sealed when there is a secret, clear otherwise. */
export function writeChannelCredentials(credentials: SubscriberChannel['credentials'], secret: string | undefined): string {
  const stored: StoredCredentials = { ...credentials };
  if (secret) {
    const shown: Record<string, string> = {};
    for (const field of SECRET_FIELDS) {
      const value = stored[field];
      if (typeof value !== 'string' || isSealed(value)) continue;
      shown[field] = maskUrl(value);
      stored[field] = seal(value, secret);
    }
    if (Object.keys(shown).length > 0) stored[SHOWN] = shown;
  }
  return JSON.stringify(stored);
}

/** The credentials as answers show them: secret fields masked, whether they are sealed or not. */
export function shownChannelCredentials(text: string): SubscriberChannel['credentials'] {
  const { [SHOWN]: shown, ...credentials } = readJson<StoredCredentials>(text, {});
  for (const field of SECRET_FIELDS) {
    const value = credentials[field];
    if (typeof value === 'string') credentials[field] = shown?.[field] ?? (isSealed(value) ? '…' : maskUrl(value));
  }
  return credentials as SubscriberChannel['credentials'];
}

/** The credentials in clear, for sending; throws a SealError when a sealed field cannot be opened. */
export function openChannelCredentials(text: string, secret: string | undefined): SubscriberChannel['credentials'] {
  const { [SHOWN]: _shown, ...credentials } = readJson<StoredCredentials>(text, {});
  for (const field of SECRET_FIELDS) {
    const value = credentials[field];
    if (typeof value === 'string') credentials[field] = open(value, secret);
  }
  return credentials as SubscriberChannel['credentials'];
}

/** A channel row as the API shows it (secret fields masked). */
export function channelOf(row: ChannelRow): SubscriberChannel {
  return {
    providerId: row.provider_id,
    integrationIdentifier: row.identifier,
    _integrationId: row.integration_id,
    credentials: shownChannelCredentials(row.credentials),
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
 * (subscriber, integration), so a second PUT overwrites rather than adds. The subscriber shows its
 * channels, so its updatedAt moves too (call it in a transaction).
 */
export async function upsertSubscriberChannel(db: Db | Knex.Transaction, input: SubscriberChannelWrite, now: Date, secret: string | undefined): Promise<void> {
  const at = now.toISOString();
  await db('subscriber_channels')
    .insert({
      subscriber_id: input.subscriberKey,
      integration_id: input.integrationId,
      provider_id: input.providerId,
      credentials: writeChannelCredentials(input.credentials, secret),
      created_at: at,
      updated_at: at,
    })
    .onConflict(['subscriber_id', 'integration_id'])
    .merge(['provider_id', 'credentials', 'updated_at']);
  await db('subscribers').where({ id: input.subscriberKey }).update({ updated_at: at });
}

/**
 * Seals every secret field still stored in clear (rows written before the server had a secret),
 * a page at a time; answers how many rows it sealed. Each row is updated only if it is still as
 * read, so processes starting together, or a PUT meanwhile, cannot be overwritten with older text.
 */
export async function sealClearChannels(db: Db, secret: string, pageSize = 500): Promise<number> {
  let sealed = 0;
  let after = ['', ''];
  for (;;) {
    const rows = await selectRows<{ subscriber_id: string; integration_id: string; credentials: string }>(
      db,
      `SELECT subscriber_id, integration_id, credentials FROM subscriber_channels
       WHERE (subscriber_id > ? OR (subscriber_id = ? AND integration_id > ?)) AND credentials LIKE ?
       ORDER BY subscriber_id, integration_id LIMIT ${Number(pageSize)}`,
      [after[0], after[0], after[1], '%"webhookUrl":"http%'],
    );
    if (rows.length === 0) return sealed;
    for (const row of rows) {
      const credentials = readJson<Record<string, unknown>>(row.credentials, {});
      const stored = writeChannelCredentials(credentials as SubscriberChannel['credentials'], secret);
      if (stored === row.credentials) continue;
      sealed += await db('subscriber_channels')
        .where({ subscriber_id: row.subscriber_id, integration_id: row.integration_id, credentials: row.credentials })
        .update({ credentials: stored });
    }
    const last = rows[rows.length - 1];
    after = [last.subscriber_id, last.integration_id];
  }
}
