import { changeRows, inList, selectRows, type Db, type Runner } from '../knex.js';
import { deleteInParts } from '../delete-in-parts.js';
import type { Schemas } from '../../contract.js';
import { newId } from '../../ids.js';
import { setStoredJson, writeJson } from '../json.js';
import { bytesOf, paginate, type Page, type PageRequest } from '../paginate.js';
import { chunks } from '../chunks.js';
import { channelOf, channelsBySubscriber, type ChannelRow } from './subscriber-channels.js';

export type Subscriber = Schemas['Subscriber'];
export type SubscriberInput = Schemas['SubscriberCreate'];
export type SubscriberPatch = Schemas['SubscriberUpdate'];

interface SubscriberRow {
  id: string;
  environment_id: string;
  organization_id: string;
  subscriber_id: string;
  email: string | null;
  first_name: string | null;
  last_name: string | null;
  phone: string | null;
  avatar: string | null;
  locale: string | null;
  timezone: string | null;
  data: string;
  created_at: string;
  updated_at: string;
}

/** Profile fields: wire name → column. */
const PROFILE_COLUMNS = {
  email: 'email',
  firstName: 'first_name',
  lastName: 'last_name',
  phone: 'phone',
  avatar: 'avatar',
  locale: 'locale',
  timezone: 'timezone',
} as const;
type ProfileField = keyof typeof PROFILE_COLUMNS;
const PROFILE_FIELDS = Object.keys(PROFILE_COLUMNS) as ProfileField[];

/** A subscriber as the API answers it; `answered`, made only for an answer (its `data` as stored if large: setStoredJson). */
function toWire(row: SubscriberRow, channels: Subscriber['channels'], answered = false): Subscriber {
  const subscriber: Subscriber = {
    subscriberId: row.subscriber_id,
    data: {},
    channels,
    deleted: false,
    _organizationId: row.organization_id,
    _environmentId: row.environment_id,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
  };
  setStoredJson(subscriber, 'data', row.data, {}, answered);
  // Absent fields are left out, never sent as null (Novu's clients reject null).
  for (const field of PROFILE_FIELDS) {
    const value = row[PROFILE_COLUMNS[field]];
    if (value !== null) subscriber[field] = value;
  }
  return subscriber;
}

async function withChannels(db: Runner, rows: SubscriberRow[], answered = false): Promise<Subscriber[]> {
  const channels = await channelsBySubscriber(db, rows.map((row) => row.id), answered);
  return rows.map((row) => toWire(row, channels.get(row.id)!, answered));
}

function profileColumns(input: Partial<Record<ProfileField, string | null>>): Record<string, string | null> {
  const columns: Record<string, string | null> = {};
  for (const field of PROFILE_FIELDS) {
    if (input[field] !== undefined) columns[PROFILE_COLUMNS[field]] = input[field] ?? null;
  }
  return columns;
}

function scoped(db: Db, environmentId: string) {
  return db('subscribers as s')
    .join('environments as e', 'e.id', 's.environment_id')
    .where('s.environment_id', environmentId)
    .select(db.raw(SUBSCRIBER_COLUMNS));
}

/** SQL for the bytes a subscriber's (`s`) channel credentials hold, which its page answers too. */
const CHANNEL_BYTES = `coalesce((SELECT sum(octet_length(c.credentials)) FROM subscriber_channels c WHERE c.subscriber_id = s.id), 0)`;

export async function listSubscribers(db: Db, environmentId: string, page: PageRequest): Promise<Page<Subscriber>> {
  return paginate<SubscriberRow, Subscriber>(
    scoped(db, environmentId),
    page,
    [
      { column: 's.created_at', order: 'asc' },
      { column: 's.id', order: 'asc' },
    ],
    (rows) => withChannels(db, rows, true),
    db('subscribers').where('environment_id', environmentId),
    `${bytesOf(['s.data'])} + ${CHANNEL_BYTES}`,
  );
}

