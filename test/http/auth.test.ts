import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.js';
import { createApiKey, revokeApiKey } from '../../src/db/repos/accounts.js';

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp();
});
afterEach(async () => t.assertContract());
afterAll(async () => t?.close());

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
