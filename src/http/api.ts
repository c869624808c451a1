import { createHash } from 'node:crypto';
import express, { type Request, type Response } from 'express';
import type { Context, Handler, OpenAPIBackend } from 'openapi-backend';
import type { ErrorObject } from 'ajv';
import type { Deps } from '../deps.js';
import { createBackend, type MatchedRequest, type Operation } from './backend.js';
import { badRequest, ApiError, notFound, unauthorized } from '../errors.js';
import { sendError } from './errors.js';
import type { ErrorDetail } from '../contract.js';
import type { Authentication, Scheme } from './security.js';
import type { Auth, OperationId } from '../contract.js';
import type { HandlerContext, OperationHandlers } from './types.js';
import type { InboxHub } from '../engine/inbox-hub.js';
import { inboxStreams, type StreamTimings } from './inbox-stream.js';
import { crossOriginOf } from './inbox-cors.js';
import { idempotencyKeyOf, idempotent, MAX_IDEMPOTENCY_KEY, type HandlerReply } from './idempotency.js';
import { BODY_LIMIT, cappedBody, checkedJsonBody } from './request-body.js';
import type { BodyScan } from './body-scan.js';
import { sendJson } from './send-json.js';
import { AnswerMemory, answerReservations } from '../answer-memory.js';
import { yieldToEventLoop } from '../turns.js';

/** The methods whose requests carry a body in the contract; on any other the body is not read. */
export const METHODS_WITH_BODY = new Set(['POST', 'PUT', 'PATCH']);

const LOCATIONS: Record<string, string> = { requestBody: 'body', query: 'query', path: 'path', header: 'header' };

/** Turns ajv's errors into the error body's `details`: one per problem, naming the field. */
export function validationDetails(errors: ErrorObject[]): ErrorDetail[] {
  const details = errors.map((error) => {
    const segments = error.instancePath.split('/').slice(1);
    segments[0] = LOCATIONS[segments[0]] ?? segments[0] ?? 'body';
    let message = error.message ?? 'is invalid';
    if (error.keyword === 'required') {
      // A missing body is reported by openapi-backend as a missing "requestBody" property.
      if (error.params.missingProperty !== 'requestBody') segments.push(String(error.params.missingProperty));
      message = segments.length === 1 && segments[0] === 'body' ? 'is required: send a JSON body' : 'is required';
    } else if (error.keyword === 'additionalProperties') {
      segments.push(String(error.params.additionalProperty));
      message = 'is not allowed';
    } else if (error.keyword === 'enum') {
      message = `must be one of ${(error.params.allowedValues as unknown[]).map((v) => JSON.stringify(v)).join(', ')}`;
    }
    return { field: segments.filter((s) => s !== '').join('/') || 'body', message, keyword: error.keyword };
  });
  // oneOf failures repeat every branch's complaint; keep the specific ones when there are any.
  const specific = details.filter((d) => d.keyword !== 'oneOf' && d.keyword !== 'anyOf' && !(d.keyword === 'type' && d.message === 'must be null'));
  const chosen = specific.length > 0 ? specific : details;
  const seen = new Set<string>();
  return chosen
    .map(({ field, message }) => ({ field, message }))
    .filter((d) => {
      const key = `${d.field} ${d.message}`;
      return !seen.has(key) && (seen.add(key), true);
    })
    .slice(0, 20);
}

/**
 * A path whose percent-encoding is broken (`%`, `%zz`, `%C3%28`): the router's own decoding of the
 * path parameters throws a URIError, which is the caller's mistake, not ours.
 */
const malformedPath = () =>
  badRequest('The path is not valid URL encoding: a % must start an escaped UTF-8 byte such as %2F', [{ field: 'path', message: 'is not valid URL encoding' }]);

/** A query string whose percent-encoding is broken (`%zz`, `%FF`), which the query parser would have kept as it came. */
const malformedQuery = () =>
  badRequest('The query is not valid URL encoding: a % must start an escaped UTF-8 byte such as %2F', [{ field: 'query', message: 'is not valid URL encoding' }]);