// SubscriberRow's columns by name (subscribers s, environments e): on PostgreSQL a statement that
// reads `*` is not kept prepared, and on SQLite its rows are named one by one (sqlite.ts, postgres.ts). Exported
// for the reads that take a subscriber with more (repos/step-context.ts).
export const SUBSCRIBER_COLUMNS = `s.id, s.environment_id, e.organization_id, s.subscriber_id, s.email, s.first_name, s.last_name,
  s.phone, s.avatar, s.locale, s.timezone, s.data, s.created_at, s.updated_at`;

// A subscriber and its channels in one statement: a row per channel (one with no channel columns
// when it has none), in the order channelsBySubscriber gives them. Two plain LEFT JOINs, each
// through an index: SQLite materializes a parenthesized join, reading every subscriber's channels.
// Exported for its plan's test.
export const SUBSCRIBER_BY_ID = `SELECT ${SUBSCRIBER_COLUMNS},
  c.provider_id, c.credentials, c.integration_id, i.identifier
  FROM subscribers s JOIN environments e ON e.id = s.environment_id
  LEFT JOIN subscriber_channels c ON c.subscriber_id = s.id
  LEFT JOIN integrations i ON i.id = c.integration_id
  WHERE s.environment_id = ? AND s.subscriber_id = ?
  ORDER BY c.created_at, c.integration_id`;

/**
 * A subscriber's columns and one channel's, null when it has no channel (the LEFT JOINs); the
 * subscriber's are null too when a read that LEFT JOINs subscribers found none.
 */
export type SubscriberWithChannelRow = SubscriberRow & ChannelRow;

/** The subscriber of rows shaped as SUBSCRIBER_BY_ID's (a row per channel, in order); undefined when they hold none. */
export function subscriberOfRows(rows: SubscriberWithChannelRow[], answered = false): Subscriber | undefined {
  if (rows.length === 0 || rows[0].id === null) return undefined;
  // A row without an integration is no channel, as channelsBySubscriber's inner join has it.
  const channels = rows.filter((row) => row.identifier !== null).map(channelOf);
  return toWire(rows[0], channels, answered);
}

/** The subscriber; `answered` when it is read only to be answered (see toWire). */
export async function findSubscriber(db: Runner, environmentId: string, subscriberId: string, answered = false): Promise<Subscriber | undefined> {
  return subscriberOfRows(await selectRows<SubscriberWithChannelRow>(db, SUBSCRIBER_BY_ID, [environmentId, subscriberId]), answered);
}

/** The internal id of a subscriber, for rows that point at it. */
export async function subscriberKey(db: Db, environmentId: string, subscriberId: string): Promise<string | undefined> {
  const row = await db('subscribers').where({ environment_id: environmentId, subscriber_id: subscriberId }).first('id');
  return row?.id;
}

/** Inserts a subscriber; a duplicate subscriberId surfaces as the database's unique violation. */
export async function insertSubscriber(db: Db, environmentId: string, input: SubscriberInput, now: Date): Promise<void> {
  const at = now.toISOString();
  await db('subscribers').insert({
    id: newId(now.getTime()),
    environment_id: environmentId,
    subscriber_id: input.subscriberId,
    ...profileColumns(input),
    data: writeJson(input.data ?? {}),
    created_at: at,
    updated_at: at,
  });
}

/** Applies a partial update; false when there is no such subscriber. */
export async function updateSubscriber(
  db: Db,
  environmentId: string,
  subscriberId: string,
  patch: SubscriberPatch,
  now: Date,
): Promise<boolean> {
  const changes: Record<string, unknown> = { ...profileColumns(patch), updated_at: now.toISOString() };
  if (patch.data !== undefined) changes.data = writeJson(patch.data ?? {});
  const updated = await db('subscribers').where({ environment_id: environmentId, subscriber_id: subscriberId }).update(changes);
  return updated > 0;
}

/**
 * Deletes a subscriber; its memberships, preferences and credentials go with it (foreign keys). Its
 * inbox, which has no bound, goes first through deleteInParts: the cascade from the subscriber row
 * removed it all in one statement. One transaction: all of it goes or none.
 */
