import { SignJWT } from 'jose';
import { describe, expect, it } from 'vitest';
import type { Db } from '../../src/db/knex.js';
import { MAX_ORIGIN_LENGTH, originAllowed, verifySubscriberToken } from '../../src/engine/inbox-tokens.js';

// Values no environment can have are refused before any read, so a flood of them (an Origin
// header or a token's kid, each up to Node's 16 KiB of headers) neither reaches the database nor
// fills the process's memos.
const untouchable = new Proxy({} as Db, {
  get() {
    throw new Error('the database was used');
  },
});

describe('inbox values longer than any stored one', () => {
  it('an origin longer than any an environment may allow is refused without a read', async () => {
    const origin = `https://${'a'.repeat(MAX_ORIGIN_LENGTH)}.example`;
    await expect(originAllowed(untouchable, origin, 'env', 0)).resolves.toBe(false);
  });

  it("a token whose kid is longer than any signing secret's id is refused without a read", async () => {
    const token = await new SignJWT({})
      .setProtectedHeader({ alg: 'HS256', kid: `ik_${'0'.repeat(100)}`, typ: 'JWT' })
      .setSubject('ada')
      .setIssuedAt()
      .setExpirationTime('1h')
      .sign(new Uint8Array(32));
    await expect(verifySubscriberToken(untouchable, token, undefined, new Date())).resolves.toMatchObject({ ok: false, reason: expect.stringMatching(/unknown or retired/) });
  });
});
