// Keys and credentials: API keys are compared in constant time and stored only as SHA-256 hashes;
// no key, password, token or other credential ever appears in a log line or an error body, not
// even when a request fails with a 500 in the middle of writing them.
import { Writable } from 'node:stream';
import crypto from 'node:crypto';
import { syncBuiltinESMExports } from 'node:module';
import express from 'express';
import supertest from 'supertest';
import { beforeAll, describe, expect, it, vi } from 'vitest';
import { createApp } from '../../src/app.js';
import { createLogger } from '../../src/logger.js';
import { hashApiKey, keyPrefix } from '../../src/api-keys.js';
import { createApiKey, revokeApiKey } from '../../src/db/repos/accounts.js';
import { contractRecorder } from '../helpers/contract.js';
import { useTestApp } from '../helpers/app.js';
import { snapshot } from '../helpers/hostile.js';

// A pass-through spy: the real function runs, and the tests can see that it did.
vi.mock('../../src/api-keys.js', async (importOriginal) => {
  const actual = await importOriginal<typeof import('../../src/api-keys.js')>();
  return { ...actual, sameDigest: vi.fn(actual.sameDigest) };
});

const t = useTestApp();

/**
 * The modules under the spy, imported afresh: test files share one module graph, and a copy
 * another file loaded before the mock above was registered would not have it.
 */
async function spiedModules() {
  vi.resetModules();
  const apiKeys = await import('../../src/api-keys.js');
  const security = await import('../../src/http/security.js');
  return { sameDigest: apiKeys.sameDigest, authenticate: security.authenticate };
}

describe('API keys are compared in constant time', () => {
  const digest = hashApiKey('hk_one');
  let spied: Awaited<ReturnType<typeof spiedModules>>;
  beforeAll(async () => {
    spied = await spiedModules();
  });

  it('sameDigest tells equal digests from different ones', () => {
    const { sameDigest } = spied;
    expect(sameDigest(digest, hashApiKey('hk_one'))).toBe(true);
    expect(sameDigest(digest, hashApiKey('hk_two'))).toBe(false);
    expect(sameDigest(digest, `${digest.slice(0, -1)}${digest.endsWith('0') ? '1' : '0'}`)).toBe(false);
    expect(sameDigest(digest, digest.slice(0, 62))).toBe(false);
    expect(sameDigest(digest, '')).toBe(false);
  });

  it('sameDigest compares the bytes with crypto.timingSafeEqual, whose time does not depend on where they differ', () => {
    const { sameDigest } = spied;
    // A pass-through spy on Node's own export; syncBuiltinESMExports hands it to every module that
    // imported the name, and hands the original back after.
    const timingSafeEqual = vi.spyOn(crypto, 'timingSafeEqual');
    syncBuiltinESMExports();
    try {
      sameDigest(digest, hashApiKey('hk_two'));
      expect(timingSafeEqual).toHaveBeenCalledTimes(1);
      const [left, right] = timingSafeEqual.mock.calls[0] as [Buffer, Buffer];
      expect([left.length, right.length]).toEqual([32, 32]);
    } finally {
      timingSafeEqual.mockRestore();
      syncBuiltinESMExports();
    }
  });

  // Buffer.from(s, 'hex') drops everything from the first non-hex character, so without a check
  // of both sides 'abc' and 'abd' (both the byte 0xab) would compare equal.
  it('sameDigest says false for strings that are not whole SHA-256 hex digests', () => {
    const { sameDigest } = spied;
    expect(sameDigest('abc', 'abd')).toBe(false);
    expect(sameDigest('not hex', 'also not hex')).toBe(false);
  });

  it('authenticate finds the key by its SHA-256 and confirms it with sameDigest', async () => {
    const { authenticate } = spied;
    const spy = vi.mocked(spied.sameDigest);
    spy.mockClear();
    const result = await authenticate(t.db, `Bearer ${t.a.key}`);
    expect(result).toMatchObject({ ok: true, auth: { environmentId: t.environments.a } });
    expect(spy).toHaveBeenCalledWith(hashApiKey(t.a.key), hashApiKey(t.a.key));
  });

  it('authenticate refuses a key that differs in its last character, and never compares the key itself', async () => {
    const { authenticate } = spied;
    const spy = vi.mocked(spied.sameDigest);
    spy.mockClear();
    const near = `${t.a.key.slice(0, -1)}${t.a.key.endsWith('0') ? '1' : '0'}`;
    expect(await authenticate(t.db, `Bearer ${near}`)).toMatchObject({ ok: false, reason: 'Invalid API key' });
    // Only digests ever reach a comparison (here none: no stored hash matches), never the key in clear.
    for (const args of spy.mock.calls) for (const arg of args) expect(arg).toMatch(/^[0-9a-f]{64}$/);
  });
});