export async function deleteSubscriber(db: Db, environmentId: string, subscriberId: string): Promise<boolean> {
  return db.transaction(async (trx) => {
    const [row] = await selectRows<{ id: string }>(trx, 'SELECT id FROM subscribers WHERE environment_id = ? AND subscriber_id = ?', [environmentId, subscriberId]);
    if (!row) return false;
    // Each by the subscriber's own index: messages (subscriber_key, created_at, id), inbox_events (subscriber_key, seq).
    await deleteInParts(trx, 'messages', 'subscriber_key = ?', [row.id]);
    await deleteInParts(trx, 'inbox_events', 'subscriber_key = ?', [row.id]);
    await changeRows(trx, 'DELETE FROM subscribers WHERE id = ?', [row.id]);
    return true;
  });
}

/**
 * Creates a subscriber, or updates the fields given when it exists (inline subscribers in a
 * trigger). One statement, so concurrent triggers naming the same new subscriber cannot collide.
 */
export async function upsertSubscriber(db: Db, environmentId: string, input: SubscriberInput, now: Date): Promise<void> {
  const at = now.toISOString();
  const profile = profileColumns(input);
  const changes: Record<string, unknown> = { ...profile, updated_at: at };
  if (input.data !== undefined) changes.data = writeJson(input.data);
  await db('subscribers')
    .insert({
      id: newId(now.getTime()),
      environment_id: environmentId,
      subscriber_id: input.subscriberId,
      ...profile,
      data: writeJson(input.data ?? {}),
      created_at: at,
      updated_at: at,
    })
    .onConflict(['environment_id', 'subscriber_id'])
    .merge(changes);
}

/** Internal ids of the given subscriberIds that exist in the environment. */
export async function subscriberKeys(db: Db, environmentId: string, subscriberIds: string[]): Promise<Map<string, string>> {
  const keys = new Map<string, string>();
  for (const part of chunks(subscriberIds)) {
    const ids = inList(db, 'subscriber_id', part);
    const rows = await selectRows<{ id: string; subscriber_id: string }>(
      db,
      `SELECT id, subscriber_id FROM subscribers WHERE environment_id = ? AND ${ids.sql}`,
      [environmentId, ...ids.bindings],
    );
    for (const row of rows) keys.set(row.subscriber_id, row.id);
  }
  return keys;
}

/** Which of the given internal ids are subscribers still. */
export async function existingKeys(db: Db, keys: readonly string[]): Promise<Set<string>> {
  const found = new Set<string>();
  for (const part of chunks(keys)) {
    const ids = inList(db, 'id', part);
    for (const row of await selectRows<{ id: string }>(db, `SELECT id FROM subscribers WHERE ${ids.sql}`, ids.bindings)) found.add(row.id);
  }
  return found;
}

/** The keys of the topics a subscriber is a member of, oldest topic first. */
export async function topicKeysOf(db: Db, environmentId: string, subscriberId: string): Promise<string[]> {
  const rows = await db('topic_subscribers as ts')
    .join('topics as t', 't.id', 'ts.topic_id')
    .join('subscribers as s', 's.id', 'ts.subscriber_id')
    .where({ 's.environment_id': environmentId, 's.subscriber_id': subscriberId })
    .orderBy([{ column: 't.created_at' }, { column: 't.id' }])
    .select('t.topic_key');
  return rows.map((row: { topic_key: string }) => row.topic_key);
}

/** Subscribers by internal id, with their channels, in a fixed number of queries. */
export async function subscribersByKey(db: Runner, keys: string[]): Promise<Map<string, Subscriber>> {
  const rows: SubscriberRow[] = [];
  for (const part of chunks(keys)) {
    const ids = inList(db, 's.id', part);
    const sql = `SELECT ${SUBSCRIBER_COLUMNS} FROM subscribers s JOIN environments e ON e.id = s.environment_id WHERE ${ids.sql}`;
    rows.push(...(await selectRows<SubscriberRow>(db, sql, ids.bindings)));
  }
  const subscribers = await withChannels(db, rows);
  return new Map(rows.map((row, index) => [row.id, subscribers[index]]));
}
