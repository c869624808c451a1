import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import supertest from 'supertest';
import { Client, spend, startTestApp, type TestApp } from '../helpers/app.js';
import { testDatabaseUrl } from '../helpers/db.js';
import { createTenant } from '../helpers/factories.js';
import { createApp } from '../../src/app.js';
import { createDb, type Db } from '../../src/db/knex.js';
import { createApiKey, revokeApiKey } from '../../src/db/repos/accounts.js';
import {
  MemoryBuckets,
  msUntil,
  policyFor,
  refill,
  remainingTokens,
  retryAfterSeconds,
  take,
  UNITS_PER_TOKEN,
  windowMs,
  type RatePolicy,
} from '../../src/http/rate-limit.js';

const FREE: RatePolicy = { name: 'free', ratePerMinute: 100, burst: 20 };
const T0 = Date.parse('2026-11-22T09:00:00.000Z');

describe('the token bucket arithmetic', () => {
  it('starts full, takes one token per request, and refuses when empty', () => {
    let bucket = undefined as ReturnType<typeof refill> | undefined;
    for (let i = 0; i < 20; i++) {
      const decision = take(bucket, FREE, T0);
      expect(decision.allowed).toBe(true);
      bucket = decision.bucket;
      expect(remainingTokens(bucket)).toBe(19 - i);
    }
    const refused = take(bucket, FREE, T0);
    expect(refused).toEqual({ allowed: false, bucket: { units: 0, refilledAt: T0 } });
  });

  it('refills continuously at rate per minute, exactly, and never above burst', () => {
    const empty = { units: 0, refilledAt: T0 };
    expect(refill(empty, FREE, T0 + 599).units).toBe(599 * 100);
    expect(remainingTokens(refill(empty, FREE, T0 + 599))).toBe(0);
    expect(remainingTokens(refill(empty, FREE, T0 + 600))).toBe(1);
    expect(refill(empty, FREE, T0 + 600)).toEqual({ units: UNITS_PER_TOKEN, refilledAt: T0 + 600 });
    expect(refill(empty, FREE, T0 + 12_000).units).toBe(20 * UNITS_PER_TOKEN);
    expect(refill(empty, FREE, T0 + 3_600_000).units).toBe(20 * UNITS_PER_TOKEN);
    // An odd rate stays exact: 7 per minute is one token every 8,571.43 ms.
    const seven: RatePolicy = { name: 'enterprise', ratePerMinute: 7, burst: 3 };
    expect(take(empty, seven, T0 + 8571).allowed).toBe(false);
    expect(take(empty, seven, T0 + 8572).allowed).toBe(true);
  });

  it('refills nothing when the clock goes backwards, and keeps the later time', () => {
    const bucket = { units: 5 * UNITS_PER_TOKEN, refilledAt: T0 };
    expect(refill(bucket, FREE, T0 - 10_000)).toEqual(bucket);
  });

  it('caps a bucket at the new burst after a downgrade', () => {
    const proFull = { units: 100 * UNITS_PER_TOKEN, refilledAt: T0 };
    expect(remainingTokens(take(proFull, FREE, T0).bucket)).toBe(19);
  });

  it('says when tokens come back: one for Retry-After, all of them for the reset', () => {
    const empty = { units: 0, refilledAt: T0 };
    expect(msUntil(empty, 1, FREE)).toBe(600);
    expect(msUntil(empty, 20, FREE)).toBe(12_000);
    expect(msUntil({ units: 30 * UNITS_PER_TOKEN, refilledAt: T0 }, 20, FREE)).toBe(0);
    expect(windowMs(FREE)).toBe(12_000);
    expect(windowMs({ name: 'pro', ratePerMinute: 1000, burst: 100 })).toBe(6_000);
    expect(retryAfterSeconds(new Date(Date.now() + 12_000), FREE)).toBe(1);
    expect(retryAfterSeconds(new Date(Date.now() + 11_500), FREE)).toBe(1);
    const slow: RatePolicy = { name: 'enterprise', ratePerMinute: 6, burst: 2 };
    expect(retryAfterSeconds(new Date(Date.now() + 20_000), slow)).toBe(10);
  });

  it('reads the plan: the seed numbers for Free and Pro, the stored ones for Enterprise', () => {
    expect(policyFor({ plan: 'free', ratePerMinute: null, burst: null })).toEqual(FREE);
    expect(policyFor({ plan: 'pro', ratePerMinute: 5, burst: 5 })).toEqual({ name: 'pro', ratePerMinute: 1000, burst: 100 });
    expect(policyFor({ plan: 'enterprise', ratePerMinute: 600, burst: 50 })).toEqual({ name: 'enterprise', ratePerMinute: 600, burst: 50 });
    expect(policyFor({ plan: 'enterprise', ratePerMinute: null, burst: null })).toBeUndefined();
  });

  it('forgets buckets once they are full again (the same as none)', async () => {
    const buckets = new MemoryBuckets();
    await buckets.take('env:a', FREE, T0 + 60_000);
    await buckets.take('env:b', FREE, T0 + 60_000);
    expect(buckets.size).toBe(2);
    await buckets.take('env:b', FREE, T0 + 120_000);
    expect(buckets.size).toBe(1);
  });
});

