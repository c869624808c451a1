import { hash, randomBytes, timingSafeEqual } from 'node:crypto';

/**
 * A new API key: "hk_" and 48 lowercase hex digits. Lowercase hex never contains "ApiKey", which
 * Novu's SDK would otherwise take for a scheme already present.
 */
export function generateApiKey(): string {
  return `hk_${randomBytes(24).toString('hex')}`;
}

export function hashApiKey(key: string): string {
  return hash('sha256', key, 'hex');
}

/** A key's name, wherever it is made (the dashboard, `npm run keys`): 1 to this many characters. */
export const KEY_NAME_MAX = 100;

/** Whether `name`, trimmed, is a key's name. */
export const isKeyName = (name: string) => name.trim().length > 0 && name.trim().length <= KEY_NAME_MAX;

/** The start of a key, safe to show in listings. */
export function keyPrefix(key: string): string {
  return key.slice(0, 10);
}

const SHA256_HEX = /^[0-9a-f]{64}$/;

/** Compares two hex digests without leaking where they differ through timing. */
export function sameDigest(a: string, b: string): boolean {
  // Buffer.from(…, 'hex') silently drops what is not hex: refuse anything but two whole digests.
  if (!SHA256_HEX.test(a) || !SHA256_HEX.test(b)) return false;
  const left = Buffer.from(a, 'hex');
  const right = Buffer.from(b, 'hex');
  return left.length === right.length && timingSafeEqual(left, right);
}
