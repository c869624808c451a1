import { createCipheriv, createDecipheriv, hkdfSync, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { BoundedMap } from './bounded-map.js';

/**
 * Sealing of values at rest (integration credentials, subscribers' webhook URLs, webhook and inbox
 * signing secrets) with a key derived from HERALD_SECRET, or the key file of a SQLite database.
 *
 * A sealed value is `enc:v1:<base64 of iv | tag | ciphertext>`: AES-256-GCM with a random 12-byte
 * IV and a 16-byte tag, so an altered value or another secret fails to open instead of decrypting
 * to garbage. Values without the prefix were written while no secret was set; they read back as
 * they are and get sealed on their next write.
 */
export const SEALED_PREFIX = 'enc:v1:';

const IV_BYTES = 12;
const TAG_BYTES = 16;
// Fixed, public parameters: they separate this key from any other use of the same secret.
const HKDF_SALT = 'herald/credentials-at-rest';
const HKDF_INFO = 'aes-256-gcm/v1';

/** Opening failed: no secret, the wrong secret, or a damaged value. Never shown to API clients. */
export class SealError extends Error {
  override readonly name = 'SealError';
}

const keys = new Map<string, Buffer>();
function keyOf(secret: string): Buffer {
  let key = keys.get(secret);
  if (!key) {
    key = Buffer.from(hkdfSync('sha256', secret, HKDF_SALT, HKDF_INFO, 32));
    keys.set(secret, key);
  }
  return key;
}

export function isSealed(stored: string): boolean {
  return stored.startsWith(SEALED_PREFIX);
}

/** Encrypts `plain` with a key derived from `secret`. */
export function seal(plain: string, secret: string): string {
  if (!secret) throw new SealError('Cannot seal a value without a secret');
  const iv = randomBytes(IV_BYTES);
  const cipher = createCipheriv('aes-256-gcm', keyOf(secret), iv);
  const ciphertext = Buffer.concat([cipher.update(plain, 'utf8'), cipher.final()]);
  return SEALED_PREFIX + Buffer.concat([iv, cipher.getAuthTag(), ciphertext]).toString('base64');
}

/**
 * Values opened lately, by their sealed text (unique: each seal has its own random IV), with the
 * secret that opened them. Credentials and endpoint secrets are opened for every send, and
 * decrypting each time cost more than reading them. A hit needs the same secret, so another one
 * still fails; a changed value is a new text. Oldest first out.
 */
const opened = new BoundedMap<string, { secret: string; plain: string }>(1_000);

/**
 * The plain text of a stored value: sealed values are decrypted with `secret`, anything else is
 * returned as it is. Throws a SealError (whose message never contains the value) when a sealed
 * value cannot be opened.
 */
export function open(stored: string, secret: string | undefined): string {
  if (!isSealed(stored)) return stored;
  if (!secret) throw new SealError('A stored value is encrypted, but HERALD_SECRET is not set');
  const known = opened.get(stored);
  if (known?.secret === secret) return known.plain;
  const plain = decrypt(stored, secret);
  opened.set(stored, { secret, plain });
  return plain;
}

function decrypt(stored: string, secret: string): string {
  const envelope = Buffer.from(stored.slice(SEALED_PREFIX.length), 'base64');
  if (envelope.length < IV_BYTES + TAG_BYTES) throw new SealError('A stored encrypted value is damaged');
  const decipher = createDecipheriv('aes-256-gcm', keyOf(secret), envelope.subarray(0, IV_BYTES));
  decipher.setAuthTag(envelope.subarray(IV_BYTES, IV_BYTES + TAG_BYTES));
  try {
    return Buffer.concat([decipher.update(envelope.subarray(IV_BYTES + TAG_BYTES)), decipher.final()]).toString('utf8');
  } catch {
    throw new SealError('A stored encrypted value could not be decrypted: HERALD_SECRET differs from the one it was written with, or the value was altered');
  }
}

/** Seals `plain` when a secret is set, else keeps it as it is (the README's "optional" secret). */
export function sealIfSecret(plain: string, secret: string | undefined): string {
  return secret ? seal(plain, secret) : plain;
}

/**
 * How a URL that is a credential (a chat webhook) is shown: its scheme and host, then the last 4
 * characters when the rest is long enough that they reveal little (`https://hooks.slack.com/…a1B2`).
 * Enough to tell two webhooks apart; not enough to post to either.
 */
export function maskUrl(value: string): string {
  try {
    const url = new URL(value);
    const rest = value.slice(value.indexOf(url.host) + url.host.length);
    return `${url.protocol}//${url.host}/…${rest.length >= 12 ? value.slice(-4) : ''}`;
  } catch {
    return '…';
  }
}

/**
 * The secret kept in `file`, made (32 random bytes, readable by this user alone) when there is none
 * yet. `created` says it was made now: the caller says so once, since losing the file makes every
 * sealed value unreadable.
 */
export function readOrCreateKeyFile(file: string): { secret: string; created: boolean } {
  const read = () => fs.readFileSync(file, 'utf8').trim();
  if (fs.existsSync(file)) return { secret: read(), created: false };
  fs.mkdirSync(path.dirname(file), { recursive: true });
  const secret = randomBytes(32).toString('base64url');
  try {
    fs.writeFileSync(file, `${secret}\n`, { mode: 0o600, flag: 'wx' });
  } catch (err) {
    // Another process (a worker started beside the API) made it first: use theirs.
    if ((err as { code?: string }).code === 'EEXIST') return { secret: read(), created: false };
    throw err;
  }
  return { secret, created: true };
}
