import { isPostgres, selectRows, type Db, type Runner } from '../knex.js';
import { deleteInParts } from '../delete-in-parts.js';
import { insertRows } from '../insert-rows.js';
import { whereInShard, type FanoutShard } from '../fanout-shards.js';
import type { Schemas } from '../../contract.js';
import { newId } from '../../ids.js';
import { countOf, paginate, type Page, type PageRequest } from '../paginate.js';
import { chunks, ID_CHUNK } from '../chunks.js';
import { readJson } from '../json.js';

export type Topic = Schemas['Topic'];
export type TopicMember = Schemas['TopicMember'];

/** How many member ids a topic shows inline (GET and list); the rest are paged. */
export const INLINE_MEMBERS = 100;

export interface TopicRow {
  id: string;
  environment_id: string;
  organization_id: string;
  topic_key: string;
  name: string;
  created_at: string;
  updated_at: string;
}

interface Members {
  count: number;
  first: string[];
}

function toWire(row: TopicRow, members: Members): Topic {
  return {
    topicKey: row.topic_key,
    key: row.topic_key,
    name: row.name,
    subscriberCount: members.count,
    subscribers: members.first,
    _organizationId: row.organization_id,
    _environmentId: row.environment_id,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
  };
}

// TopicRow's columns by name: on SQLite a read of `*` has its rows named one by one (sqlite.ts, postgres.ts).
const TOPIC_COLUMNS = 't.id, t.environment_id, e.organization_id, t.topic_key, t.name, t.created_at, t.updated_at';

function scoped(db: Db, environmentId: string) {
  return db('topics as t')
    .join('environments as e', 'e.id', 't.environment_id')
    .where('t.environment_id', environmentId)
    .select(db.raw(TOPIC_COLUMNS));
}

/**
 * The member count and first members of several topics (a page of them), each read as membersOf
 * reads one: a ranking of all the topics' memberships at once numbered every member of a topic of
 * 100,000 to keep its first 100.
 */
async function membersOfMany(db: Db, topicIds: string[]): Promise<Map<string, Members>> {
  const members = new Map<string, Members>();
  for (const id of topicIds) members.set(id, await membersOf(db, id));
  return members;
}

/** A topic's member count (off the event loop: a topic may have many) and its first members, in the index's order. */
async function membersOf(db: Db, topicId: string): Promise<Members> {
  const count = await countOf(db('topic_subscribers').where('topic_id', topicId));
  const first = await db('topic_subscribers as ts')
    .join('subscribers as s', 's.id', 'ts.subscriber_id')
    .where('ts.topic_id', topicId)
    .orderBy([{ column: 'ts.created_at' }, { column: 'ts.subscriber_id' }])
    .limit(INLINE_MEMBERS)
    .select('s.subscriber_id');
  return { count, first: first.map((row: { subscriber_id: string }) => row.subscriber_id) };
}

async function withMembers(db: Db, rows: TopicRow[]): Promise<Topic[]> {
  if (rows.length === 0) return [];
  const members = await membersOfMany(db, rows.map((row) => row.id));
  return rows.map((row) => toWire(row, members.get(row.id)!));
}

export async function listTopics(db: Db, environmentId: string, page: PageRequest, key?: string): Promise<Page<Topic>> {
  const query = scoped(db, environmentId);
  const counted = db('topics').where('environment_id', environmentId);
  if (key !== undefined) {
    query.where('t.topic_key', key);
    counted.where('topic_key', key);
  }
  return paginate<TopicRow, Topic>(
    query,
    page,
    [
      { column: 't.created_at', order: 'asc' },
      { column: 't.id', order: 'asc' },
    ],
    (rows) => withMembers(db, rows),
    counted,
  );
}

/** The topic's row (for its internal id), or undefined when the environment has no such key. */
export async function findTopicRow(db: Db, environmentId: string, topicKey: string): Promise<TopicRow | undefined> {
  return scoped(db, environmentId).where('t.topic_key', topicKey).first();
}

export async function findTopic(db: Db, environmentId: string, topicKey: string): Promise<Topic | undefined> {
  const row = await findTopicRow(db, environmentId, topicKey);
  return row ? toWire(row, await membersOf(db, row.id)) : undefined;
}

/** Inserts an empty topic; a duplicate key surfaces as the database's unique violation. */
export async function insertTopic(db: Db, environmentId: string, input: { topicKey: string; name: string }, now: Date): Promise<void> {
  const at = now.toISOString();
  await db('topics').insert({
    id: newId(now.getTime()),
    environment_id: environmentId,
    topic_key: input.topicKey,
    name: input.name,
    created_at: at,
    updated_at: at,
  });
}