/** Whether a URL's query is whole percent-encoding: each % starts an escaped byte, and the bytes spell UTF-8. */
function wellEncodedQuery(url: string): boolean {
  const at = url.indexOf('?');
  if (at === -1 || !url.includes('%', at)) return true;
  try {
    decodeURIComponent(url.slice(at + 1));
    return true;
  } catch {
    return false;
  }
}

/** How deep a request may nest: far beyond any real payload, far within what the code that stores it can recurse through. */
export const MAX_NESTING = 64;

// NUL, which PostgreSQL's text cannot hold, and a UTF-16 surrogate without its other half, which
// is not Unicode and comes back from the database as something else than was sent.
const NOT_TEXT = /\u0000|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

/**
 * What the schema cannot say about a valid request but storing it needs: every string (and object
 * key) is Unicode text without NUL, every number one a double holds (`1e400` would be stored as
 * null), and nothing nests deeper than MAX_NESTING (JSON.stringify would overflow the stack).
 * Iterative, so a hostile depth cannot overflow it either.
 */
function unstorableInput(input: Record<string, unknown>, bodyScan: BodyScan | undefined): ErrorDetail | undefined {
  // A body whose bytes hold no escape that could spell NUL or a surrogate, no number a double may
  // not hold, and nest no deeper than the walk allows (its containers at depth d are the walk's
  // d - 1), is storable without a walk.
  const plain = bodyScan && !bodyScan.mayHoldNonText && !bodyScan.mayHoldHugeNumber && bodyScan.deepest <= MAX_NESTING;
  const walked = plain ? { ...input, body: undefined } : input;
  return storable(walked) ? undefined : whereUnstorable(walked);
}

/**
 * Whether every value is storable: the common case, checked without making a path or an object
 * for each value (on a megabyte of small values that was most of a request's time).
 */
function storable(input: Record<string, unknown>): boolean {
  const values: unknown[] = Object.values(input);
  const depths: number[] = values.map(() => 0);
  while (values.length > 0) {
    const value = values.pop();
    const depth = depths.pop()!;
    if (typeof value === 'string') {
      if (NOT_TEXT.test(value)) return false;
    } else if (typeof value === 'number') {
      if (!Number.isFinite(value)) return false;
    } else if (value !== null && typeof value === 'object') {
      if (depth >= MAX_NESTING) return false;
      if (Array.isArray(value)) {
        for (const item of value) values.push(item), depths.push(depth + 1);
      } else {
        for (const key of Object.keys(value)) {
          if (NOT_TEXT.test(key)) return false;
          values.push((value as Record<string, unknown>)[key]), depths.push(depth + 1);
        }
      }
    }
  }
  return true;
}

/** The first value that is not storable, named by its path. */
function whereUnstorable(input: Record<string, unknown>): ErrorDetail | undefined {
  const pending: Array<{ value: unknown; field: string; depth: number }> = Object.entries(input).map(([field, value]) => ({ value, field, depth: 0 }));
  while (pending.length > 0) {
    const { value, field, depth } = pending.pop()!;
    if (typeof value === 'string') {
      if (NOT_TEXT.test(value)) return { field, message: 'must not contain NUL or an unpaired UTF-16 surrogate' };
    } else if (typeof value === 'number') {
      if (!Number.isFinite(value)) return { field, message: 'is a number beyond what a double holds (about ±1.8e308)' };
    } else if (value !== null && typeof value === 'object') {
      if (depth >= MAX_NESTING) return { field, message: `nests deeper than ${MAX_NESTING} levels` };
      for (const [key, item] of Object.entries(value)) {
        if (NOT_TEXT.test(key)) return { field, message: 'has a key that contains NUL or an unpaired UTF-16 surrogate' };
        pending.push({ value: item, field: `${field}/${key}`, depth: depth + 1 });
      }
    }
  }
  return undefined;
}

