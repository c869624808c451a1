import type { Knex } from 'knex';
import { selectRows, type Db, type Runner } from '../knex.js';
import type { Schemas } from '../../contract.js';
import { newId } from '../../ids.js';
import { open, sealIfSecret } from '../../crypto.js';
import { isSecretCredential, sendLimitsOf, type ChannelType, type IntegrationCredentials, type ProviderId, type SendLimits } from '../../providers/catalogue.js';
import { readBool, readJson } from '../json.js';
import { paginate, type Page, type PageRequest } from '../paginate.js';

export type Integration = Schemas['Integration'];

export interface IntegrationRow {
  id: string;
  environment_id: string;
  organization_id: string;
  provider_id: ProviderId;
  channel: ChannelType;
  name: string;
  identifier: string;
  credentials: string;
  /** The integration's own send limits (JSON), or null for its provider's. */
  send_limits: string | null;
  active: unknown;
  primary_channel: string | null;
  created_at: string;
  updated_at: string;
}

const MASK = '********';

/**
 * How a stored credential is shown: never in clear. A value of 12 characters or more that is not a
 * secret keeps its last 4 (enough to tell `….com` hosts or account ids apart); anything else is
 * the mask alone.
 */
function maskCredential(value: unknown, secret: boolean): string {
  const text = typeof value === 'string' ? value : JSON.stringify(value);
  return !secret && text.length >= 12 ? MASK + text.slice(-4) : MASK;
}

function maskCredentials(providerId: ProviderId, credentials: Record<string, unknown>): Record<string, string> {
  const masked: Record<string, string> = {};
  for (const [name, value] of Object.entries(credentials)) {
    if (value !== undefined && value !== null) masked[name] = maskCredential(value, isSecretCredential(providerId, name));
  }
  return masked;
}

/** The credentials of a row in clear; throws (a 500, cause logged) when they are sealed and cannot be opened. */
export function readCredentials(row: Pick<IntegrationRow, 'credentials'>, secret: string | undefined): IntegrationCredentials {
  return readJson<IntegrationCredentials>(open(String(row.credentials), secret), {});
}

/** As stored: sealed when the server has a secret, plain JSON otherwise. */
function writeCredentials(credentials: IntegrationCredentials, secret: string | undefined): string {
  return sealIfSecret(JSON.stringify(credentials), secret);
}

/** The send limits the integration set itself, if it did. */
export function ownSendLimits(row: Pick<IntegrationRow, 'send_limits'>): SendLimits | null {
  return row.send_limits === null ? null : readJson<SendLimits>(row.send_limits, {});
}

function toWire(row: IntegrationRow, secret: string | undefined): Integration {
  return {
    integrationId: row.id,
    _id: row.id,
    providerId: row.provider_id,
    channel: row.channel,
    name: row.name,
    identifier: row.identifier,
    credentials: maskCredentials(row.provider_id, readCredentials(row, secret) as Record<string, unknown>),
    active: readBool(row.active),
    primary: row.primary_channel !== null,
    sendLimits: sendLimitsOf(row.provider_id, ownSendLimits(row)),
    customSendLimits: row.send_limits !== null,
    deleted: false,
    _organizationId: row.organization_id,
    _environmentId: row.environment_id,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
  };
}

function scoped(db: Runner, environmentId: string) {
  return db('integrations as i')
    .join('environments as e', 'e.id', 'i.environment_id')
    .where('i.environment_id', environmentId)
    .select(db.raw(INTEGRATION_COLUMNS));
}

// IntegrationRow's columns by name: on PostgreSQL a statement that reads `*` is not kept prepared, and
// on SQLite its rows are named one by one (sqlite.ts, postgres.ts).
const INTEGRATION_COLUMNS = `i.id, i.environment_id, e.organization_id, i.provider_id, i.channel, i.name, i.identifier, i.credentials,
  i.send_limits, i.active, i.primary_channel, i.created_at, i.updated_at`;

/** scoped() as plain SQL, for reads by id: a prepared statement, not the query builder. */
const SCOPED_SQL = `SELECT ${INTEGRATION_COLUMNS}
  FROM integrations AS i JOIN environments AS e ON e.id = i.environment_id WHERE i.environment_id = ?`;

