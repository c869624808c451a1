import { beforeAll, describe, expect, it } from 'vitest';
import { OpenAPIBackend, type Context, type Request } from 'openapi-backend';
import { createBackend } from '../../src/http/backend.js';
import { requestsFor } from '../helpers/requests.js';

// Herald's backend handles a request parsing it once (backend.ts, HeraldBackend.handleRequest). Whatever
// it skips, every hook must be called as openapi-backend's own handleRequest calls it: the same
// hook, with the same request, operation, security results and validation.
describe.runIf(process.env.HERALD_TEST_DB === 'sqlite')('handling a request', () => {
  let backend: OpenAPIBackend;
  const seen: unknown[] = [];

  // Each hook records what it was given; the security handlers pass on a header's say-so.
  const record = (hook: string) => (c: Context) => {
    const { request, operation, security, validation } = c;
    seen.push(structuredClone({ hook, request, operationId: operation?.operationId, security, validation }));
    return hook;
  };

  beforeAll(async () => {
    backend = await createBackend();
    backend.register({
      notFound: record('notFound'),
      methodNotAllowed: record('methodNotAllowed'),
      unauthorizedHandler: record('unauthorizedHandler'),
      validationFail: record('validationFail'),
      // Herald's reads the body here (api.ts); this one records what it is given, and is called as
      // openapi-backend calls it, authorized or not.
      postSecurityHandler: (c: Context) => {
        seen.push(structuredClone({ hook: 'postSecurityHandler', operationId: c.operation?.operationId, security: c.security }));
      },
    });
    for (const operation of backend.router.getOperations()) backend.register(operation.operationId!, record(operation.operationId!));
    backend.registerSecurityHandler('bearerAuth', (c: Context) => c.request.headers['x-pass'] === 'bearer');
    // The inbox's schemes: a subscriber token passes on the bearer's say-so; a ticket never does.
    backend.registerSecurityHandler('subscriberToken', (c: Context) => c.request.headers['x-pass'] === 'bearer');
    backend.registerSecurityHandler('inboxTicket', () => false);
    backend.registerSecurityHandler('apiKeyAuth', (c: Context) => {
      if (c.request.headers['x-pass'] === 'throw') throw new Error('no');
      return c.request.headers['x-pass'] === 'apikey';
    });
    expect(Object.getPrototypeOf(backend).handleRequest).not.toBe(OpenAPIBackend.prototype.handleRequest);
  });

  /** What each implementation does with one request: the hook it calls, what it gives the hook, and its result. */
  async function outcome(handle: (req: Request) => Promise<unknown>, req: Request) {
    seen.length = 0;
    const result = await handle(structuredClone(req));
    return { result, seen: [...seen] };
  }

  const ids = ['sub-1', 'a%2Fb', '12'];
  const queries = [{}, { limit: '10', page: '2' }, { limit: 'lots', includeTopics: 'yes' }, { includeTopics: 'true', read: 'false', seen: ['true', 'false'] }, { after: 'x' }];
  const headers = [{}, { 'x-pass': 'bearer' }, { 'x-pass': 'apikey', 'content-type': 'application/json', 'idempotency-key': 'k-1' }, { 'x-pass': 'throw', cookie: 'a=1' }];
  const bodies = [undefined, {}, { name: 'welcome', to: 'sub-1', payload: { n: 1 } }, { subscriberId: 12, email: 'not an address', extra: true }, '{"broken"'];

  it('calls the hook openapi-backend calls, with the same context, for every operation and a range of requests', { timeout: 120_000 }, async () => {
    const own = (req: Request) => backend.handleRequest(req);
    const original = (req: Request) => OpenAPIBackend.prototype.handleRequest.call(backend, req);
    const hooks = new Set<string>();
    let compared = 0;
    for (const { operation, req } of requestsFor(backend.router.getOperations(), { ids, queries, headers, bodies })) {
      const expected = await outcome(original, req);
      const got = await outcome(own, req);
      // Both validate to the first error; Herald's then lists every error of a small request (firstThenAll).
      for (const [i, call] of got.seen.entries()) {
        const errors = (call as { validation?: { errors?: unknown[] | null } }).validation?.errors;
        const stock = (expected.seen[i] as { validation?: { errors?: unknown[] | null } } | undefined)?.validation?.errors;
        if (!errors || !stock) continue;
        expect(errors).toEqual(expect.arrayContaining(stock));
        (call as { validation: { errors: unknown[] } }).validation.errors = stock;
      }
      expect(got, `${operation.operationId} ${JSON.stringify(req)}`).toEqual(expected);
      hooks.add(expected.result as string);
      compared += 1;
    }
    expect(compared).toBeGreaterThan(5000);
    // Refusals of both kinds were among those compared, and so were requests most operations took.
    expect(hooks).toContain('unauthorizedHandler');
    expect(hooks).toContain('validationFail');
    expect(hooks).toContain('triggerEvent');
    expect(hooks.size).toBeGreaterThan(backend.router.getOperations().length / 2);
  });

  it('answers unknown paths and methods as openapi-backend does', async () => {
    const own = (req: Request) => backend.handleRequest(req);
    const original = (req: Request) => OpenAPIBackend.prototype.handleRequest.call(backend, req);
    const requests = [
      { method: 'GET', path: '/nowhere', query: {}, headers: {} },
      { method: 'PATCH', path: '/events/trigger', query: { a: '1' }, headers: { 'x-pass': 'bearer' } },
      { method: 'GET', path: 'subscribers/sub-1/', query: {}, headers: { 'x-pass': 'bearer' } },
      { method: ' get ', path: ' /subscribers?limit=5', query: {}, headers: { 'x-pass': 'bearer' } },
    ] as Request[];
    for (const req of requests) expect(await outcome(own, req), JSON.stringify(req)).toEqual(await outcome(original, req));
    expect((await outcome(own, requests[0])).result).toBe('notFound');
    expect((await outcome(own, requests[1])).result).toBe('methodNotAllowed');
  });

  it('hands the operation the coerced query and the path parameters as sent', async () => {
    await outcome((req) => backend.handleRequest(req), { method: 'GET', path: '/subscribers', query: { limit: '10' }, headers: { 'x-pass': 'bearer' } } as unknown as Request);
    const call = (seen as Array<{ hook: string; request: { query: Record<string, unknown> } }>).find(({ hook }) => hook !== 'postSecurityHandler')!;
    expect(call.hook).toBe('listSubscribers');
    expect(call.request.query.limit).toBe(10);
  });

  // The contract has no array or JSON query parameter and takes only JSON bodies: a small one of
  // its own has them, for openapi-backend's handling of a single value, a broken JSON value and a
  // body given as text.
  it('handles array and JSON query parameters and a body given as text as openapi-backend does', async () => {
    const small = await createBackend({
      openapi: '3.1.0',
      info: { title: 'small', version: '1' },
      paths: {
        '/things/{id}': {
          post: {
            operationId: 'postThing',
            parameters: [
              { name: 'id', in: 'path', required: true, schema: { type: 'integer' } },
              { name: 'tags', in: 'query', schema: { type: 'array', items: { type: 'integer' } } },
              { name: 'filter', in: 'query', content: { 'application/json': { schema: { type: 'object' } } } },
            ],
            requestBody: { content: { 'application/json': { schema: { type: 'object', required: ['n'] } } } },
            responses: { 200: { description: 'ok' } },
          },
        },
      },
    });
    small.register({ notFound: record('notFound'), unauthorizedHandler: record('unauthorizedHandler'), validationFail: record('validationFail'), postThing: record('postThing') });
    const own = (req: Request) => small.handleRequest(req);
    const original = (req: Request) => OpenAPIBackend.prototype.handleRequest.call(small, req);
    const requests = [
      { query: { tags: '7' }, body: { n: 1 } },
      { query: { tags: ['7', '8'] }, body: { n: 1 } },
      { query: { tags: 'x' }, body: { n: 1 } },
      { query: { filter: '{"a":1}' }, body: { n: 1 } },
      { query: { filter: '{broken' }, body: { n: 1 } },
      { query: {}, body: '{"n":1}' },
      { query: {}, body: '{"n":' },
      { query: {}, body: {} },
    ];
    const results = new Set<unknown>();
    for (const { query, body } of requests) {
      const req = { method: 'POST', path: '/things/42', query, headers: { 'content-type': 'application/json' }, body } as unknown as Request;
      const expected = await outcome(original, req);
      expect(await outcome(own, req), JSON.stringify(req)).toEqual(expected);
      results.add(expected.result);
    }
    expect(results).toEqual(new Set(['postThing', 'validationFail']));
  });

  // api.ts reads the body in postSecurityHandler, into a request whose `body` reads it back: the
  // body validated and handed on is the one read there, as openapi-backend's own validation sees it.
  it('validates and hands on the body a postSecurityHandler read, as openapi-backend does', async () => {
    const small = await createBackend({
      openapi: '3.1.0',
      info: { title: 'small', version: '1' },
      paths: {
        '/things': {
          post: {
            operationId: 'postThing',
            requestBody: { required: true, content: { 'application/json': { schema: { type: 'object', required: ['n'], properties: { n: { type: 'integer' } } } } } },
            responses: { 200: { description: 'ok' } },
          },
        },
      },
    });
    // What the client sent, and what has been read of it: nothing until postSecurityHandler reads it.
    let sent: unknown;
    let arrived: unknown;
    small.register({
      notFound: record('notFound'),
      unauthorizedHandler: record('unauthorizedHandler'),
      validationFail: record('validationFail'),
      postThing: record('postThing'),
      postSecurityHandler: (c: Context) => {
        arrived = structuredClone(sent);
        c.request.requestBody = arrived;
      },
    });
    const own = (req: Request) => small.handleRequest(req);
    const original = (req: Request) => OpenAPIBackend.prototype.handleRequest.call(small, req);
    const results: unknown[] = [];
    for (const body of [{ n: 1 }, {}, { n: 'x' }, undefined]) {
      const run = async (handle: (req: Request) => Promise<unknown>) => {
        sent = body;
        arrived = undefined;
        seen.length = 0;
        const req = {
          method: 'POST',
          path: '/things',
          query: {},
          headers: { 'content-type': 'application/json' },
          get body() {
            return arrived;
          },
        } as unknown as Request;
        return { result: await handle(req), seen: [...seen] };
      };
      const expected = await run(original);
      expect(await run(own), JSON.stringify(body)).toEqual(expected);
      results.push(expected.result);
    }
    expect(results).toEqual(['postThing', 'validationFail', 'validationFail', 'validationFail']);
  });

  it("leaves a request to openapi-backend's own handleRequest when a hook it does not run is registered", async () => {
    const hooked = await createBackend();
    const seenBy: string[] = [];
    hooked.register({
      notFound: record('notFound'),
      unauthorizedHandler: record('unauthorizedHandler'),
      validationFail: record('validationFail'),
      listTopics: record('listTopics'),
      postResponseHandler: (c: Context) => {
        seenBy.push(`after ${c.operation.operationId}`);
        return 'answered by postResponseHandler';
      },
    });
    hooked.registerSecurityHandler('bearerAuth', () => true);
    const req = { method: 'GET', path: '/topics', query: {}, headers: {} } as unknown as Request;
    expect(await hooked.handleRequest(req)).toBe('answered by postResponseHandler');
    expect(seenBy).toEqual(['after listTopics']);
  });
});