describe('API keys are stored only as hashes', () => {
  it('keeps the SHA-256 and a short prefix of each key, and the key itself nowhere in the database', async () => {
    const extra = await createApiKey(t.db, { environmentId: t.environments.a, name: 'extra' });
    // Use the keys, so that anything that records requests (rate limits, idempotency) has run.
    for (const key of [t.a.key, t.b.key, extra.key]) {
      await t.http.post('/v1/subscribers').set('Authorization', `Bearer ${key}`).set('Idempotency-Key', `k-${key.slice(-6)}`).send({ subscriberId: `s-${key.slice(-6)}` });
    }
    const rows = (await t.db('api_keys').select('*')) as Array<Record<string, unknown>>;
    for (const key of [t.a.key, t.aProduction.key, t.b.key, extra.key]) {
      const row = rows.find((r) => r.key_hash === hashApiKey(key));
      expect(row, 'a row holds the hash of the key').toBeDefined();
      expect(row!.key_prefix).toBe(keyPrefix(key));
      expect(keyPrefix(key).length).toBeLessThanOrEqual(10);
    }
    const everything = JSON.stringify([...(await snapshot(t.db)).entries()]);
    for (const key of [t.a.key, t.aProduction.key, t.b.key, extra.key]) {
      expect(everything.includes(key), 'the key in clear is stored somewhere').toBe(false);
      expect(everything.includes(key.slice(0, 20)), 'more of the key than its prefix is stored').toBe(false);
    }
  });
});

