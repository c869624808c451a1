// Idempotency keys: the table `idempotency_keys`, one row per (environment, key), holding the
// request's fingerprint, a claim (`token`, `locked_until`) while it runs and its answer once done.
// The rules (claiming, replaying, 409 and 422) are http/idempotency.ts's; this is their storage,
// every step one atomic statement so concurrent requests never both hold a key.
import type { Db, Runner } from '../knex.js';

const TABLE = 'idempotency_keys';

export interface KeyId {
  environmentId: string;
  key: string;
}

export interface IdempotencyKeyRow {
  environment_id: string;
  key: string;
  fingerprint: string;
  token: string;
  state: 'running' | 'done';
  response_status: number | null;
  response_headers: string | null;
  response_body: string | null;
  created_at: string;
  locked_until: string | null;
  expires_at: string;
}

/** A fresh claim: the columns of a running key other than its id. */
export type KeyClaim = Omit<IdempotencyKeyRow, 'environment_id' | 'key'>;

/** A recorded answer, its headers and body as JSON text (null when there are none). */
export interface RecordedAnswer {
  status: number;
  headers: string | null;
  body: string | null;
}

const idOf = ({ environmentId, key }: KeyId) => ({ environment_id: environmentId, key });

/** Inserts the claim unless the key exists; true when this insert made it. */
export async function insertKeyIfAbsent(db: Db, id: KeyId, claim: KeyClaim): Promise<boolean> {
  const inserted = await db(TABLE)
    .insert({ ...idOf(id), ...claim })
    .onConflict(['environment_id', 'key'])
    .ignore()
    .returning('token');
  return inserted.length === 1;
}

export async function findKey(db: Db, id: KeyId): Promise<IdempotencyKeyRow | undefined> {
  return (await db(TABLE).where(idOf(id)).first()) as IdempotencyKeyRow | undefined;
}

/** Replaces the row with a fresh claim if it still holds `token` in `state` (compare-and-set); true when it did. */
export async function takeOverKey(db: Db, id: KeyId, held: { token: string; state: string }, claim: KeyClaim): Promise<boolean> {
  return (await db(TABLE).where({ ...idOf(id), ...held }).update(claim)) === 1;
}

/** Records the answer of the claim `token` if it still runs; false when the claim was taken over meanwhile. */
export async function recordAnswer(db: Runner, id: KeyId, token: string, answer: RecordedAnswer): Promise<boolean> {
  const recorded = await db(TABLE)
    .where({ ...idOf(id), token, state: 'running' })
    .update({ state: 'done', response_status: answer.status, response_headers: answer.headers, response_body: answer.body, locked_until: null });
  return recorded === 1;
}

/** Deletes the claim `token` if it still runs, freeing the key. */
export async function releaseKey(db: Db, id: KeyId, token: string): Promise<void> {
  await db(TABLE)
    .where({ ...idOf(id), token, state: 'running' })
    .delete();
}

/** Deletes the environment's keys that expired by `nowIso`. */
export async function deleteExpiredKeys(db: Db, environmentId: string, nowIso: string): Promise<void> {
  await db(TABLE).where('environment_id', environmentId).where('expires_at', '<=', nowIso).delete();
}