/**
 * Of these topics, those that still exist, held until the transaction ends so that none is deleted
 * meanwhile (PostgreSQL `FOR KEY SHARE`; on SQLite the writing transaction runs alone): a trigger's
 * fan-out job is written only for topics a delete has not taken from under it.
 */
export async function holdTopics(trx: Runner, topicIds: string[]): Promise<Set<string>> {
  const query = trx('topics').whereIn('id', topicIds).select('id');
  if (isPostgres(trx)) query.forKeyShare();
  const rows: Array<{ id: string }> = await query;
  return new Set(rows.map((row) => row.id));
}

/**
 * The id of a topic about to be deleted, held (PostgreSQL `FOR UPDATE`) so that a trigger holding
 * it is waited for and its fan-out then seen; undefined when there is no such topic.
 */
export async function holdTopicForDelete(trx: Runner, environmentId: string, topicKey: string): Promise<string | undefined> {
  const query = trx('topics').where({ environment_id: environmentId, topic_key: topicKey }).first('id');
  if (isPostgres(trx)) query.forUpdate();
  const row: { id: string } | undefined = await query;
  return row?.id;
}

/**
 * The open fan-outs of an environment, through their own index (jobs_open_fanouts): its condition
 * is written out, not bound, for SQLite to see that the index holds every row asked for.
 */
export const OPEN_FANOUTS = `SELECT state FROM jobs WHERE environment_id = ? AND type = 'fanout' AND status IN ('pending', 'queued', 'delayed', 'running')`;

/** How many fan-outs of the topic are still to run or running: they read its members as they go. */
export async function fanoutsOfTopic(db: Runner, environmentId: string, topicId: string): Promise<number> {
  const rows = await selectRows<{ state: unknown }>(db, OPEN_FANOUTS, [environmentId]);
  return rows.filter(({ state }) => readJson<Partial<FanoutPosition>>(state, {}).topicIds?.includes(topicId)).length;
}

/** Deletes a topic and its memberships (deleteInParts: a topic may have any number); its subscribers stay. */
export async function deleteTopic(trx: Runner, topicId: string): Promise<void> {
  await deleteInParts(trx, 'topic_subscribers', 'topic_id = ?', [topicId]);
  await trx('topics').where('id', topicId).delete();
}

/** One page of a topic's members, oldest membership first. */
export async function listMembers(db: Db, topicId: string, page: PageRequest): Promise<Page<TopicMember>> {
  return paginate<{ subscriber_id: string; created_at: string }, TopicMember>(
    db('topic_subscribers as ts')
      .join('subscribers as s', 's.id', 'ts.subscriber_id')
      .where('ts.topic_id', topicId)
      .select('s.subscriber_id', 'ts.created_at'),
    page,
    [
      { column: 'ts.created_at', order: 'asc' },
      { column: 'ts.subscriber_id', order: 'asc' },
    ],
    (rows) => rows.map((row) => ({ subscriberId: row.subscriber_id, addedAt: row.created_at })),
    // Every membership has its subscriber (a foreign key that cascades): counted without the join.
    db('topic_subscribers').where('topic_id', topicId),
  );
}

export interface Resolved {
  /** subscriberId → internal id, for the ids that exist, in the order first asked for. */
  found: Map<string, string>;
  /** The ids that match no subscriber of the environment, each once, in the order asked for. */
  notFound: string[];
}

/** Maps subscriberIds of one environment to their internal ids; duplicates count once. */
export async function resolveSubscribers(db: Db, environmentId: string, subscriberIds: string[]): Promise<Resolved> {
  const unique = [...new Set(subscriberIds)];
  const internal = new Map<string, string>();
  for (const ids of chunks(unique, ID_CHUNK)) {
    const rows = await db('subscribers').where('environment_id', environmentId).whereIn('subscriber_id', ids).select('id', 'subscriber_id');
    for (const row of rows as Array<{ id: string; subscriber_id: string }>) internal.set(row.subscriber_id, row.id);
  }
  const found = new Map<string, string>();
  const notFound: string[] = [];
  for (const id of unique) {
    const key = internal.get(id);
    if (key === undefined) notFound.push(id);
    else found.set(id, key);
  }
  return { found, notFound };
}

