// Webhook endpoints: where an environment's events go. Secrets are sealed at rest (crypto.ts) when
// the server has HERALD_SECRET, and never leave this file but through endpointSecrets.
import type { Db, Runner } from '../knex.js';
import { changeRows, inList, selectRows } from '../knex.js';
import { deleteInParts } from '../delete-in-parts.js';
import type { Schemas } from '../../contract.js';
import { open, sealIfSecret } from '../../crypto.js';
import { newId } from '../../ids.js';
import { readBool, readJson, writeJson } from '../json.js';
import { paginate, type Page, type PageRequest } from '../paginate.js';

export type WebhookEndpoint = Schemas['WebhookEndpoint'];
export type WebhookEventType = Schemas['WebhookEventType'];

export interface NewEndpoint {
  url: string;
  description?: string;
  eventTypes?: WebhookEventType[];
  disabled?: boolean;
  rateLimitPerSecond?: number;
  includeContent?: boolean;
}

export interface EndpointChange {
  url?: string;
  description?: string | null;
  eventTypes?: WebhookEventType[] | null;
  disabled?: boolean;
  rateLimitPerSecond?: number | null;
  includeContent?: boolean;
}

/** What the outbox needs of an endpoint to decide whether it takes an event. */
export interface Subscription {
  endpointId: string;
  eventTypes: WebhookEventType[] | null;
  includeContent: boolean;
}

/** What a delivery needs of its endpoint. */
export interface EndpointTarget {
  id: string;
  environmentId: string;
  url: string;
  disabled: boolean;
  rateLimitPerSecond: number | null;
  /** The secrets that sign now: the current one first, then the previous one during its grace. */
  secrets: string[];
}

const COLUMNS = [
  'id',
  'url',
  'description',
  'event_types',
  'disabled',
  'disabled_reason',
  'rate_limit_per_second',
  'include_content',
  'previous_secret_expires_at',
  'failing_since',
  'created_at',
  'updated_at',
];

function toWire(row: Record<string, unknown>): WebhookEndpoint {
  const endpoint: WebhookEndpoint = {
    endpointId: row.id as string,
    url: row.url as string,
    disabled: readBool(row.disabled),
    includeContent: readBool(row.include_content),
    createdAt: row.created_at as string,
    updatedAt: row.updated_at as string,
  };
  if (row.description !== null) endpoint.description = row.description as string;
  if (row.event_types !== null) endpoint.eventTypes = readJson(row.event_types, []);
  if (row.disabled_reason !== null) endpoint.disabledReason = row.disabled_reason as string;
  if (row.rate_limit_per_second !== null) endpoint.rateLimitPerSecond = Number(row.rate_limit_per_second);
  if (row.failing_since !== null) endpoint.failingSince = row.failing_since as string;
  if (row.previous_secret_expires_at !== null) endpoint.previousSecretExpiresAt = row.previous_secret_expires_at as string;
  return endpoint;
}

export async function insertEndpoint(trx: Runner, environmentId: string, endpoint: NewEndpoint, secret: string, sealWith: string | undefined, now: Date): Promise<WebhookEndpoint> {
  const at = now.toISOString();
  const row = {
    id: newId(now.getTime()),
    environment_id: environmentId,
    url: endpoint.url,
    description: endpoint.description ?? null,
    event_types: writeJson(endpoint.eventTypes ?? null),
    disabled: endpoint.disabled ?? false,
    disabled_reason: null,
    rate_limit_per_second: endpoint.rateLimitPerSecond ?? null,
    include_content: endpoint.includeContent ?? false,
    secret: sealIfSecret(secret, sealWith),
    previous_secret: null,
    previous_secret_expires_at: null,
    failing_since: null,
    created_at: at,
    updated_at: at,
  };
  await trx('webhook_endpoints').insert(row);
  return toWire(row);
}

export async function listEndpoints(db: Db, environmentId: string, page: PageRequest): Promise<Page<WebhookEndpoint>> {
  return paginate<Record<string, unknown>, WebhookEndpoint>(
    db('webhook_endpoints').where({ environment_id: environmentId }).select(COLUMNS),
    page,
    [
      { column: 'created_at', order: 'asc' },
      { column: 'id', order: 'asc' },
    ],
    (rows) => rows.map(toWire),
  );
}

export async function findEndpoint(db: Runner, environmentId: string, endpointId: string): Promise<WebhookEndpoint | undefined> {
  const row = await db('webhook_endpoints').where({ environment_id: environmentId, id: endpointId }).first(COLUMNS);
  return row ? toWire(row) : undefined;
}

/** Applies a change; false when the endpoint is not the environment's. Enabling forgets why it was disabled and how long it failed. */
export async function updateEndpoint(trx: Runner, environmentId: string, endpointId: string, change: EndpointChange, now: Date): Promise<boolean> {
  const columns: Record<string, unknown> = { updated_at: now.toISOString() };
  if (change.url !== undefined) columns.url = change.url;
  if (change.description !== undefined) columns.description = change.description;
  if (change.eventTypes !== undefined) columns.event_types = writeJson(change.eventTypes);
  if (change.rateLimitPerSecond !== undefined) columns.rate_limit_per_second = change.rateLimitPerSecond;
  if (change.includeContent !== undefined) columns.include_content = change.includeContent;
  if (change.disabled !== undefined) {
    columns.disabled = change.disabled;
    if (!change.disabled) Object.assign(columns, { disabled_reason: null, failing_since: null });
  }
  return (await trx('webhook_endpoints').where({ environment_id: environmentId, id: endpointId }).update(columns)) > 0;
}