/**
 * Where a request is authorized: here, and only here. `authentication()` (security.ts) has read the
 * key before routing, because the rate limit spends the key's environment's bucket; it rejects
 * nothing. The contract's security schemes are openapi-backend's security handlers below, and a
 * request that satisfies none gets its 401 from `unauthorizedHandler`, before its body is read:
 * the body is read in `postSecurityHandler`, for authorized requests only, so a request without a
 * valid key is answered 401 whatever it sent (broken JSON, too large).
 */
function securityHandler(scheme: Scheme) {
  return (_c: Context, _req: Request, res: Response): Auth | false => {
    const result = authenticationOf(res);
    return result.ok && result.scheme === scheme ? result.auth : false;
  };
}

const authenticationOf = (res: Response): Authentication => res.locals.authentication;
/** The key's owner, as the security handler that authorized the request gave it. */
const authOf = (c: Context): Auth => (c.security.bearerAuth || c.security.apiKeyAuth || c.security.subscriberToken || c.security.inboxTicket) as Auth;

/** Whether the operation is the inbox's, opened by a subscriber token rather than an API key. */
const isInboxOperation = (c: Context): boolean =>
  ((c.operation?.security ?? []) as Array<Record<string, unknown>>).some((requirement) => 'subscriberToken' in requirement);

/** Whether the operation takes no credential at all (`security: []`, the inbox session): its body is read unauthenticated. */
const isPublicOperation = (c: Context): boolean => Array.isArray(c.operation?.security) && c.operation.security.length === 0;

/**
 * The Idempotency-Key as it is stored: keys are kept per environment, and a subscriber token's
 * are kept per subscriber too, so one browser can never be replayed another's answer. (A key too
 * long is left as it is, to be refused as any other.)
 */
function scopedIdempotencyKey(c: Context): string | undefined {
  const key = idempotencyKeyOf(c);
  if (key === undefined) return key;
  const { subscriberId } = authOf(c);
  if (subscriberId === undefined || key.length > MAX_IDEMPOTENCY_KEY) return key;
  return `inbox:${createHash('sha256').update(`${subscriberId}\u0000${key}`).digest('hex')}`;
}

/**
 * Reads a JSON body into `req.body`, as express.json does (its errors are the error handler's). A
 * body sent in another type is refused as such, not taken for a missing body.
 */
function bodyReader(): (req: Request, res: Response) => Promise<void> {
  const verify = (_req: unknown, res: Response, bytes: Buffer, encoding: string) => {
    res.locals.bodyScan = checkedJsonBody(bytes, encoding);
  };
  const json = cappedBody(express.json({ limit: BODY_LIMIT, verify }), BODY_LIMIT, 'application/json');
  const read = (req: Request, res: Response) => new Promise<void>((resolve, reject) => json(req, res, (err?: unknown) => (err ? reject(err) : resolve())));
  return async (req, res) => {
    await read(req, res);
    const sent = req.headers['transfer-encoding'] !== undefined || Number(req.headers['content-length'] ?? 0) > 0;
    if (req.body !== undefined || !sent) return;
    const type = req.headers['content-type']?.split(';')[0].trim().slice(0, 100);
    const not = type ? `, not ${type}` : '';
    throw badRequest(`The request body must be sent as JSON (Content-Type: application/json)${not}`, [
      { field: 'header/content-type', message: type ? `must be application/json${not}` : 'is required with a body: application/json' },
    ]);
  };
}

/**
 * The contract's router and validator in front of the handlers: unknown paths 404, wrong methods
 * 405, requests without a valid key 401, requests that break the schema 400, and only then the
 * operation's handler, whose reply is written as JSON.
 */
