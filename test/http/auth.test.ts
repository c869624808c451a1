import { describe, expect, it } from 'vitest';
import { useTestApp } from '../helpers/app.js';
import { createApiKey, revokeApiKey } from '../../src/db/repos/accounts.js';
import { cachedKeyOwner, forgetKeyOwners } from '../../src/db/key-owner-cache.js';
import { hashApiKey, keyPrefix } from '../../src/api-keys.js';
import type { Db } from '../../src/db/knex.js';

const t = useTestApp();

describe('authentication', () => {
  it('accepts a key sent as "Authorization: Bearer <key>"', async () => {
    await t.http.get('/v1/subscribers').set('Authorization', `Bearer ${t.a.key}`).expect(200);
  });

  it("accepts the same key as \"Authorization: ApiKey <key>\", the scheme Novu's SDKs send", async () => {
    await t.http.get('/v1/subscribers').set('Authorization', `ApiKey ${t.a.key}`).expect(200);
  });

  it('treats the scheme word case-insensitively', async () => {
    await t.http.get('/v1/subscribers').set('Authorization', `bearer ${t.a.key}`).expect(200);
  });

  it('rejects a request without a key with 401 and says how to send one', async () => {
    const res = await t.http.get('/v1/subscribers').expect(401);
    expect(res.body).toMatchObject({ statusCode: 401, error: 'Unauthorized', path: '/v1/subscribers' });
    expect(res.body.message).toContain('Authorization: Bearer <key>');
  });

  it('answers 401 to a request without a valid key whatever its body: broken JSON, or too large, is not read', async () => {
    const broken = await t.http.post('/v1/subscribers').set('Content-Type', 'application/json').send('{bad').expect(401);
    expect(broken.body).toMatchObject({ statusCode: 401, error: 'Unauthorized' });
    await t.http.post('/v1/subscribers').set('Authorization', 'Bearer hk_notakey').set('Content-Type', 'application/json').send('{bad').expect(401);
    await t.http.post('/v1/subscribers').send({ subscriberId: 'big', data: { blob: 'x'.repeat(1024 * 1024) } }).expect(401);
  });

  it('rejects malformed headers with 401', async () => {
    for (const header of [t.a.key, `Basic ${t.a.key}`, 'Bearer', `Bearer ${t.a.key} extra`, 'Bearer  ']) {
      const res = await t.http.get('/v1/subscribers').set('Authorization', header).expect(401);
      expect(res.body.statusCode).toBe(401);
    }
  });

  it('rejects an unknown key with 401', async () => {
    const res = await t.http.get('/v1/subscribers').set('Authorization', 'Bearer hk_000000000000000000000000000000000000000000000000').expect(401);
    expect(res.body.message).toBe('Invalid API key');
  });

  it('rejects a revoked key with 401, while other keys keep working', async () => {
    const { id, key } = await createApiKey(t.db, { environmentId: t.environments.a, name: 'to revoke' });
    await t.http.get('/v1/subscribers').set('Authorization', `Bearer ${key}`).expect(200);
    expect(await revokeApiKey(t.db, id)).toBe(true);
    const res = await t.http.get('/v1/subscribers').set('Authorization', `Bearer ${key}`).expect(401);
    expect(res.body.message).toBe('This API key has been revoked');
    await t.a.get('/v1/subscribers').expect(200);
  });

  it('asks for a key on writes before looking at the body', async () => {
    await t.http.post('/v1/subscribers').send({ nonsense: true }).expect(401);
    await t.a.get('/v1/subscribers/nonsense').expect(404);
  });

  it('never echoes the key in an error', async () => {
    const res = await t.http.get('/v1/subscribers').set('Authorization', 'Bearer hk_secretsecretsecret').expect(401);
    expect(JSON.stringify(res.body)).not.toContain('secretsecret');
  });
});

