// Who may reach an environment's inbox: its signing secrets (inbox-secrets.ts keeps their rules),
// the browser origins it allows, whether subscriber-hash sessions are on, and the streams'
// single-use tickets. The inbox's own rows are in inbox.ts.
import type { Db, Runner } from '../knex.js';
import { isPostgres, selectRows, changeRows } from '../knex.js';
import { readBool } from '../json.js';
import { insertRows } from '../insert-rows.js';
import type { Plan } from '../../config.js';
import type { InboxCredential } from '../../contract.js';

export interface InboxSecretRow {
  id: string;
  environmentId: string;
  organizationId: string;
  secret: string;
  createdAt: string;
}

/** The environment's signing secrets, newest first (sealed as stored). */
export async function secretsOf(db: Runner, environmentId: string): Promise<InboxSecretRow[]> {
  const rows = await selectRows<Record<string, string>>(
    db,
    `SELECT s.id, s.environment_id, e.organization_id, s.secret, s.created_at FROM inbox_secrets s JOIN environments e ON e.id = s.environment_id
     WHERE s.environment_id = ? ORDER BY s.created_at DESC, s.id DESC`,
    [environmentId],
  );
  return rows.map(secretRow);
}

/** The organization's plan, for the rate limit of its subscribers' tokens. */
export interface OrganizationPlan {
  plan: Plan;
  ratePerMinute: number | null;
  burst: number | null;
}

/** A secret by its id (a token's `kid`), with its environment's organization and plan. */
export async function secretById(db: Runner, id: string): Promise<(InboxSecretRow & OrganizationPlan) | undefined> {
  const [row] = await selectRows<Record<string, string>>(
    db,
    `SELECT s.id, s.environment_id, e.organization_id, s.secret, s.created_at, o.plan, o.rate_per_minute, o.burst
     FROM inbox_secrets s JOIN environments e ON e.id = s.environment_id JOIN organizations o ON o.id = e.organization_id WHERE s.id = ?`,
    [id],
  );
  return row && { ...secretRow(row), ...planOf(row) };
}

function planOf(row: Record<string, unknown>): OrganizationPlan {
  return {
    plan: row.plan as Plan,
    ratePerMinute: row.rate_per_minute === null ? null : Number(row.rate_per_minute),
    burst: row.burst === null ? null : Number(row.burst),
  };
}

export async function planOfOrganization(db: Runner, organizationId: string): Promise<OrganizationPlan | undefined> {
  const [row] = await selectRows<Record<string, unknown>>(db, 'SELECT plan, rate_per_minute, burst FROM organizations WHERE id = ?', [organizationId]);
  return row && planOf(row);
}

function secretRow(row: Record<string, string>): InboxSecretRow {
  return { id: row.id, environmentId: row.environment_id, organizationId: row.organization_id, secret: row.secret, createdAt: row.created_at };
}

/**
 * Holds the environment's secrets until the transaction ends, so that two changes of them take
 * turns: on PostgreSQL by locking the environment's row (`NO KEY`, so that rows written meanwhile
 * that refer to the environment do not wait); SQLite writes one transaction at a time.
 */
export async function lockSecrets(trx: Runner, environmentId: string): Promise<void> {
  if (isPostgres(trx as Db)) await selectRows(trx, 'SELECT id FROM environments WHERE id = ? FOR NO KEY UPDATE', [environmentId]);
}

export async function insertSecret(trx: Runner, row: { id: string; environmentId: string; secret: string }, now: Date): Promise<void> {
  await changeRows(trx, 'INSERT INTO inbox_secrets (id, environment_id, secret, created_at) VALUES (?, ?, ?, ?)', [row.id, row.environmentId, row.secret, now.toISOString()]);
}

export async function deleteSecret(trx: Runner, environmentId: string, id: string): Promise<boolean> {
  return (await changeRows(trx, 'DELETE FROM inbox_secrets WHERE environment_id = ? AND id = ?', [environmentId, id])) > 0;
}

