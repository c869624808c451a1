import { beforeAll, describe, expect, it } from 'vitest';
import type { OpenAPIBackend, Operation, Request } from 'openapi-backend';
import { createBackend } from '../../src/http/backend.js';
import { requestsFor } from '../helpers/requests.js';

// Herald's backend parses a request without openapi-backend's repeated work (backend.ts,
// repeatableParse). Whatever it skips, its answer must be the one openapi-backend's own parser gives.
describe.runIf(process.env.HERALD_TEST_DB === 'sqlite')('parsing a request for an operation', () => {
  let backend: OpenAPIBackend;
  let ownParse: (req: Request, operation?: Operation) => unknown;

  beforeAll(async () => {
    backend = await createBackend();
    const prototype = Object.getPrototypeOf(backend.router) as { parseRequest: typeof ownParse };
    expect(backend.router.parseRequest).not.toBe(prototype.parseRequest);
    ownParse = (req, operation) => prototype.parseRequest.call(backend.router, req, operation);
  });

  const ids = ['user-123', 'a%2Fb', 'caf%C3%A9', 'with%20space', '%25percent'];
  const queries = [{}, { limit: '10', after: 'x' }, { tags: ['a', 'b'], includeTopics: 'true' }, { nested: { deep: ['1', { two: 2 }] }, flag: true, count: 3 }];
  const headers = [{}, { authorization: 'Bearer hk_x', 'content-type': 'application/json', 'idempotency-key': 'k-1' }, { Authorization: 'ApiKey hk_y', 'X-Request-Id': 'r' }];
  const bodies = [undefined, { name: 'Ada', data: { a: [1, 2, { b: null }] } }];

  it('answers as openapi-backend does for every operation, path parameter, query, header set and body', () => {
    let compared = 0;
    for (const { operation, req } of requestsFor(backend.router.getOperations(), { ids, queries, headers, bodies })) {
      expect(backend.router.parseRequest(req, operation), `${operation.operationId} ${req.path}`).toEqual(ownParse(req, operation));
      expect(backend.router.parseRequest(req)).toEqual(ownParse(req));
      compared += 1;
    }
    expect(compared).toBeGreaterThan(1000);
  });

  it('gives each call its own query, as openapi-backend does: validation coerces it in place', () => {
    const operation = backend.router.getOperations().find((op) => op.operationId === 'listSubscribers')!;
    const req = { method: 'GET', path: '/subscribers', query: { limit: '10', tags: ['a'] }, headers: {} } as unknown as Request;
    const first = backend.router.parseRequest(req, operation);
    (first.query as Record<string, unknown>).limit = 10;
    (first.query.tags as string[]).push('b');
    expect(backend.router.parseRequest(req, operation).query).toEqual({ limit: '10', tags: ['a'] });
    expect(req.query).toEqual({ limit: '10', tags: ['a'] });
  });

  it('leaves cookies, query strings and broken percent-encoding to openapi-backend, with the same answer', () => {
    const operation = backend.router.getOperations().find((op) => op.operationId === 'getSubscriber')!;
    const withCookie = { method: 'GET', path: '/subscribers/a', query: {}, headers: { cookie: 'a=1; b=2' } } as unknown as Request;
    expect(backend.router.parseRequest(withCookie, operation)).toEqual(ownParse(withCookie, operation));
    expect(backend.router.parseRequest(withCookie, operation).cookies).toEqual({ a: '1', b: '2' });
    const withCapitalCookie = { method: 'GET', path: '/subscribers/a', query: {}, headers: { Cookie: 'a=1' } } as unknown as Request;
    expect(backend.router.parseRequest(withCapitalCookie, operation).cookies).toEqual({ a: '1' });
    const withQueryString = { method: 'GET', path: '/subscribers/a?includeTopics=true', headers: {} } as unknown as Request;
    expect(backend.router.parseRequest(withQueryString, operation)).toEqual(ownParse(withQueryString, operation));
    const broken = { method: 'GET', path: '/subscribers/%zz', query: {}, headers: {} } as unknown as Request;
    expect(() => ownParse(broken, operation)).toThrow(URIError);
    expect(() => backend.router.parseRequest(broken, operation)).toThrow(URIError);
  });
});