export async function createApi(handlers: OperationHandlers, deps: Deps, options: { inboxHub?: InboxHub; inboxStreams?: StreamTimings } = {}): Promise<OpenAPIBackend> {
  const api = await createBackend();
  const readBody = bodyReader();
  // What the large pages this process is answering may hold together (answer-memory.ts).
  const largeAnswers = new AnswerMemory(deps.config.largeAnswers.bytes, deps.config.largeAnswers.waitMs);
  /**
   * Sends what `run` answers. With an Idempotency-Key it runs in a transaction that also records
   * its answer, a 4xx it throws included, or a repeat replays the recorded one (idempotency.ts).
   */
  const answer = async (c: Context, req: Request, res: Response, run: (runDeps: Deps) => Promise<HandlerReply>) => {
    const key = scopedIdempotencyKey(c);
    const reply = key
      ? await idempotent(deps, { environmentId: authOf(c).environmentId, key, method: req.method, path: req.originalUrl.split('?')[0], body: c.request.requestBody }, run)
      : await run(deps);
    if (reply.headers) res.set(reply.headers);
    await sendJson(res, reply.status, reply.body);
  };

  const operations: Record<string, Handler> = {};
  for (const operationId of Object.keys(handlers) as OperationId[]) {
    const handler = handlers[operationId] as (ctx: HandlerContext<OperationId>) => Promise<HandlerReply>;
    operations[operationId] = async (c: Context, req: Request, res: Response) => {
      // The router has already decoded each parameter once; decoding again would turn the id
      // "a%2Fb" (sent as a%252Fb) into "a/b", another resource, and make any id with a % unreachable.
      const params = c.request.params as never;
      const unstorable = unstorableInput({ path: c.request.params, query: c.request.query, body: c.request.requestBody }, res.locals.bodyScan);
      if (unstorable) throw badRequest(`${unstorable.field} ${unstorable.message}`, [unstorable]);
      const auth = authOf(c);
      const origin = crossOriginOf(req);
      const novuScheme = Boolean(c.security.apiKeyAuth);
      // Large pages' memory is held until the operation ends, its answer written or given up.
      // Each organization's share is its environments' together. (A public operation, the inbox
      // session, has no organization before it runs.)
      const { reserve, release } = answerReservations(largeAnswers, auth?.organizationId ?? '', () => res.destroyed);
      try {
        await answer(c, req, res, (runDeps) => handler({ params, query: (c.request.query ?? {}) as never, body: c.request.requestBody as never, auth, deps: runDeps, origin, novuScheme, reserve }));
      } finally {
        release();
      }
    };
  }

  // The inbox's stream is written as server-sent events, not answered as JSON.
  const { inboxHub } = options;
  if (inboxHub) {
    const stream = inboxStreams(inboxHub, deps, options.inboxStreams);
    operations.streamInboxEvents = (c: Context, req: Request, res: Response) => stream(authOf(c), req, res);
  }

  api.register({
    ...operations,
    notFound: (_c: Context, req: Request) => {
      throw notFound(`No route matches ${req.method} ${req.originalUrl.split('?')[0]}`);
    },
    methodNotAllowed: (c: Context, req: Request) => {
      const allow = api.allowedMethods(c.request.path).join(', ');
      throw new ApiError(405, `${req.method} is not allowed on ${req.originalUrl.split('?')[0]}`, undefined, { Allow: allow });
    },
    unauthorizedHandler: (c: Context, _req: Request, res: Response) => {
      const result = authenticationOf(res);
      const inbox = isInboxOperation(c);
      // A valid API key on the inbox is refused as forbidden; a subscriber token elsewhere is no API key.
      if (result.ok && inbox) throw new ApiError(403, 'API keys do not open the inbox: send a subscriber token');
      if (result.ok) throw unauthorized('A subscriber token opens only /v1/inbox: this operation takes an API key');
      if (!inbox && (result.scheme === 'subscriber' || result.scheme === 'ticket')) throw unauthorized('A subscriber token opens only /v1/inbox: this operation takes an API key');
      if (inbox && result.reason.startsWith('Missing API key')) throw unauthorized('Missing subscriber token: send the header "Authorization: Bearer <token>"');
      // Not shaped as a subscriber token, nor a key: on the inbox, say what it takes.
      if (inbox && (result.scheme === 'bearer' || result.scheme === 'apikey')) {
        throw unauthorized('Invalid subscriber token: the inbox takes a subscriber token (a JWT from POST /v1/subscribers/{subscriberId}/inbox-tokens) as "Authorization: Bearer <token>"');
      }
      throw unauthorized(result.reason);
    },
    // Only an authorized request's body is read (or a public operation's), and only for operations
    // that take one in the contract (a body on GET or DELETE, or on a POST that takes none, is
    // ignored); validation, next, checks what was read.
    postSecurityHandler: async (c: Context, req: Request, res: Response) => {
      if (!(c.security.authorized || isPublicOperation(c)) || !METHODS_WITH_BODY.has(req.method) || !c.operation.requestBody) return;
      await readBody(req, res);
      c.request.requestBody = req.body;
    },
    validationFail: async (c: Context, req: Request, res: Response) => {
      const details = validationDetails(c.validation.errors ?? []);
      const error = badRequest(details.map((d) => `${d.field} ${d.message}`).slice(0, 5).join('; '), details);
      // Recorded under the request's Idempotency-Key like any rejection, when the key itself is
      // valid and the request could be stored (its fingerprint reads the whole body).
      const key = idempotencyKeyOf(c);
      const recordable = key !== undefined && key.length <= MAX_IDEMPOTENCY_KEY && !unstorableInput({ body: c.request.requestBody }, res.locals.bodyScan);
      if (!recordable) throw error;
      await answer(c, req, res, async () => {
        throw error;
      });
    },
  });
  api.registerSecurityHandler('bearerAuth', securityHandler('bearer'));
  api.registerSecurityHandler('apiKeyAuth', securityHandler('apikey'));
  api.registerSecurityHandler('subscriberToken', securityHandler('subscriber'));
  api.registerSecurityHandler('inboxTicket', securityHandler('ticket'));
  return api;
}