const OLDEST_FIRST = [
  { column: 'i.created_at', order: 'asc' as const },
  { column: 'i.id', order: 'asc' as const },
];

export interface IntegrationFilter {
  includeInactive?: boolean;
  channel?: ChannelType;
}

export async function listIntegrations(
  db: Db,
  environmentId: string,
  page: PageRequest,
  filter: IntegrationFilter,
  secret: string | undefined,
): Promise<Page<Integration>> {
  const query = scoped(db, environmentId);
  if (!filter.includeInactive) query.where('i.active', true);
  if (filter.channel) query.where('i.channel', filter.channel);
  return paginate<IntegrationRow, Integration>(query, page, OLDEST_FIRST, (rows) => rows.map((row) => toWire(row, secret)));
}

/** Every integration of the environment, whatever its status, oldest first. */
export async function allIntegrations(db: Runner, environmentId: string, secret: string | undefined): Promise<Integration[]> {
  const rows: IntegrationRow[] = await scoped(db, environmentId).orderBy(OLDEST_FIRST);
  return rows.map((row) => toWire(row, secret));
}

export async function findIntegration(
  db: Runner,
  environmentId: string,
  integrationId: string,
  secret: string | undefined,
): Promise<Integration | undefined> {
  const row = await findIntegrationRow(db, environmentId, integrationId);
  return row ? toWire(row, secret) : undefined;
}

/** How a lookup of an integration row holds it. */
export interface LookupOptions {
  /**
   * PostgreSQL, inside a transaction: keep the row from being deleted until it commits (what a
   * foreign key to it needs), without holding up other readers or updates.
   */
  forKeyShare?: boolean;
}

/** The row itself (credentials as stored), for writers and the engine. */
export async function findIntegrationRow(db: Runner, environmentId: string, integrationId: string): Promise<IntegrationRow | undefined> {
  const [row] = await selectRows<IntegrationRow>(db, `${SCOPED_SQL} AND i.id = ?`, [environmentId, integrationId]);
  return row;
}

/**
 * The integration of a provider that subscribers' credentials go to when none is named: the
 * channel's primary if it is of that provider, else its oldest active one.
 */
export async function activeIntegrationOf(
  db: Runner,
  environmentId: string,
  providerId: ProviderId,
  options: LookupOptions = {},
): Promise<IntegrationRow | undefined> {
  const query = scoped(db, environmentId)
    .where({ 'i.provider_id': providerId, 'i.active': true })
    .orderByRaw('case when i.primary_channel is null then 1 else 0 end')
    .orderBy(OLDEST_FIRST);
  if (options.forKeyShare) query.forKeyShare('i');
  return query.first();
}

export async function findIntegrationByIdentifier(
  db: Runner,
  environmentId: string,
  identifier: string,
  options: LookupOptions = {},
): Promise<IntegrationRow | undefined> {
  const query = scoped(db, environmentId).where('i.identifier', identifier);
  if (options.forKeyShare) query.forKeyShare('i');
  return query.first();
}

// --- Writes: each takes the transaction the caller opened with lockIntegrations -------------------

/**
 * Serializes the integration writes of one environment, so "is there a primary?" and "is this
 * identifier free?" stay true until the transaction commits. PostgreSQL locks the environment's
 * row (NO KEY UPDATE, so inserts elsewhere that reference the environment are not held up);
 * SQLite already runs one write transaction at a time.
 */
export async function lockIntegrations(trx: Knex.Transaction, environmentId: string): Promise<void> {
  await trx('environments').where('id', environmentId).forNoKeyUpdate().first('id');
}

export async function identifierTaken(trx: Runner, environmentId: string, identifier: string, exceptId?: string): Promise<boolean> {
  const query = trx('integrations').where({ environment_id: environmentId, identifier });
  if (exceptId) query.whereNot('id', exceptId);
  return (await query.first('id')) !== undefined;
}

