import { describe, expect, it } from 'vitest';
import { isSealed, open, seal, SealError, SEALED_PREFIX, sealIfSecret } from '../../src/crypto.js';

const secret = 'a-long-and-random-herald-secret';
const plain = JSON.stringify({ host: 'smtp.example.com', password: 's3cr3t-passw0rd' });

describe('seal and open', () => {
  it('opens what it sealed, and the sealed form is prefixed and hides the plain text', () => {
    const sealed = seal(plain, secret);
    expect(sealed.startsWith(SEALED_PREFIX)).toBe(true);
    expect(isSealed(sealed)).toBe(true);
    expect(sealed).not.toContain('s3cr3t');
    expect(open(sealed, secret)).toBe(plain);
  });

  it('round-trips empty and non-ASCII text', () => {
    expect(open(seal('', secret), secret)).toBe('');
    expect(open(seal('pässwörd ✉️ 密码', secret), secret)).toBe('pässwörd ✉️ 密码');
  });

  it('uses a fresh IV each time, so the same text seals differently', () => {
    expect(seal(plain, secret)).not.toBe(seal(plain, secret));
  });

  it('refuses a value whose ciphertext, tag or IV was altered', () => {
    const sealed = seal(plain, secret);
    const bytes = Buffer.from(sealed.slice(SEALED_PREFIX.length), 'base64');
    for (const index of [0, 12, bytes.length - 1]) {
      const tampered = Buffer.from(bytes);
      tampered[index] ^= 0x01;
      expect(() => open(SEALED_PREFIX + tampered.toString('base64'), secret)).toThrow(SealError);
    }
  });

  it('refuses a truncated value', () => {
    expect(() => open(`${SEALED_PREFIX}AAAA`, secret)).toThrow(/damaged/);
  });

  it('refuses to open with another secret, with a message that names the cause but not the value', () => {
    const sealed = seal(plain, secret);
    let error: unknown;
    try {
      open(sealed, 'another-secret');
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(SealError);
    expect((error as Error).message).toMatch(/HERALD_SECRET/);
    expect((error as Error).message).not.toContain('s3cr3t');
  });

  it('still refuses another secret, or none, for a value it has opened before', () => {
    const sealed = seal(plain, secret);
    expect(open(sealed, secret)).toBe(plain);
    expect(() => open(sealed, 'another-secret')).toThrow(SealError);
    expect(() => open(sealed, undefined)).toThrow(/HERALD_SECRET is not set/);
    expect(open(sealed, secret)).toBe(plain);
  });

  it('refuses to open a sealed value when no secret is set', () => {
    expect(() => open(seal(plain, secret), undefined)).toThrow(/HERALD_SECRET is not set/);
  });

  it('passes values without the prefix through as they are, with or without a secret', () => {
    expect(isSealed(plain)).toBe(false);
    expect(open(plain, secret)).toBe(plain);
    expect(open(plain, undefined)).toBe(plain);
  });

  it('seals only when a secret is set', () => {
    expect(sealIfSecret(plain, undefined)).toBe(plain);
    expect(open(sealIfSecret(plain, secret), secret)).toBe(plain);
    expect(() => seal(plain, '')).toThrow(SealError);
  });
});
