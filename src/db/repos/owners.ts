import type { Db } from '../knex.js';
import { newId } from '../../ids.js';

/** Someone who signs in to the dashboard and manages one organization's keys. */
export interface Owner {
  id: string;
  organizationId: string;
  email: string;
  passwordHash: string;
}

/** A signed-in owner, as the dashboard sees them on each request. */
export interface DashboardSession {
  id: string;
  ownerId: string;
  email: string;
  organizationId: string;
  organizationName: string;
  csrfToken: string;
  expiresAt: string;
}

export const normalizeEmail = (email: string) => email.trim().toLowerCase();

/** Creates the owner, or sets a new password (and organization) for the one with this email. */
export async function saveOwner(
  db: Db,
  input: { organizationId: string; email: string; passwordHash: string; now: Date },
): Promise<{ id: string; created: boolean }> {
  const email = normalizeEmail(input.email);
  const now = input.now.toISOString();
  const existing = await db('owners').where({ email }).first('id');
  if (existing) {
    await db('owners')
      .where({ id: existing.id })
      .update({ organization_id: input.organizationId, password_hash: input.passwordHash, updated_at: now });
    // A new password ends the sessions the old one opened.
    await db('dashboard_sessions').where({ owner_id: existing.id }).delete();
    return { id: existing.id, created: false };
  }
  const id = newId();
  await db('owners').insert({
    id,
    organization_id: input.organizationId,
    email,
    password_hash: input.passwordHash,
    created_at: now,
    updated_at: now,
  });
  return { id, created: true };
}

export async function findOwnerByEmail(db: Db, email: string): Promise<Owner | undefined> {
  const row = await db('owners')
    .where({ email: normalizeEmail(email) })
    .first('id', 'organization_id as organizationId', 'email', 'password_hash as passwordHash');
  return row ?? undefined;
}

export async function createSession(
  db: Db,
  input: { id: string; ownerId: string; csrfToken: string; now: Date; expiresAt: Date },
): Promise<void> {
  // Sign-in is a good moment to forget sessions nobody can use any more.
  await db('dashboard_sessions').where('expires_at', '<=', input.now.toISOString()).delete();
  await db('dashboard_sessions').insert({
    id: input.id,
    owner_id: input.ownerId,
    csrf_token: input.csrfToken,
    created_at: input.now.toISOString(),
    expires_at: input.expiresAt.toISOString(),
  });
}

/** The session with this id, unless it has expired. */
export async function findSession(db: Db, id: string, now: Date): Promise<DashboardSession | undefined> {
  const row = await db('dashboard_sessions as s')
    .join('owners as w', 'w.id', 's.owner_id')
    .join('organizations as o', 'o.id', 'w.organization_id')
    .where('s.id', id)
    .where('s.expires_at', '>', now.toISOString())
    .first(
      's.id',
      'w.id as ownerId',
      'w.email',
      'o.id as organizationId',
      'o.name as organizationName',
      's.csrf_token as csrfToken',
      's.expires_at as expiresAt',
    );
  return row ?? undefined;
}

export async function deleteSession(db: Db, id: string): Promise<void> {
  await db('dashboard_sessions').where({ id }).delete();
}