let t: TestApp;
let keys: { free: Client; freeProduction: Client; pro: Client; enterprise: Client };

/** Long enough for any bucket of these tests to be full again. */
const refillAll = () => t.clock.advance(10 * 60_000);

beforeAll(async () => {
  t = await startTestApp();
});
// Each test has organizations of its own, so its buckets start full whatever the tests before it spent.
beforeEach(async () => {
  const free = await createTenant(t, { name: 'free org', plan: 'free', environments: ['development', 'production'] });
  const pro = await createTenant(t, { name: 'pro org', plan: 'pro' });
  const enterprise = await createTenant(t, { name: 'enterprise org', plan: 'enterprise' });
  keys = { free: free.clients.development, freeProduction: free.clients.production, pro: pro.clients.development, enterprise: enterprise.clients.development };
});
afterEach(async () => t.assertContract());
afterAll(async () => t?.close());

describe('rate limits by plan', () => {
  it('gives a Free key 20 quick requests, then 429 with the error body and Retry-After', async () => {
    refillAll();
    const first = await keys.free.get('/v1/subscribers').expect(200);
    expect(first.headers.ratelimit).toBe('"free"; r=19; t=1');
    expect(first.headers['ratelimit-policy']).toMatch(/^"free"; q=20; w=12; pk=:[A-Za-z0-9+/=]+:$/);
    expect(first.headers).not.toHaveProperty('x-ratelimit-limit');
    expect(first.headers).not.toHaveProperty('retry-after');

    expect(await spend(keys.free, 19)).toEqual(Array(19).fill(200));
    const refused = await keys.free.get('/v1/subscribers').expect(429);
    expect(refused.body).toEqual({
      statusCode: 429,
      error: 'Too Many Requests',
      message: 'Rate limit exceeded; retry in 1 second',
      timestamp: expect.any(String),
      path: '/v1/subscribers',
    });
    expect(refused.headers['retry-after']).toBe('1');
    expect(refused.headers.ratelimit).toBe('"free"; r=0; t=12');
    expect(refused.headers['ratelimit-policy']).toBe(first.headers['ratelimit-policy']);
    expect(refused.headers['content-type']).toMatch(/application\/json/);
    // Refused requests spend nothing, and every operation is limited, not only this one.
    await keys.free.post('/v1/subscribers', { subscriberId: 'late' }).expect(429);
  });

  it('serves the Free key again once a token is back, and 20 again once the bucket is full', async () => {
    expect(await spend(keys.free, 21)).toEqual([...Array(20).fill(200), 429]);
    t.clock.advance(599);
    await keys.free.get('/v1/subscribers').expect(429);
    t.clock.advance(1);
    const res = await keys.free.get('/v1/subscribers').expect(200);
    expect(res.headers.ratelimit).toBe('"free"; r=0; t=12');
    await keys.free.get('/v1/subscribers').expect(429);

    t.clock.advance(12_000);
    expect(await spend(keys.free, 21)).toEqual([...Array(20).fill(200), 429]);
  });

  it('keeps a steady 100 requests a minute working, and refuses a faster pace', async () => {
    t.clock.advance(12_000);
    await spend(keys.free, 20);
    // The bucket is empty: from now on only the refill pays for requests.
    for (let i = 0; i < 150; i++) {
      t.clock.advance(600);
      const res = await keys.free.get('/v1/subscribers');
      expect(res.status, `request ${i + 1} of the steady pace`).toBe(200);
    }
    t.clock.advance(300);
    const refused = await keys.free.get('/v1/subscribers').expect(429);
    expect(refused.headers['retry-after']).toBe('1');
  });

  it('gives a Pro key 100 quick requests', async () => {
    refillAll();
    const statuses = await spend(keys.pro, 101);
    expect(statuses.slice(0, 100)).toEqual(Array(100).fill(200));
    expect(statuses[100]).toBe(429);
    const res = await keys.pro.get('/v1/subscribers').expect(429);
    expect(res.headers['retry-after']).toBe('1');
    expect(res.headers.ratelimit).toBe('"pro"; r=0; t=6');
    expect(res.headers['ratelimit-policy']).toMatch(/^"pro"; q=100; w=6; pk=:/);
  });

  it('does not limit an enterprise organization without numbers, nor send the headers', async () => {
    expect(await spend(keys.enterprise, 150)).toEqual(Array(150).fill(200));
    const res = await keys.enterprise.get('/v1/subscribers').expect(200);
    expect(res.headers).not.toHaveProperty('ratelimit');
    expect(res.headers).not.toHaveProperty('ratelimit-policy');
  });

  it('gives each environment its own budget', async () => {
    refillAll();
    expect(await spend(keys.free, 21)).toEqual([...Array(20).fill(200), 429]);
    const other = await keys.freeProduction.get('/v1/subscribers').expect(200);
    expect(other.headers.ratelimit).toBe('"free"; r=19; t=1');
    expect(other.headers['ratelimit-policy']).not.toBe((await keys.free.get('/v1/subscribers')).headers['ratelimit-policy']);
  });

  it('sends the headers on 2xx and 4xx answers alike', async () => {
    refillAll();
    const answers = [
      await keys.free.post('/v1/subscribers', { subscriberId: 'rate-limited-ada' }).expect(201),
      await keys.free.get('/v1/subscribers/nobody').expect(404),
      await keys.free.post('/v1/subscribers', { nickname: 'x' }).expect(400),
      await keys.free.post('/v1/subscribers').set('Content-Type', 'application/json').send('{"broken').expect(400),
      await keys.free.delete('/v1/subscribers').expect(405),
      await keys.free.get('/v1/nowhere').expect(404),
      await t.http.get('/v1/subscribers').expect(401),
    ];
    answers.forEach((res, i) => {
      expect(res.headers.ratelimit, `answer ${i}`).toMatch(/^"(free|unauthenticated)"; r=\d+; t=\d+$/);
      expect(res.headers['ratelimit-policy'], `answer ${i}`).toMatch(/^"(free|unauthenticated)"; q=20; w=12; pk=:/);
    });
    expect(answers[6].headers.ratelimit).toMatch(/^"unauthenticated"/);
  });

  it('limits requests without a valid key per client address, with the Free numbers; they get their 401 until then', async () => {
    refillAll();
    const unknown = new Client(t.http, 'hk_000000000000000000000000000000000000000000000000');
    const { key, id } = await createApiKey(t.db, { environmentId: t.environments.b, name: 'to revoke' });
    await revokeApiKey(t.db, id);
    const revoked = new Client(t.http, key);

    const first = await unknown.get('/v1/subscribers').expect(401);
    expect(first.body.message).toBe('Invalid API key');
    expect(first.headers.ratelimit).toBe('"unauthenticated"; r=19; t=1');
    expect(await spend(unknown, 9)).toEqual(Array(9).fill(401));
    expect(await spend(revoked, 9)).toEqual(Array(9).fill(401));
    await t.http.get('/v1/subscribers').expect(401);
    // The address's bucket is empty: the 21st try, with any key or none, is refused.
    for (const client of [unknown, revoked]) {
      const res = await client.get('/v1/subscribers').expect(429);
      expect(res.headers['retry-after']).toBe('1');
      expect(res.body.message).toBe('Rate limit exceeded; retry in 1 second');
    }
    await t.http.post('/v1/events/trigger').send({ name: 'x', to: 'y' }).expect(429);
    // A valid key from the same address has its own budget.
    await keys.freeProduction.get('/v1/subscribers').expect(200);
    await t.a.get('/v1/subscribers').expect(200);
    t.clock.advance(600);
    await unknown.get('/v1/subscribers').expect(401);
  });

  it('costs no query on SQLite and one on PostgreSQL', async () => {
    refillAll();
    // A first request after a long pause may sweep full buckets away (now and then, not per request).
    await keys.free.get('/v1/subscribers').expect(200);
    const queries: string[] = [];
    const count = (q: { sql: string }) => queries.push(q.sql);
    t.db.on('query', count);
    try {
      // Both keys read (and remembered) once, so only the limit's own queries differ.
      await Promise.all([t.a.get('/v1/subscribers/nobody').expect(404), keys.free.get('/v1/subscribers/nobody').expect(404)]);
      queries.length = 0;
      await t.a.get('/v1/subscribers/nobody').expect(404);
      const unlimited = queries.splice(0).length;
      await keys.free.get('/v1/subscribers/nobody').expect(404);
      const limited = queries.splice(0);
      expect(limited.length - unlimited).toBe(testDatabaseUrl() ? 1 : 0);
    } finally {
      t.db.off('query', count);
    }
  });
});

