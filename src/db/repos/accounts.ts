import { isPostgres, type Db } from '../knex.js';
import type { Plan } from '../../config.js';
import { newApplicationIdentifier, newId } from '../../ids.js';
import { generateApiKey, hashApiKey, keyPrefix } from '../../api-keys.js';
import { forgetKeyOwners } from '../key-owner-cache.js';

export interface Organization {
  id: string;
  name: string;
  plan: Plan;
  ratePerMinute: number | null;
  burst: number | null;
}

export interface ApiKeyRecord {
  id: string;
  name: string;
  prefix: string;
  environmentId: string;
  environmentName: string;
  organizationId: string;
  organizationName: string;
  plan: Plan;
  createdAt: string;
  revokedAt: string | null;
}

/** What a valid key opens: one environment of one organization. */
export interface KeyOwner {
  keyId: string;
  keyHash: string;
  revoked: boolean;
  environmentId: string;
  organizationId: string;
  plan: Plan;
  ratePerMinute: number | null;
  burst: number | null;
}

/** Herald's own advisory lock number on PostgreSQL: the setting up of an empty database. */
const BOOTSTRAP_LOCK = 4_372_510_611;

/**
 * Runs a start-up's look at an empty database and its setting up as one transaction that no other
 * process's runs beside: processes starting together make one first organization, not one each.
 * (SQLite writes one transaction at a time already.)
 */
export function underBootstrapLock<T>(db: Db, work: (trx: Db) => Promise<T>): Promise<T> {
  return db.transaction(async (trx) => {
    if (isPostgres(db)) await trx.raw('SELECT pg_advisory_xact_lock(?)', [BOOTSTRAP_LOCK]);
    return work(trx as unknown as Db);
  });
}

export async function createOrganization(
  db: Db,
  input: { name: string; plan: Plan; environments: string[]; now?: Date },
): Promise<{ organization: Organization; environmentIds: Record<string, string> }> {
  const now = (input.now ?? new Date()).toISOString();
  const organization: Organization = { id: newId(), name: input.name, plan: input.plan, ratePerMinute: null, burst: null };
  const environmentIds: Record<string, string> = {};
  await db.transaction(async (trx) => {
    await trx('organizations').insert({ id: organization.id, name: organization.name, plan: organization.plan, created_at: now });
    for (const name of input.environments) {
      environmentIds[name] = newId();
      await trx('environments').insert({ id: environmentIds[name], organization_id: organization.id, name, created_at: now, inbox_application_id: newApplicationIdentifier() });
    }
  });
  return { organization, environmentIds };
}

/** The environment new keys go to by default: the oldest organization's development environment. */
export async function defaultEnvironmentId(db: Db): Promise<string | undefined> {
  const row = await db('environments as e')
    .join('organizations as o', 'o.id', 'e.organization_id')
    .orderBy([{ column: 'o.created_at' }, { column: 'o.id' }, { column: 'e.created_at' }, { column: 'e.id' }])
    .first('e.id');
  return row?.id;
}

/** Stores a key (a given one, or a new random one) and returns it in clear: the only time it is. */
export async function createApiKey(
  db: Db,
  input: { environmentId: string; name: string; key?: string; now?: Date },
): Promise<{ id: string; key: string }> {
  const key = input.key ?? generateApiKey();
  const id = newId();
  await db('api_keys').insert({
    id,
    environment_id: input.environmentId,
    name: input.name,
    key_hash: hashApiKey(key),
    key_prefix: keyPrefix(key),
    created_at: (input.now ?? new Date()).toISOString(),
  });
  // A key given by the caller may have been tried, and remembered as unknown, before it existed.
  forgetKeyOwners(db);
  return { id, key };
}

