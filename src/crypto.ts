import { createCipheriv, createDecipheriv, hkdfSync, randomBytes } from 'node:crypto';

/**
 * Sealing of values at rest (integration credentials) with a key derived from HERALD_SECRET.
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
 * The plain text of a stored value: sealed values are decrypted with `secret`, anything else is
 * returned as it is. Throws a SealError (whose message never contains the value) when a sealed
 * value cannot be opened.
 */
export function open(stored: string, secret: string | undefined): string {
  if (!isSealed(stored)) return stored;
  if (!secret) throw new SealError('A stored value is encrypted, but HERALD_SECRET is not set');
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