/** Adds memberships (by internal subscriber id); existing ones are left as they are. */
export async function addMembers(db: Db, topicId: string, subscriberKeys: string[], now: Date): Promise<void> {
  const at = now.toISOString();
  await db.transaction(async (trx) => {
    // insertRows, not knex's insert: knex builds a statement of a thousand rows slower than SQLite runs it.
    const rows = subscriberKeys.map((subscriberId) => ({ topic_id: topicId, subscriber_id: subscriberId, created_at: at }));
    await insertRows(trx, 'topic_subscribers', rows, { skipConflictsOn: ['topic_id', 'subscriber_id'] });
    await trx('topics').where('id', topicId).update({ updated_at: at });
  });
}

/** Removes memberships (by internal subscriber id); ids that were not members are no error. */
export async function removeMembers(db: Db, topicId: string, subscriberKeys: string[], now: Date): Promise<void> {
  await db.transaction(async (trx) => {
    for (const batch of chunks(subscriberKeys, ID_CHUNK)) {
      await trx('topic_subscribers').where('topic_id', topicId).whereIn('subscriber_id', batch).delete();
    }
    await trx('topics').where('id', topicId).update({ updated_at: now.toISOString() });
  });
}

/**
 * Members a fan-out notifies per batch, one transaction, at most: the commit costs about the same
 * for 500 members as for 100 (on SQLite a page of each index a batch touches is written once).
 */
export const FANOUT_BATCH_SIZE = 500;

/**
 * Members a fan-out reads and notifies at a time. SQLite runs a batch on the event loop, which it
 * gives back between two slices, so that other requests get through; another writer waiting ends
 * the batch there (engine/execute.ts). On PostgreSQL the loop is free meanwhile: one slice a batch.
 * A fan-out whose first step is in-app takes fewer, sized by the members' data and messages.
 * (`npm run bench -- --large`, a 100,000-member fan-out; bench/README.md, "Fan-out batches", has the A/B.)
 */
export function fanoutSliceSize(db: Runner): number {
  return isPostgres(db) ? FANOUT_BATCH_SIZE : 100;
}

/** Where a topic fan-out stands: its topics, the members left out, its shard, and the last member done. */
export interface FanoutPosition {
  topicIds: string[];
  exclude: string[];
  shard?: FanoutShard;
  cursor?: string;
  /** The characters of in-app message its last slice wrote for each member, which sizes the next (engine/execute.ts). */
  memberChars?: number;
}

/** A member of a fan-out, with the bytes of its `data` (which the database measures without reading it). */
export interface FanoutMember {
  key: string;
  subscriberId: string;
  dataBytes: number;
}

/**
 * The next `size` members of a fan-out, in subscriber-id order after the cursor, and whether more
 * may follow (the slice is full). One topic's members come straight from its (topic,
 * subscriber) key, in order, a slice at a time; members of several topics come once (DISTINCT),
 * which costs a sort of the members still to come.
 */
export async function fanoutSlice(
  db: Runner,
  { topicIds, exclude, shard, cursor }: FanoutPosition,
  size = fanoutSliceSize(db),
): Promise<{ members: FanoutMember[]; more: boolean }> {
  const columns = ['ts.subscriber_id as key', 's.subscriber_id as subscriberId', db.raw('octet_length(s.data) as "dataBytes"')];
  const query = db('topic_subscribers as ts')
    .join('subscribers as s', 's.id', 'ts.subscriber_id')
    .whereIn('ts.topic_id', topicIds)
    .orderBy('ts.subscriber_id')
    .limit(size);
  if (topicIds.length > 1) query.distinct(columns);
  else query.select(columns);
  // The cursor bounds both sides of the join: PostgreSQL carries an equality across a join but not
  // a range, so a merge join would read subscribers from the first one on every batch.
  if (cursor) query.where('ts.subscriber_id', '>', cursor).where('s.id', '>', cursor);
  if (exclude.length > 0) query.whereNotIn('ts.subscriber_id', exclude);
  whereInShard(query, 'ts.subscriber_id', shard);
  const rows: FanoutMember[] = await query;
  const members = rows.map((row) => ({ ...row, dataBytes: Number(row.dataBytes) }));
  return { members, more: members.length === size };
}

/** The internal ids of the environment's topics among `topicKeys`, by key. */
export async function topicIdsByKey(db: Runner, environmentId: string, topicKeys: string[]): Promise<Map<string, string>> {
  const found = new Map<string, string>();
  for (const part of chunks(topicKeys)) {
    const rows: Array<{ id: string; topic_key: string }> = await db('topics').where('environment_id', environmentId).whereIn('topic_key', part).select('id', 'topic_key');
    for (const row of rows) found.set(row.topic_key, row.id);
  }
  return found;
}
