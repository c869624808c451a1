import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import supertest from 'supertest';
import { createMockApp } from '../../src/http/mock.js';
import { createLogger } from '../../src/logger.js';
import { exampleRequest, exampleUrl, operationsOf } from '../../scripts/docs.js';
import { contractViolations } from '../helpers/contract.js';
import { documentedAnswer, spec } from '../helpers/spec.js';

// The mock as a frontend uses it: the contract's own router and validation, examples for answers.
// It does not touch the database, so it runs once.
describe.runIf(process.env.HERALD_TEST_DB === 'sqlite')('npm run mock', () => {
  let http: ReturnType<typeof supertest>;
  const violations: string[] = [];
  /** Sends the request and checks the answer against the contract, as startTestApp's recorder does. */
  const send = async (test: supertest.Test) => {
    const res = await test;
    const { method, url } = test as unknown as { method: string; url: string };
    const path = new URL(url).pathname;
    violations.push(...(await contractViolations({ method, path, status: res.status, headers: res.headers, body: res.text })));
    return res;
  };
  beforeAll(async () => {
    http = supertest(await createMockApp(createLogger('silent')));
  });
  afterAll(() => expect(violations).toEqual([]));

  it('answers every operation, sent its own documented example, with the documented status and example', async () => {
    for (const { path: apiPath, method, operationId } of operationsOf(spec)) {
      const request = exampleRequest(spec, apiPath, method);
      let test = http[method as 'get'](`/v1${exampleUrl(request)}`).set('Authorization', 'Bearer hk_anything');
      if (request.body !== undefined) test = test.send(request.body as object);
      const res = await send(test);
      const expected = documentedAnswer(apiPath, method);
      expect({ operationId, status: res.status }).toEqual({ operationId, status: expected.status });
      if (expected.body !== undefined) expect(res.body, operationId).toEqual(expected.body);
    }
  });

  it('rejects a body that breaks the schema with 400 and the error body, naming each field', async () => {
    const res = await send(http.post('/v1/subscribers').set('Authorization', 'Bearer hk_anything').send({ nickname: 'ada', email: 'not-an-email' }));
    expect(res.status).toBe(400);
    expect(res.body).toMatchObject({ statusCode: 400, error: 'Bad Request', path: '/v1/subscribers' });
    expect(res.body.details).toEqual(
      expect.arrayContaining([
        { field: 'body/subscriberId', message: 'is required' },
        { field: 'body/nickname', message: 'is not allowed' },
        { field: 'body/email', message: 'must match format "email"' },
      ]),
    );
  });

  it('rejects a query parameter out of range with 400, as the real server does', async () => {
    const res = await send(http.get('/v1/subscribers?limit=1000').set('Authorization', 'Bearer hk_anything'));
    expect(res.status).toBe(400);
    expect(res.body.details[0].field).toBe('query/limit');
  });

  it('answers 401 without a key, and 404 and 405 off the contract, with the error body', async () => {
    expect((await send(http.get('/v1/subscribers'))).status).toBe(401);
    expect((await send(http.get('/v1/nothing-here').set('Authorization', 'Bearer k'))).status).toBe(404);
    const wrongMethod = await send(http.patch('/v1/subscribers').set('Authorization', 'Bearer k'));
    expect(wrongMethod.status).toBe(405);
    expect(wrongMethod.headers.allow).toBe('GET, HEAD, POST');
  });

  it("sends a documented response's headers too: a 429 says when to retry", async () => {
    const limited = await send(http.get('/v1/subscribers').set({ Authorization: 'Bearer k', Prefer: 'code=429' }));
    expect(limited.status).toBe(429);
    expect(limited.headers['retry-after']).toMatch(/^\d+$/);
    expect(limited.headers.ratelimit).toBeDefined();
  });

  it('picks another documented response or example with Prefer', async () => {
    const conflict = await send(
      http.post('/v1/subscribers').set({ Authorization: 'ApiKey k', Prefer: 'code=409' }).send({ subscriberId: 'user-123' }),
    );
    expect(conflict.status).toBe(409);
    expect(conflict.body.statusCode).toBe(409);
    const inactive = await send(
      http.post('/v1/events/trigger').set({ Authorization: 'Bearer k', Prefer: 'example=inactive' }).send({ name: 'welcome', to: 'user-123' }),
    );
    expect(inactive.status).toBe(201);
    expect(inactive.body).toEqual({ data: { acknowledged: true, status: 'trigger_not_active' } });
  });
});