/** The id of the channel's primary integration, if it has one. */
export async function primaryOf(trx: Runner, environmentId: string, channel: ChannelType): Promise<string | undefined> {
  const row = await trx('integrations').where({ environment_id: environmentId, primary_channel: channel }).first('id');
  return row?.id;
}

export interface IntegrationInsert {
  providerId: ProviderId;
  channel: ChannelType;
  name: string;
  identifier: string;
  credentials: IntegrationCredentials;
  active: boolean;
  sendLimits?: SendLimits | null;
}

/** Inserts a non-primary integration and returns its id; make it primary with setPrimary. */
export async function insertIntegration(
  trx: Runner,
  environmentId: string,
  input: IntegrationInsert,
  now: Date,
  secret: string | undefined,
): Promise<string> {
  const id = newId(now.getTime());
  const at = now.toISOString();
  await trx('integrations').insert({
    id,
    environment_id: environmentId,
    provider_id: input.providerId,
    channel: input.channel,
    name: input.name,
    identifier: input.identifier,
    credentials: writeCredentials(input.credentials, secret),
    send_limits: input.sendLimits ? JSON.stringify(input.sendLimits) : null,
    active: input.active,
    primary_channel: null,
    created_at: at,
    updated_at: at,
  });
  return id;
}

export interface IntegrationChanges {
  name?: string;
  identifier?: string;
  credentials?: IntegrationCredentials;
  active?: boolean;
  /** null: back to the provider's limits. */
  sendLimits?: SendLimits | null;
}

export async function updateIntegrationRow(
  trx: Runner,
  environmentId: string,
  integrationId: string,
  changes: IntegrationChanges,
  now: Date,
  secret: string | undefined,
): Promise<void> {
  const columns: Record<string, unknown> = { updated_at: now.toISOString() };
  if (changes.name !== undefined) columns.name = changes.name;
  if (changes.identifier !== undefined) columns.identifier = changes.identifier;
  if (changes.credentials !== undefined) columns.credentials = writeCredentials(changes.credentials, secret);
  if (changes.active !== undefined) columns.active = changes.active;
  if (changes.sendLimits !== undefined) columns.send_limits = changes.sendLimits === null ? null : JSON.stringify(changes.sendLimits);
  await trx('integrations').where({ environment_id: environmentId, id: integrationId }).update(columns);
}

/** Makes the integration its channel's primary, taking the flag from the previous one first. */
export async function setPrimary(trx: Runner, environmentId: string, integrationId: string, channel: ChannelType, now: Date): Promise<void> {
  const at = now.toISOString();
  await trx('integrations')
    .where({ environment_id: environmentId, primary_channel: channel })
    .whereNot('id', integrationId)
    .update({ primary_channel: null, updated_at: at });
  await trx('integrations')
    .where({ environment_id: environmentId, id: integrationId })
    .whereNull('primary_channel')
    .update({ primary_channel: channel, updated_at: at });
}

/** Takes the primary flag from the integration; true when it had it. */
export async function clearPrimary(trx: Runner, environmentId: string, integrationId: string, now: Date): Promise<boolean> {
  const cleared = await trx('integrations')
    .where({ environment_id: environmentId, id: integrationId })
    .whereNotNull('primary_channel')
    .update({ primary_channel: null, updated_at: now.toISOString() });
  return cleared > 0;
}

/** Makes the oldest active integration of the channel (other than `exceptId`) its primary, if there is one. */
export async function promoteOldestActive(
  trx: Runner,
  environmentId: string,
  channel: ChannelType,
  exceptId: string,
  now: Date,
): Promise<void> {
  const next = await trx('integrations')
    .where({ environment_id: environmentId, channel, active: true })
    .whereNot('id', exceptId)
    .orderBy([{ column: 'created_at' }, { column: 'id' }])
    .first('id');
  if (next) await setPrimary(trx, environmentId, next.id, channel, now);
}

/** Deletes the integration; its subscribers' credentials go with it (foreign key). */
export async function deleteIntegrationRow(trx: Runner, environmentId: string, integrationId: string): Promise<boolean> {
  return (await trx('integrations').where({ environment_id: environmentId, id: integrationId }).delete()) > 0;
}
