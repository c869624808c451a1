// Each environment's inbox signing secrets, as their owner manages them (the API mints tokens
// with the newest; the dashboard and `npm run keys -- inbox-secrets` show and rotate them). Kept
// here, under db/, so that every room that manages them can: the engine, the dashboard, the CLI.
// Sealed at rest with the server's secret, as credentials are (crypto.ts).
import { randomBytes } from 'node:crypto';
import type { Db, Runner } from './knex.js';
import { writeTransaction } from './group-commit.js';
import * as repo from './repos/inbox-access.js';
import { open, sealIfSecret } from '../crypto.js';
import { newId } from '../ids.js';

/** An environment's live secrets: the newest signs, every one verifies. */
export const LIVE_SECRETS = 2;

export interface SigningSecret {
  /** The `kid` tokens signed with it carry. */
  kid: string;
  /** The secret, base64url: sign with its bytes. */
  secret: string;
  createdAt: string;
}

/**
 * The environment's live signing secrets in clear, newest first; the first is made on first use,
 * once however many ask at the same moment (each would otherwise add one and retire the others,
 * and the tokens signed with those would not verify).
 */
export async function signingSecrets(db: Db, environmentId: string, sealKey: string | undefined, now: Date): Promise<SigningSecret[]> {
  const live = await liveSigningSecrets(db, environmentId, sealKey);
  if (live.length > 0) return live;
  return writeTransaction(db, async (trx) => {
    await repo.lockSecrets(trx, environmentId);
    const made = await repo.secretsOf(trx, environmentId);
    if (made.length > 0) return made.map((row) => inClear(row, sealKey));
    return [await insertSecret(trx, environmentId, sealKey, now)];
  });
}

/** The environment's live signing secrets in clear, newest first; none if it has none yet (nothing is made). */
export async function liveSigningSecrets(db: Db, environmentId: string, sealKey: string | undefined): Promise<SigningSecret[]> {
  const rows = await repo.secretsOf(db, environmentId);
  return rows.map((row) => inClear(row, sealKey));
}

/** Adds a secret, which signs from now on; beyond LIVE_SECRETS the oldest are retired. */
export async function addSigningSecret(db: Db, environmentId: string, sealKey: string | undefined, now: Date): Promise<SigningSecret> {
  return writeTransaction(db, async (trx) => {
    await repo.lockSecrets(trx, environmentId);
    const added = await insertSecret(trx, environmentId, sealKey, now);
    const rows = await repo.secretsOf(trx, environmentId);
    for (const old of rows.filter((row) => row.id !== added.kid).slice(LIVE_SECRETS - 1)) await repo.deleteSecret(trx, environmentId, old.id);
    return added;
  });
}

async function insertSecret(trx: Runner, environmentId: string, sealKey: string | undefined, now: Date): Promise<SigningSecret> {
  const kid = `ik_${newId(now.getTime())}`;
  const secret = randomBytes(32).toString('base64url');
  await repo.insertSecret(trx, { id: kid, environmentId, secret: sealIfSecret(secret, sealKey) }, now);
  return { kid, secret, createdAt: now.toISOString() };
}

function inClear(row: repo.InboxSecretRow, sealKey: string | undefined): SigningSecret {
  return { kid: row.id, secret: open(row.secret, sealKey), createdAt: row.createdAt };
}

/** Retires one secret: tokens signed with it stop working (within a few seconds in every process). */
export async function retireSigningSecret(db: Db, environmentId: string, kid: string): Promise<boolean> {
  return writeTransaction(db, (trx) => repo.deleteSecret(trx, environmentId, kid));
}