describe('secrets never reach logs or error bodies', () => {
  const unique = (label: string) => `${label}-${crypto.randomBytes(8).toString('hex')}`;
  const secret = {
    smtpPassword: unique('smtp-pw'),
    smtpPassword2: unique('smtp-pw2'),
    sendgridKey: unique('SG'),
    twilioToken: unique('twilio-token'),
    pushSecret: unique('whsec'),
    expoKey: unique('expo-key'),
    webhookToken: unique('hook'),
    deviceToken: unique('ExponentPushToken'),
  };

  const lines: string[] = [];
  const seen: Array<{ what: string; status: number; body: string; headers: string }> = [];
  let http: ReturnType<typeof supertest>;
  let revokedKey: string;
  const violations: string[] = [];
  const pending = new Set<Promise<void>>();

  beforeAll(async () => {
    const destination = new Writable({
      write(chunk, _encoding, done) {
        lines.push(...String(chunk).split('\n').filter(Boolean));
        done();
      },
    });
    // The app as production builds it, every level logged, in front of the same database.
    const app = express();
    app.use(contractRecorder(violations, pending));
    app.use(await createApp({ ...t.deps, logger: createLogger('trace', destination) }));
    http = supertest(app);
    const revoked = await createApiKey(t.db, { environmentId: t.environments.a, name: 'revoked' });
    await revokeApiKey(t.db, revoked.id);
    revokedKey = revoked.key;
  });

  async function send(what: string, test: supertest.Test) {
    const res = await test;
    seen.push({ what, status: res.status, body: res.text ?? '', headers: JSON.stringify(res.headers) });
    return res;
  }
  const as = (key: string) => ({
    get: (path: string) => http.get(path).set('Authorization', `Bearer ${key}`),
    post: (path: string) => http.post(path).set('Authorization', `Bearer ${key}`),
    put: (path: string) => http.put(path).set('Authorization', `Bearer ${key}`),
  });

  it('sends requests that carry keys and credentials, succeed, are refused, and fail with a 500', async () => {
    const a = as(t.a.key);
    // Keys in Authorization, right and wrong.
    await send('list', a.get('/v1/subscribers')).then((r) => expect(r.status).toBe(200));
    await send('unknown subscriber', a.get('/v1/subscribers/nobody')).then((r) => expect(r.status).toBe(404));
    await send('unknown route', a.get('/v1/nowhere')).then((r) => expect(r.status).toBe(404));
    await send('key with trailing junk', http.get('/v1/subscribers').set('Authorization', `Bearer ${t.a.key} ${t.a.key}`)).then((r) => expect(r.status).toBe(401));
    await send('other scheme', http.get('/v1/subscribers').set('Authorization', `Token ${t.a.key}`)).then((r) => expect(r.status).toBe(401));
    await send('near key', http.get('/v1/subscribers').set('Authorization', `Bearer ${t.a.key}0`)).then((r) => expect(r.status).toBe(401));
    await send('revoked key', http.get('/v1/subscribers').set('Authorization', `Bearer ${revokedKey}`)).then((r) => expect(r.status).toBe(401));
    await send('ApiKey scheme', http.get('/v1/subscribers').set('Authorization', `ApiKey ${t.b.key}`)).then((r) => expect(r.status).toBe(200));

    // Integration credentials in bodies: accepted, refused by the schema, refused by the provider's rules.
    const smtp = { host: 'smtp.example.com', port: 587, user: 'herald', password: secret.smtpPassword, from: 'n@example.com' };
    const created = await send('smtp', a.post('/v1/integrations').send({ providerId: 'smtp', identifier: 'sec-smtp', credentials: smtp }));
    expect(created.status).toBe(201);
    const integrationId = created.body.data.integrationId as string;
    await send('sendgrid', a.post('/v1/integrations').set('Idempotency-Key', 'sec-sg').send({ providerId: 'sendgrid', credentials: { apiKey: secret.sendgridKey, from: 'n@example.com' } })).then((r) =>
      expect(r.status).toBe(201),
    );
    await send('sendgrid replay', a.post('/v1/integrations').set('Idempotency-Key', 'sec-sg').send({ providerId: 'sendgrid', credentials: { apiKey: secret.sendgridKey, from: 'n@example.com' } })).then((r) =>
      expect(r.status).toBe(201),
    );
    await send('sendgrid other body', a.post('/v1/integrations').set('Idempotency-Key', 'sec-sg').send({ providerId: 'sendgrid', credentials: { apiKey: `${secret.sendgridKey}x`, from: 'n@example.com' } })).then((r) =>
      expect(r.status).toBe(422),
    );
    await send('twilio', a.post('/v1/integrations').send({ providerId: 'twilio', credentials: { accountSid: 'AC1', token: secret.twilioToken, from: '+15005550006' } })).then((r) =>
      expect(r.status).toBe(201),
    );
    await send('push-webhook', a.post('/v1/integrations').send({ providerId: 'push-webhook', credentials: { webhookUrl: 'https://example.com/push', secretKey: secret.pushSecret } })).then((r) =>
      expect(r.status).toBe(201),
    );
    await send('expo', a.post('/v1/integrations').send({ providerId: 'expo', credentials: { apiKey: secret.expoKey } })).then((r) => expect(r.status).toBe(201));
    await send('slack', a.post('/v1/integrations').send({ providerId: 'slack', identifier: 'sec-slack' })).then((r) => expect(r.status).toBe(201));
    await send('credential the provider does not use', a.post('/v1/integrations').send({ providerId: 'smtp', credentials: { ...smtp, apiKey: secret.sendgridKey } })).then((r) =>
      expect(r.status).toBe(422),
    );
    await send('credential missing', a.post('/v1/integrations').send({ providerId: 'twilio', credentials: { token: secret.twilioToken } })).then((r) => expect(r.status).toBe(422));
    await send('password too long', a.post('/v1/integrations').send({ providerId: 'smtp', credentials: { ...smtp, password: `${secret.smtpPassword}${'x'.repeat(1024)}` } })).then((r) =>
      expect(r.status).toBe(400),
    );
    await send('unknown credential', a.post('/v1/integrations').send({ providerId: 'smtp', credentials: { ...smtp, passwort: secret.smtpPassword } })).then((r) =>
      expect(r.status).toBe(400),
    );
    await send('token of the wrong type', a.post('/v1/integrations').send({ providerId: 'twilio', credentials: { accountSid: 'AC1', token: [secret.twilioToken], from: '+1' } })).then((r) =>
      expect(r.status).toBe(400),
    );
    await send('not JSON', a.post('/v1/integrations').set('Content-Type', 'application/json').send(`{"providerId":"smtp","credentials":{"password":"${secret.smtpPassword}"`)).then((r) =>
      expect(r.status).toBe(400),
    );
    await send('rotate', a.put(`/v1/integrations/${integrationId}`).send({ credentials: { ...smtp, password: secret.smtpPassword2 } })).then((r) => expect(r.status).toBe(200));
    await send('rotate elsewhere', as(t.b.key).put(`/v1/integrations/${integrationId}`).send({ credentials: { ...smtp, password: secret.smtpPassword2 } })).then((r) =>
      expect(r.status).toBe(404),
    );

    // A subscriber's chat and push credentials.
    await send('subscriber', a.post('/v1/subscribers').send({ subscriberId: 'sec-ada' })).then((r) => expect(r.status).toBe(201));
    const webhookUrl = `https://hooks.slack.com/services/T000/B000/${secret.webhookToken}`;
    await send('slack webhook', a.put('/v1/subscribers/sec-ada/credentials').send({ providerId: 'slack', credentials: { webhookUrl } })).then((r) => expect(r.status).toBe(200));
    await send('device token, no active integration', a.put('/v1/subscribers/sec-ada/credentials').send({ providerId: 'push-webhook', integrationIdentifier: 'nope', credentials: { deviceTokens: [secret.deviceToken] } })).then((r) =>
      expect(r.status).toBe(422),
    );
    await send('webhook of the wrong provider', a.put('/v1/subscribers/sec-ada/credentials').send({ providerId: 'slack', credentials: { webhookUrl, deviceTokens: [secret.deviceToken] } })).then((r) =>
      expect(r.status).toBe(422),
    );
    await send('credentials of a stranger', a.put('/v1/subscribers/nobody/credentials').send({ providerId: 'slack', credentials: { webhookUrl } })).then((r) => expect(r.status).toBe(404));

    // 500s in the middle of writing credentials: the database refuses the statement that holds them.
    await t.db.schema.alterTable('integrations', (table) => table.renameColumn('credentials', 'credentials_gone'));
    try {
      const res = await send('500 while creating', a.post('/v1/integrations').send({ providerId: 'smtp', identifier: 'sec-500', credentials: { ...smtp, password: secret.smtpPassword2 } }));
      expect(res.status).toBe(500);
    } finally {
      await t.db.schema.alterTable('integrations', (table) => table.renameColumn('credentials_gone', 'credentials'));
    }
    await t.db.schema.renameTable('subscriber_channels', 'subscriber_channels_gone');
    try {
      const res = await send('500 while setting', a.put('/v1/subscribers/sec-ada/credentials').send({ providerId: 'slack', credentials: { webhookUrl } }));
      expect(res.status).toBe(500);
    } finally {
      await t.db.schema.renameTable('subscriber_channels_gone', 'subscriber_channels');
    }
    // The 500s were logged, with their request ids.
    const failures = lines.filter((line) => line.includes('"request failed"'));
    expect(failures).toHaveLength(2);
    // …and still say what went wrong, in the database's words.
    expect(failures[0]).toMatch(/no column named credentials|column \\"credentials\\" of relation \\"integrations\\" does not exist/);
    expect(failures[1]).toMatch(/subscriber_channels/);
    // Every answer, the 500s included, is one the contract allows.
    await Promise.all(pending);
    expect(violations).toEqual([]);
  });

  const keys = () => ({ 'key of A': t.a.key, 'key of B': t.b.key, 'key of A production': t.aProduction.key, 'revoked key': revokedKey });

  it('writes no API key to the log', () => {
    expect(lines.length).toBeGreaterThan(20);
    for (const [name, key] of Object.entries(keys())) {
      const leaking = lines.filter((line) => line.includes(key) || line.includes(hashApiKey(key)));
      expect(leaking, `${name} in the log`).toEqual([]);
    }
  });

  it('writes no password, API key, token or webhook of any provider to the log', () => {
    for (const [name, value] of Object.entries(secret)) {
      const leaking = lines.filter((line) => line.includes(value));
      expect(leaking, `${name} in the log`).toEqual([]);
    }
  });

  it('sends no API key in any response, and no credential in any error body', () => {
    for (const response of seen) {
      for (const [name, key] of Object.entries(keys())) {
        expect(response.body.includes(key) || response.headers.includes(key), `${name} in the answer to "${response.what}"`).toBe(false);
      }
      if (response.status < 400) continue;
      for (const [name, value] of Object.entries(secret)) {
        expect(response.body.includes(value), `${name} in the ${response.status} answer to "${response.what}": ${response.body}`).toBe(false);
      }
    }
  });

  it('shows integration credentials masked in every answer, successful ones included', () => {
    const integrationSecrets = [secret.smtpPassword, secret.smtpPassword2, secret.sendgridKey, secret.twilioToken, secret.pushSecret, secret.expoKey];
    for (const response of seen) {
      for (const value of integrationSecrets) expect(response.body.includes(value), `a credential in the answer to "${response.what}"`).toBe(false);
    }
  });
});