/**
 * Deletes the endpoint and its deliveries (their tries with them; deleteInParts: a paced or failing
 * endpoint's backlog has no bound).
 */
export async function deleteEndpoint(trx: Runner, environmentId: string, endpointId: string): Promise<boolean> {
  if ((await trx('webhook_endpoints').where({ environment_id: environmentId, id: endpointId }).delete()) === 0) return false;
  await deleteInParts(trx, 'webhook_deliveries', 'endpoint_id = ?', [endpointId]);
  return true;
}

/** The plain secret, and the previous one with its expiry while it has one. */
export async function endpointSecrets(db: Runner, environmentId: string, endpointId: string, sealWith: string | undefined): Promise<{ secret: string; previous?: string; previousExpiresAt?: string } | undefined> {
  const row = await db('webhook_endpoints').where({ environment_id: environmentId, id: endpointId }).first('secret', 'previous_secret', 'previous_secret_expires_at');
  if (!row) return undefined;
  const secrets: { secret: string; previous?: string; previousExpiresAt?: string } = { secret: open(String(row.secret), sealWith) };
  if (row.previous_secret !== null && row.previous_secret_expires_at !== null) {
    secrets.previous = open(String(row.previous_secret), sealWith);
    secrets.previousExpiresAt = row.previous_secret_expires_at as string;
  }
  return secrets;
}

/** The new secret signs from now on; the current one too until `previousUntil` (none with a grace of 0). */
export async function rotateSecret(trx: Runner, environmentId: string, endpointId: string, secret: string, previousUntil: Date | undefined, sealWith: string | undefined, now: Date): Promise<boolean> {
  const columns: Record<string, unknown> = {
    secret: sealIfSecret(secret, sealWith),
    previous_secret: previousUntil ? trx.raw('secret') : null,
    previous_secret_expires_at: previousUntil ? previousUntil.toISOString() : null,
    updated_at: now.toISOString(),
  };
  return (await trx('webhook_endpoints').where({ environment_id: environmentId, id: endpointId }).update(columns)) > 0;
}

/** The enabled endpoints of an environment, with the event types each takes: what the outbox asks. */
export async function subscriptionsOf(db: Runner, environmentId: string): Promise<Subscription[]> {
  const rows = await selectRows<{ id: string; event_types: unknown; include_content: unknown }>(
    db,
    'SELECT id, event_types, include_content FROM webhook_endpoints WHERE environment_id = ? AND disabled = false ORDER BY id',
    [environmentId],
  );
  return rows.map((row) => ({ endpointId: row.id, eventTypes: readJson<WebhookEventType[] | null>(row.event_types, null), includeContent: readBool(row.include_content) }));
}

/** The endpoints a delivery goes to, by id, with the secrets that sign now. */
export async function endpointTargets(db: Runner, ids: string[], sealWith: string | undefined, now: Date): Promise<Map<string, EndpointTarget>> {
  const targets = new Map<string, EndpointTarget>();
  if (ids.length === 0) return targets;
  // Read for every delivery: plain SQL, which costs less than the query builder.
  const list = inList(db, 'id', ids);
  const rows = await selectRows<Record<string, unknown>>(
    db,
    `SELECT id, environment_id, url, disabled, rate_limit_per_second, secret, previous_secret, previous_secret_expires_at
       FROM webhook_endpoints WHERE ${list.sql}`,
    list.bindings,
  );
  for (const row of rows) {
    const secrets = [open(String(row.secret), sealWith)];
    if (row.previous_secret !== null && String(row.previous_secret_expires_at) > now.toISOString()) secrets.push(open(String(row.previous_secret), sealWith));
    targets.set(row.id as string, {
      id: row.id as string,
      environmentId: row.environment_id as string,
      url: row.url as string,
      disabled: readBool(row.disabled),
      rateLimitPerSecond: row.rate_limit_per_second === null ? null : Number(row.rate_limit_per_second),
      secrets,
    });
  }
  return targets;
}

/** A delivery failed: the endpoint fails since now, unless it already did. Answers since when. */
export async function markEndpointFailing(trx: Runner, endpointId: string, now: Date): Promise<string> {
  await changeRows(trx, 'UPDATE webhook_endpoints SET failing_since = ? WHERE id = ? AND failing_since IS NULL', [now.toISOString(), endpointId]);
  const [row] = await selectRows<{ failing_since: string | null }>(trx, 'SELECT failing_since FROM webhook_endpoints WHERE id = ?', [endpointId]);
  return row?.failing_since ?? now.toISOString();
}

/** Herald disables an endpoint itself; false when it was already disabled. */
export async function disableEndpoint(trx: Runner, endpointId: string, reason: string, now: Date): Promise<boolean> {
  return (await changeRows(trx, 'UPDATE webhook_endpoints SET disabled = true, disabled_reason = ?, updated_at = ? WHERE id = ? AND disabled = false', [reason, now.toISOString(), endpointId])) > 0;
}
