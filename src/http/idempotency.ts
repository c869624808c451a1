// Idempotency-Key: a write sent twice with one key acts once. The key is claimed first (a row in
// `idempotency_keys`, unique per environment and key: db/repos/idempotency-keys.ts), then the
// operation runs in a write transaction that also records its answer, so the write and the record
// commit or roll back together. That transaction is `writeTransaction`'s, as for a request without
// a key: on SQLite it shares a group commit with the writes that arrive with it. A repeat replays
// the recorded answer; a repeat while the first still runs is a 409; a repeat with another request
// is a 422. A 5xx or a crash records nothing and frees the key, so a retry runs afresh.
import { createHash, randomUUID } from 'node:crypto';
import type { Context } from 'openapi-backend';
import type { Deps } from '../deps.js';
import { writeTransaction } from '../db/group-commit.js';
import {
  deleteExpiredKeys,
  findKey,
  insertKeyIfAbsent,
  recordAnswer,
  releaseKey,
  takeOverKey,
  type KeyClaim,
  type KeyId,
} from '../db/repos/idempotency-keys.js';
import { errorBody } from './errors.js';
import { ApiError } from '../errors.js';

/** The longest key the contract accepts (and the column holds). */
export const MAX_IDEMPOTENCY_KEY = 255;
/** How long a key and its answer are kept. */
export const IDEMPOTENCY_TTL_MS = 24 * 60 * 60 * 1000;
/** How long a running claim holds; after that it is presumed dead (its process crashed) and can be taken over. */
export const IDEMPOTENCY_LEASE_MS = 2 * 60 * 1000;
/** What a 409 tells the caller: the first request is nearly always done within a second. */
const RETRY_AFTER_SECONDS = 1;

export interface HandlerReply {
  status: number;
  body?: unknown;
  headers?: Record<string, string>;
}

export interface IdempotentRequest {
  environmentId: string;
  key: string;
  method: string;
  /** The request path as sent (`/v1/...`): part of the fingerprint, and the `path` of an error body. */
  path: string;
  body: unknown;
}

const declares = new Map<string, boolean>();

/**
 * The request's Idempotency-Key, when it has one and its operation declares the header in the
 * contract (every POST, PUT, PATCH and DELETE does). GET never takes part: Novu's SDK sends a key
 * on every request.
 */
export function idempotencyKeyOf(c: Context): string | undefined {
  const method = c.request.method.toUpperCase();
  if (method === 'GET' || method === 'HEAD') return undefined;
  const operationId = c.operation.operationId ?? `${method} ${c.operation.path}`;
  let declared = declares.get(operationId);
  if (declared === undefined) {
    const parameters = (c.operation.parameters ?? []) as Array<{ in?: string; name?: string }>;
    declared = parameters.some((p) => p.in === 'header' && p.name?.toLowerCase() === 'idempotency-key');
    declares.set(operationId, declared);
  }
  if (!declared) return undefined;
  const value = (c.request.headers as Record<string, string | string[] | undefined>)['idempotency-key'];
  const key = Array.isArray(value) ? value[0] : value;
  return key ? key : undefined;
}