export async function findKeyOwner(db: Db, keyHash: string): Promise<KeyOwner | undefined> {
  const row = await db('api_keys as k')
    .join('environments as e', 'e.id', 'k.environment_id')
    .join('organizations as o', 'o.id', 'e.organization_id')
    .where('k.key_hash', keyHash)
    .first(
      'k.id as keyId',
      'k.key_hash as keyHash',
      'k.revoked_at as revokedAt',
      'e.id as environmentId',
      'o.id as organizationId',
      'o.plan as plan',
      'o.rate_per_minute as ratePerMinute',
      'o.burst as burst',
    );
  if (!row) return undefined;
  return {
    keyId: row.keyId,
    keyHash: row.keyHash,
    revoked: row.revokedAt !== null,
    environmentId: row.environmentId,
    organizationId: row.organizationId,
    plan: row.plan,
    ratePerMinute: row.ratePerMinute,
    burst: row.burst,
  };
}

/** Every key, or only one organization's (the dashboard shows an owner nothing else). */
export async function listApiKeys(db: Db, scope: { organizationId?: string } = {}): Promise<ApiKeyRecord[]> {
  const rows = await db('api_keys as k')
    .join('environments as e', 'e.id', 'k.environment_id')
    .join('organizations as o', 'o.id', 'e.organization_id')
    .modify((query) => {
      if (scope.organizationId) query.where('o.id', scope.organizationId);
    })
    .orderBy([{ column: 'k.created_at' }, { column: 'k.id' }])
    .select(
      'k.id',
      'k.name',
      'k.key_prefix as prefix',
      'k.created_at as createdAt',
      'k.revoked_at as revokedAt',
      'e.id as environmentId',
      'e.name as environmentName',
      'o.id as organizationId',
      'o.name as organizationName',
      'o.plan as plan',
    );
  return rows as ApiKeyRecord[];
}

/**
 * Revokes a key; false when there is no such key (in the organization, when one is given) or it
 * was already revoked.
 */
export async function revokeApiKey(db: Db, id: string, scope: { organizationId?: string } = {}, now = new Date()): Promise<boolean> {
  const changed = await db('api_keys')
    .where({ id })
    .whereNull('revoked_at')
    .modify((query) => {
      if (scope.organizationId) {
        query.whereIn('environment_id', db('environments').select('id').where('organization_id', scope.organizationId));
      }
    })
    .update({ revoked_at: now.toISOString() });
  forgetKeyOwners(db);
  return changed > 0;
}

/** An organization's environments, oldest first. */
export async function listEnvironments(db: Db, organizationId: string): Promise<Array<{ id: string; name: string; createdAt: string }>> {
  return db('environments')
    .where('organization_id', organizationId)
    .orderBy([{ column: 'created_at' }, { column: 'id' }])
    .select('id', 'name', 'created_at as createdAt');
}

/** The organization of each of these environments (an environment never changes organization). */
export async function organizationsOf(db: Db, environmentIds: string[]): Promise<Map<string, string>> {
  const rows: Array<{ id: string; organization_id: string }> = environmentIds.length === 0 ? [] : await db('environments').whereIn('id', environmentIds).select('id', 'organization_id');
  return new Map(rows.map((row) => [row.id, row.organization_id]));
}

/** Every environment of these organizations. */
export async function environmentsOf(db: Db, organizationIds: string[]): Promise<string[]> {
  if (organizationIds.length === 0) return [];
  const rows: Array<{ id: string }> = await db('environments').whereIn('organization_id', organizationIds).select('id');
  return rows.map((row) => row.id);
}

export async function findOrganization(db: Db, id: string): Promise<Organization | undefined> {
  const row = await db('organizations')
    .where({ id })
    .first('id', 'name', 'plan', 'rate_per_minute as ratePerMinute', 'burst');
  return row ?? undefined;
}

/** The organization first start created: the one a single-tenant server's owner belongs to. */
export async function defaultOrganizationId(db: Db): Promise<string | undefined> {
  const row = await db('organizations').orderBy([{ column: 'created_at' }, { column: 'id' }]).first('id');
  return row?.id;
}

export async function countOrganizations(db: Db): Promise<number> {
  const [row] = await db('organizations').count({ n: '*' });
  return Number(row.n);
}