/**
 * Compiles every operation's request validators, one operation per turn of the event loop (the
 * job runner, started first, runs between), and resolves when all are compiled. The server listens
 * only then: compiled after it listened, each turn (a workflow's schemas the longest) held the
 * first requests, and a readiness probe saw a server that could not yet answer in time.
 */
export async function precompileValidators(api: OpenAPIBackend): Promise<void> {
  for (const operation of api.router.getOperations()) {
    await yieldToEventLoop();
    api.validator.getRequestValidatorsForOperation(operation.operationId!);
  }
}

/**
 * The contract's method a request is answered by: HEAD is GET without the body (Node sends no body
 * for a HEAD, whatever the handler writes), wherever GET is allowed, as HTTP asks of every server.
 */
export function contractMethod(method: string): string {
  return method === 'HEAD' ? 'GET' : method;
}

/**
 * Express glue: hand each request to the backend and anything thrown to the error handler. The
 * backend reads the request's body through `req` (postSecurityHandler) after it has begun, so the
 * request it is given reads `body` from `req` whenever it is asked.
 */
export function apiMiddleware(api: OpenAPIBackend) {
  return (req: Request, res: Response, next: (err?: unknown) => void) => {
    // Once a route matched: a request for none is a 404 or 405 whatever its query.
    if (res.locals.operation && !wellEncodedQuery(req.url)) return sendError(req, res, malformedQuery());
    // The operation the route matched (`res.locals.operation`, app.ts) goes with it: the backend
    // does not match it again; without one its own matching answers the 404 or 405.
    const request: MatchedRequest = {
      operation: res.locals.operation as Operation | undefined,
      method: contractMethod(req.method),
      path: req.path,
      query: req.query as never,
      headers: req.headers as never,
      get body(): unknown {
        return req.body;
      },
    };
    api
      .handleRequest(request, req, res)
      .catch((err: unknown) => {
        const error = err instanceof URIError ? malformedPath() : err;
        return error instanceof ApiError ? sendError(req, res, error) : next(error);
      });
  };
}