/** JSON with object keys sorted at every level, so key order never changes a fingerprint. */
function canonicalJson(value: unknown): string {
  if (value === undefined) return '';
  if (value === null || typeof value !== 'object') return JSON.stringify(value);
  if (Array.isArray(value)) return `[${value.map((item) => (item === undefined ? 'null' : canonicalJson(item))).join(',')}]`;
  const entries = Object.entries(value as Record<string, unknown>)
    .filter(([, v]) => v !== undefined)
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(',')}}`;
}

export function requestFingerprint(request: Pick<IdempotentRequest, 'method' | 'path' | 'body'>): string {
  return createHash('sha256')
    .update(`${request.method.toUpperCase()} ${request.path}\n${canonicalJson(request.body)}`)
    .digest('hex');
}

const stillRunning = (key: string) =>
  new ApiError(409, `A request with Idempotency-Key "${key}" is still being processed; retry after ${RETRY_AFTER_SECONDS} second`, undefined, {
    'Retry-After': String(RETRY_AFTER_SECONDS),
  });

const reusedKey = (key: string) =>
  new ApiError(422, `Idempotency-Key "${key}" was already used for a different request (method, path or body); use a new key`, [
    { field: 'header/idempotency-key', message: 'was already used for a different request' },
  ]);

const at = (now: Date, ms: number) => new Date(now.getTime() + ms).toISOString();

/**
 * Runs `run` at most once per (environment, key): the first time with `deps.db` set to a
 * transaction that also records the answer, later times by replaying that answer with
 * `Idempotency-Replay: true`. A 4xx the operation throws is recorded and answered like a reply
 * (its writes rolled back); anything else (a 5xx, a 4xx with Retry-After, a crash, a lost race on a
 * unique constraint) frees the key and is rethrown.
 */
export async function idempotent(deps: Deps, request: IdempotentRequest, run: (deps: Deps) => Promise<HandlerReply>): Promise<HandlerReply> {
  const fingerprint = requestFingerprint(request);
  const id: KeyId = { environmentId: request.environmentId, key: request.key };
  const claim = await claimKey(deps, id, fingerprint);
  if ('replay' in claim) return claim.replay;

  try {
    // The write path every write takes (on SQLite, a group commit shared with the writes that
    // arrive with this one), the operation's writes and the answer's record in one transaction.
    return await writeTransaction(deps.db, async (trx) => {
      let reply: HandlerReply;
      try {
        // A savepoint: a rejected operation leaves nothing behind, and the transaction stays usable
        // (on PostgreSQL a failed statement would otherwise abort it) to record the rejection.
        reply = await trx.transaction((inner) => run({ ...deps, db: inner }));
      } catch (err) {
        // An answer that says to try again later (Retry-After: a 409 while a topic's fan-out runs)
        // is not the request's answer for good: the key is freed, so that the retry runs it again.
        if (!(err instanceof ApiError) || err.status >= 500 || err.headers?.['Retry-After'] !== undefined) throw err;
        reply = { status: err.status, body: errorBody(err.status, err.message, request.path, err.details), headers: err.headers };
      }
      const answer = {
        status: reply.status,
        headers: reply.headers ? JSON.stringify(reply.headers) : null,
        body: reply.body === undefined ? null : JSON.stringify(reply.body),
      };
      // Our claim ran out and another request took the key over: it does the work, not us.
      if (!(await recordAnswer(trx, id, claim.token, answer))) throw stillRunning(request.key);
      return reply;
    });
  } catch (err) {
    // Nothing was committed: free the key (if it is still ours) so a retry runs the request again.
    await releaseKey(deps.db, id, claim.token).catch((releaseErr: unknown) => deps.logger.warn({ err: releaseErr }, 'could not release an idempotency key'));
    throw err;
  }
}

type Claim = { token: string } | { replay: HandlerReply };

async function claimKey(deps: Deps, id: KeyId, fingerprint: string): Promise<Claim> {
  const { db } = deps;
  const now = deps.clock.now();
  const nowIso = now.toISOString();
  await sweepExpired(deps, id.environmentId, nowIso);

  const fresh = (): KeyClaim => ({
    fingerprint,
    token: randomUUID(),
    state: 'running',
    response_status: null,
    response_headers: null,
    response_body: null,
    created_at: nowIso,
    locked_until: at(now, IDEMPOTENCY_LEASE_MS),
    expires_at: at(now, IDEMPOTENCY_TTL_MS),
  });

  // Each step is one atomic statement (insert-if-absent, compare-and-set), so concurrent requests
  // with one key, in one process or many, never both hold it. A few rounds cover a row that
  // disappears or changes between two statements.
  for (let round = 0; round < 5; round++) {
    const claim = fresh();
    if (await insertKeyIfAbsent(db, id, claim)) return { token: claim.token };

    const existing = await findKey(db, id);
    if (!existing) continue; // freed meanwhile: claim it afresh
    const expired = existing.expires_at <= nowIso;
    const abandoned = existing.state === 'running' && (existing.locked_until ?? '') <= nowIso;
    if (expired || abandoned) {
      if (await takeOverKey(db, id, { token: existing.token, state: existing.state }, claim)) return { token: claim.token };
      continue; // someone else got there first: look again
    }
    if (existing.fingerprint !== fingerprint) throw reusedKey(id.key);
    if (existing.state === 'running') throw stillRunning(id.key);
    return {
      replay: {
        status: existing.response_status!,
        body: existing.response_body === null ? undefined : JSON.parse(existing.response_body),
        headers: { ...(existing.response_headers ? (JSON.parse(existing.response_headers) as Record<string, string>) : {}), 'Idempotency-Replay': 'true' },
      },
    };
  }
  throw stillRunning(id.key);
}

/** Expired keys go lazily, when a key of the same environment is claimed; best effort, no timers. */
async function sweepExpired(deps: Deps, environmentId: string, nowIso: string): Promise<void> {
  try {
    await deleteExpiredKeys(deps.db, environmentId, nowIso);
  } catch (err) {
    deps.logger.warn({ err }, 'could not delete expired idempotency keys');
  }
}