describe('remembered keys (HERALD_KEY_CACHE_MS)', () => {
  const ttlMs = () => t.deps.config.keyCacheMs;

  it('notices a key revoked by another process once the key is read again, within HERALD_KEY_CACHE_MS', async () => {
    const { id, key } = await createApiKey(t.db, { environmentId: t.environments.a, name: 'revoked elsewhere' });
    await t.http.get('/v1/subscribers').set('Authorization', `Bearer ${key}`).expect(200);
    // What `npm run keys -- revoke` does from its own process: this server is not told.
    await t.db('api_keys').where({ id }).update({ revoked_at: new Date().toISOString() });
    t.clock.advance(ttlMs() - 1);
    await t.http.get('/v1/subscribers').set('Authorization', `Bearer ${key}`).expect(200);
    t.clock.advance(1);
    const res = await t.http.get('/v1/subscribers').set('Authorization', `Bearer ${key}`).expect(401);
    expect(res.body.message).toBe('This API key has been revoked');
  });

  it('accepts a key created by another process after it was refused as unknown, within HERALD_KEY_CACHE_MS', async () => {
    const key = 'hk_created_elsewhere_0000000000000000000000000000';
    await t.http.get('/v1/subscribers').set('Authorization', `Bearer ${key}`).expect(401);
    await t.db('api_keys').insert({
      id: 'created-elsewhere',
      environment_id: t.environments.a,
      name: 'elsewhere',
      key_hash: hashApiKey(key),
      key_prefix: keyPrefix(key),
      created_at: new Date().toISOString(),
    });
    t.clock.advance(ttlMs());
    await t.http.get('/v1/subscribers').set('Authorization', `Bearer ${key}`).expect(200);
  });
});

describe('cachedKeyOwner', () => {
  const owner = { keyId: 'k', keyHash: 'h', revoked: false, environmentId: 'e', organizationId: 'o', plan: 'free' as const, ratePerMinute: null, burst: null };
  const counting = () => {
    const reads: string[] = [];
    return { reads, read: async (_db: Db, keyHash: string) => (reads.push(keyHash), keyHash === 'known' ? owner : undefined) };
  };

  it('reads each key once per TTL, known or not, and every time with a TTL of 0', async () => {
    const db = {} as Db;
    const { reads, read } = counting();
    for (const now of [0, 1, 999]) {
      expect(await cachedKeyOwner(db, 'known', 1000, read, now)).toBe(owner);
      expect(await cachedKeyOwner(db, 'unknown', 1000, read, now)).toBeUndefined();
    }
    expect(reads).toEqual(['known', 'unknown']);
    await cachedKeyOwner(db, 'known', 1000, read, 1000);
    expect(reads).toEqual(['known', 'unknown', 'known']);
    await cachedKeyOwner(db, 'known', 0, read, 1000);
    await cachedKeyOwner(db, 'known', 0, read, 1000);
    expect(reads.length).toBe(5);
  });

  it('forgets everything for a database on forgetKeyOwners, and only for that database', async () => {
    const [one, two] = [{} as Db, {} as Db];
    const { reads, read } = counting();
    await cachedKeyOwner(one, 'known', 1000, read, 0);
    await cachedKeyOwner(two, 'known', 1000, read, 0);
    forgetKeyOwners(one);
    await cachedKeyOwner(one, 'known', 1000, read, 0);
    await cachedKeyOwner(two, 'known', 1000, read, 0);
    expect(reads.length).toBe(3);
  });

  it('does not keep what a read begun before forgetKeyOwners found (a key revoked meanwhile)', async () => {
    const db = {} as Db;
    let finishRead: () => void = () => undefined;
    const slowRead = async () => {
      await new Promise<void>((resolve) => (finishRead = resolve));
      return owner;
    };
    const before = cachedKeyOwner(db, 'known', 60_000, slowRead, 0);
    forgetKeyOwners(db);
    finishRead();
    expect(await before).toBe(owner);
    // Read again: the answer read across the forgetting was not kept.
    const { reads, read } = counting();
    await cachedKeyOwner(db, 'known', 60_000, read, 0);
    expect(reads).toEqual(['known']);
  });

  it('stays bounded under a flood of random keys: the oldest are forgotten first', async () => {
    const db = {} as Db;
    const { reads, read } = counting();
    for (let i = 0; i <= 10_000; i++) await cachedKeyOwner(db, `random-${i}`, 60_000, read, 0);
    reads.length = 0;
    await cachedKeyOwner(db, 'random-10000', 60_000, read, 0);
    await cachedKeyOwner(db, 'random-1', 60_000, read, 0);
    expect(reads).toEqual([]);
    await cachedKeyOwner(db, 'random-0', 60_000, read, 0);
    expect(reads).toEqual(['random-0']);
  });
});