export async function originsOf(db: Runner, environmentId: string): Promise<string[]> {
  const rows = await selectRows<{ origin: string }>(db, 'SELECT origin FROM inbox_origins WHERE environment_id = ? ORDER BY origin', [environmentId]);
  return rows.map((row) => row.origin);
}

export async function replaceOrigins(trx: Runner, environmentId: string, origins: string[]): Promise<void> {
  await changeRows(trx, 'DELETE FROM inbox_origins WHERE environment_id = ?', [environmentId]);
  await insertRows(trx, 'inbox_origins', origins.map((origin) => ({ environment_id: environmentId, origin })));
}

/** The environment's inbox session settings: its public application identifier, and whether it takes sessions from a subscriber hash. */
export interface SessionSettings {
  applicationIdentifier: string;
  hashSessions: boolean;
}

export async function sessionSettingsOf(db: Runner, environmentId: string): Promise<SessionSettings> {
  const [row] = await selectRows<Record<string, unknown>>(db, 'SELECT inbox_application_id, inbox_hash_sessions FROM environments WHERE id = ?', [environmentId]);
  return { applicationIdentifier: row.inbox_application_id as string, hashSessions: readBool(row.inbox_hash_sessions) };
}

export async function setHashSessions(trx: Runner, environmentId: string, on: boolean): Promise<void> {
  await changeRows(trx, 'UPDATE environments SET inbox_hash_sessions = ? WHERE id = ?', [on, environmentId] as never[]);
}

/** The environment an application identifier names, with its organization and whether it takes sessions. */
export async function environmentOfApplication(
  db: Runner,
  applicationIdentifier: string,
): Promise<{ environmentId: string; organizationId: string; hashSessions: boolean } | undefined> {
  const [row] = await selectRows<Record<string, unknown>>(db, 'SELECT id, organization_id, inbox_hash_sessions FROM environments WHERE inbox_application_id = ?', [
    applicationIdentifier,
  ]);
  return row && { environmentId: row.id as string, organizationId: row.organization_id as string, hashSessions: readBool(row.inbox_hash_sessions) };
}

export async function insertTicket(
  trx: Runner,
  row: { ticketHash: string; environmentId: string; organizationId: string; subscriberId: string; expiresAt: Date; credential: InboxCredential },
): Promise<void> {
  await changeRows(trx, 'INSERT INTO inbox_tickets (ticket_hash, environment_id, organization_id, subscriber_id, expires_at, kid, credential_expires_at) VALUES (?, ?, ?, ?, ?, ?, ?)', [
    row.ticketHash,
    row.environmentId,
    row.organizationId,
    row.subscriberId,
    row.expiresAt.toISOString(),
    row.credential.kid,
    new Date(row.credential.expiresAt).toISOString(),
  ]);
}

export interface TakenTicket {
  environmentId: string;
  organizationId: string;
  subscriberId: string;
  expiresAt: string;
  /** The credential the ticket was made with; undefined for a ticket made before tickets kept it. */
  credential?: InboxCredential;
}

/** Takes a ticket: it is deleted as it is read, so only one request (in any process) gets it. */
export async function takeTicket(db: Runner, ticketHash: string): Promise<TakenTicket | undefined> {
  const [row] = await selectRows<Record<string, string | null>>(
    db,
    'DELETE FROM inbox_tickets WHERE ticket_hash = ? RETURNING environment_id, organization_id, subscriber_id, expires_at, kid, credential_expires_at',
    [ticketHash],
  );
  if (!row) return undefined;
  const credential = row.kid !== null && row.credential_expires_at !== null ? { kid: row.kid, expiresAt: Date.parse(row.credential_expires_at) } : undefined;
  return { environmentId: row.environment_id!, organizationId: row.organization_id!, subscriberId: row.subscriber_id!, expiresAt: row.expires_at!, credential };
}

export async function pruneTickets(db: Db, now: Date): Promise<number> {
  return changeRows(db, 'DELETE FROM inbox_tickets WHERE expires_at < ?', [now.toISOString()]);
}