describe.runIf(testDatabaseUrl())('on PostgreSQL, with two API processes', () => {
  let second: ReturnType<typeof supertest>;
  let secondDb: Db;
  beforeAll(async () => {
    // Another process's view: its own app and its own connection pool, the same schema.
    secondDb = createDb(t.testDb.url, { schema: t.testDb.schema });
    second = supertest(await createApp({ ...t.deps, db: secondDb }));
  });
  afterAll(async () => secondDb?.destroy());

  it('keeps the buckets in the database', async () => {
    refillAll();
    await keys.pro.get('/v1/subscribers').expect(200);
    const rows = await t.db('rate_limit_buckets').select('key', 'token_units', 'burst', 'rate_per_minute');
    expect(rows).toContainEqual({ key: expect.stringMatching(/^env:/), token_units: 99 * UNITS_PER_TOKEN, burst: 100, rate_per_minute: 1000 });
  });

  it('lets the two together spend exactly one budget, taken in turns', async () => {
    refillAll();
    const statuses: number[] = [];
    for (let i = 0; i < 24; i++) {
      const http = i % 2 === 0 ? t.http : second;
      statuses.push((await http.get('/v1/subscribers').set('Authorization', `Bearer ${keys.free.key}`)).status);
    }
    expect(statuses).toEqual([...Array(20).fill(200), 429, 429, 429, 429]);
  });

  it('lets the two together spend exactly one budget, taken all at once', async () => {
    refillAll();
    const requests = Array.from({ length: 60 }, (_, i) =>
      (i % 2 === 0 ? t.http : second).get('/v1/subscribers').set('Authorization', `Bearer ${keys.pro.key}`),
    );
    const statuses = (await Promise.all(requests)).map((res) => res.status);
    expect(statuses.filter((s) => s === 200)).toHaveLength(60);
    const more = Array.from({ length: 80 }, (_, i) =>
      (i % 2 === 0 ? t.http : second).get('/v1/subscribers').set('Authorization', `Bearer ${keys.pro.key}`),
    );
    const moreStatuses = (await Promise.all(more)).map((res) => res.status);
    expect(moreStatuses.filter((s) => s === 200)).toHaveLength(40);
    expect(moreStatuses.filter((s) => s === 429)).toHaveLength(40);
  });
});
