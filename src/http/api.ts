import { createRequire } from 'node:module';
import path from 'node:path';
import type { Request, Response } from 'express';
import { OpenAPIBackend, type Context } from 'openapi-backend';
import { createAjv } from '../json-schema.js';
import type { ErrorObject } from 'ajv';
import type { Deps } from '../deps.js';
import { ROOT } from '../paths.js';
import { badRequest, ApiError, notFound, unauthorized } from '../errors.js';
import { sendError } from './errors.js';
import type { ErrorDetail } from '../contract.js';
import type { Authentication } from './security.js';
import type { Auth, OperationId } from '../contract.js';
import type { HandlerContext, OperationHandlers } from './types.js';
import { idempotencyKeyOf, idempotent, MAX_IDEMPOTENCY_KEY, type HandlerReply } from './idempotency.js';

export const SPEC_PATH = path.join(ROOT, 'generated', 'openapi.yaml');

/**
 * Ajv's discriminator support finds each branch by its `type` const and refuses an explicit
 * `mapping`, which the contract keeps for generated types and the docs: drop mappings from the
 * backend's own dereferenced copy before any validator is compiled.
 */
class HeraldBackend extends OpenAPIBackend {
  override async init(): Promise<this> {
    await super.init();
    dropDiscriminatorMappings(this.definition, new Set());
    // openapi-backend flattens the whole dereferenced contract into its operation list on every
    // lookup, and compiles a RegExp per path template on every match. The definition never changes
    // after init: flatten it once and match against a table built once, by the same rules.
    const operations = this.router.getOperations();
    const routes = new RouteTable(operations);
    this.router.getOperations = () => operations;
    this.router.matchOperation = ((req: { method: string; path: string }, strict?: boolean) => routes.match(this.router, req, strict)) as never;
    this.requestShapes = new Map(operations.map((operation) => [operation, requestShapeOf(operation)]));
    this.router.parseRequest = repeatableParse(this.router, this.requestShapes);
    return this;
  }

  private requestShapes = new Map<Operation, RequestShape>();

  /**
   * openapi-backend's `handleRequest`, for the hooks Herald registers (404, 405, 401, 400 and the
   * operations), parsing the request once. Its own parses the request three or four times (before
   * routing, after, again inside validation, and again with the coerced query) and copies it each
   * time; here the one parsed request is validated and handed on, with the coerced query as it
   * would be. Without a 401 or 400 hook, with any other hook registered, or with a validation
   * predicate, its own runs.
   */
  override async handleRequest(req: RawRequest, ...handlerArgs: unknown[]): Promise<unknown> {
    const handlers = this.handlers;
    const unauthorized = handlers.unauthorizedHandler;
    const validationFail = handlers['400'] ?? handlers.validationFail;
    const ownHooksOnly = unauthorized && validationFail && !OTHER_HOOKS.some((hook) => handlers[hook]);
    if (!this.initialized || typeof this.validate !== 'boolean' || !ownHooksOnly) return super.handleRequest(req, ...handlerArgs);
    const context = { api: this } as unknown as Context;
    let operation: Operation;
    try {
      operation = (req as MatchedRequest).operation ?? (this.router.matchOperation(req, true) as Operation);
    } catch (err) {
      context.request = this.router.parseRequest(req);
      const notFoundHandler = handlers['404'] ?? handlers.notFound;
      const handler = err instanceof Error && err.message.startsWith('405') ? (handlers['405'] ?? handlers.methodNotAllowed ?? notFoundHandler) : notFoundHandler;
      if (!handler) throw err;
      return handler(context, ...handlerArgs);
    }
    const operationId = operation.operationId!;
    context.operation = operation as Context['operation'];
    const parsed = this.router.parseRequest(req, operation);
    context.request = parsed;

    const requirements = (operation.security ?? []) as Array<Record<string, unknown>>;
    const results: Record<string, unknown> = {};
    for (const requirement of requirements) {
      for (const name of Object.keys(requirement)) {
        if (name in results) continue;
        results[name] = await this.runSecurityHandler(name, context, handlerArgs);
      }
    }
    const satisfied = (name: string) => {
      const result = results[name];
      return Boolean(result) && !(typeof result === 'object' && (result as { error?: unknown }).error);
    };
    const authorized = requirements.some((requirement) => Object.keys(requirement).every(satisfied));
    context.security = { ...results, authorized };
    if (!authorized && requirements.length > 0) return unauthorized(context, ...handlerArgs);

    if (this.validate) {
      context.validation = this.validateParsed(req, parsed, operation);
      if (context.validation.errors) return validationFail(context, ...handlerArgs);
      if (this.validator.coerceTypes) context.request = { ...parsed, query: context.validation.coerced.query };
    }
    const handler = handlers[operationId];
    if (handler) return handler(context, ...handlerArgs);
    const notImplemented = handlers['501'] ?? handlers.notImplemented;
    if (!notImplemented) throw Error(`501-notImplemented: ${operationId} no handler registered`);
    return notImplemented(context, ...handlerArgs);
  }

  /** A security handler's result; a throw or rejection is a failed check, as openapi-backend records it. */
  private async runSecurityHandler(name: string, context: Context, handlerArgs: unknown[]): Promise<unknown> {
    const securityHandler = this.securityHandlers[name];
    if (!securityHandler) return undefined;
    try {
      const result: unknown = securityHandler(context, ...handlerArgs);
      return result instanceof Promise ? await result : result;
    } catch (error) {
      return { error: error || new Error('security handler rejected') };
    }
  }

  /**
   * openapi-backend's `validateRequest` for a request already parsed: the same parameters to the
   * same compiled validators, each part a copy (ajv coerces in place) so the parsed request keeps
   * what was sent, as openapi-backend's fresh parse inside validation does.
   */
  private validateParsed(req: RawRequest, parsed: ParsedRequest, operation: Operation): ValidationResult {
    const errors: ErrorObject[] = [];
    const shape = this.requestShapes.get(operation) ?? requestShapeOf(operation);
    const query = parsed.query && (copyOf(parsed.query) as Record<string, unknown>);
    if (query) {
      for (const name of shape.arrays) if (typeof query[name] === 'string') query[name] = [query[name]];
    }
    const parameters: Record<string, unknown> = {};
    const parts: Array<[string, unknown]> = [['path', parsed.params], ['query', query], ['header', parsed.headers], ['cookie', parsed.cookies]];
    for (const [part, value] of parts) {
      if (value === null || value === undefined) continue;
      parameters[part] = part === 'query' ? value : { ...(value as object) };
    }
    if (typeof req.body !== 'object' && req.body !== undefined && shape.jsonBodyOnly) {
      try {
        JSON.parse(`${req.body}`);
      } catch (err) {
        if (err instanceof Error) errors.push({ keyword: 'parse', instancePath: '', schemaPath: '#/requestBody', params: [], message: err.message } as never);
      }
    }
    if (shape.jsonParameters.length > 0) {
      const rawQuery = this.router.parseRequestQuery(req) as Record<string, unknown>;
      for (const name of shape.jsonParameters) {
        if (typeof rawQuery[name] !== 'string') continue;
        try {
          JSON.parse(rawQuery[name] as string);
        } catch (err) {
          if (err instanceof Error) errors.push({ keyword: 'parse', instancePath: `/query/${name}`, schemaPath: `#/parameters/${name}`, params: [], message: err.message } as never);
        }
      }
    }
    const rawContentType = parsed.headers['content-type'];
    const contentType = String((Array.isArray(rawContentType) ? rawContentType[0] : rawContentType) || '').split(';')[0].trim().toLowerCase();
    if (typeof parsed.requestBody === 'object' || contentType === 'application/json') parameters.requestBody = parsed.requestBody;
    const coerced = { ...req } as ValidationResult['coerced'];
    for (const validate of this.validator.getRequestValidatorsForOperation(operation.operationId!) ?? []) {
      validate(parameters);
      if (validate.errors) errors.push(...validate.errors);
      else if (this.validator.coerceTypes) {
        coerced.query = parameters.query as never;
        coerced.params = parameters.path as never;
      }
    }
    return errors.length > 0 ? { valid: false, errors, coerced } : { valid: true, errors: null, coerced };
  }
}

/** Hooks of openapi-backend's `handleRequest` that Herald's own does not run. */
const OTHER_HOOKS = ['preRoutingHandler', 'postRoutingHandler', 'postSecurityHandler', 'preOperationHandler', 'postResponseHandler'];

type ParsedRequest = ReturnType<Router['parseRequest']>;
type ValidationResult = Context['validation'];

/** What parsing and validating a request need to know of an operation's query parameters and body, worked out once. */
interface RequestShape {
  /** Query parameters whose schema is an array: a single value is made a list of one. */
  arrays: string[];
  /** Query parameters sent as JSON (`content: application/json`), checked to parse. */
  jsonParameters: string[];
  /** Some query parameter needs openapi-backend's decoding (a `content` media type, a non-exploded array). */
  decodedQuery: boolean;
  /** The body's only media type is JSON: a string body must parse. */
  jsonBodyOnly: boolean;
}

function requestShapeOf(operation: Operation): RequestShape {
  const parameters = (operation.parameters ?? []) as Array<{
    in?: string;
    name: string;
    schema?: { type?: unknown };
    content?: Record<string, unknown>;
    explode?: boolean;
    $ref?: string;
  }>;
  const inQuery = parameters.filter((parameter) => !('$ref' in parameter) && parameter.in === 'query');
  const formats = Object.keys(((operation.requestBody ?? {}) as { content?: object }).content ?? {});
  return {
    arrays: inQuery.filter((parameter) => parameter.schema?.type === 'array').map((parameter) => parameter.name),
    jsonParameters: inQuery.filter((parameter) => parameter.content?.['application/json']).map((parameter) => parameter.name),
    decodedQuery: inQuery.some((parameter) => parameter.content !== undefined || parameter.explode === false),
    jsonBodyOnly: formats.length === 1 && formats[0] === 'application/json',
  };
}

type Router = OpenAPIBackend['router'];
type RawRequest = Parameters<Router['parseRequest']>[0];
/** A request its caller has already matched to an operation (apiMiddleware): it is not matched again. */
type MatchedRequest = RawRequest & { operation?: Operation };

// The path matcher openapi-backend's router uses, loaded from openapi-backend's own dependencies.
const requireFromBackend = createRequire(createRequire(import.meta.url).resolve('openapi-backend'));
const { default: bath } = requireFromBackend('bath-es5') as {
  default: (template: string) => { params: (path: string) => Record<string, string> | null };
};

/**
 * openapi-backend's `parseRequest` without the work that gives the same answer each time (its
 * `handleRequest` ran it three or four times a request; Herald's runs it once): it compiled a path
 * template's matcher on every call, and copied an object query by serializing it first and then
 * deep-cloning it through lodash. Here each operation's matcher is made once, at init, and the
 * query and the (already lower-case, as Node gives them) headers are copied plainly. The answer is
 * the one openapi-backend's parser gives; requests with cookies or a query string, and operations
 * whose query parameters need its decoding (RequestShape.decodedQuery), go to its own parser.
 */
function repeatableParse(router: Router, shapes: Map<Operation, RequestShape>): Router['parseRequest'] {
  const parse = router.parseRequest.bind(router);
  // Per operation: its path template's matcher, or none when its query needs openapi-backend's decoding.
  const matchers = new Map<Operation, (path: string) => Record<string, string> | null>();
  for (const [operation, shape] of shapes) if (!shape.decodedQuery) matchers.set(operation, bath(operation.path).params);

  return (req: RawRequest, operation?: Operation) => {
    const { query, headers = {}, body } = req;
    const lowerCaseHeaders: Record<string, string | string[]> = {};
    for (const name in headers) lowerCaseHeaders[name.toLowerCase()] = headers[name];
    const plain = query !== null && typeof query === 'object' && lowerCaseHeaders.cookie === undefined && (!body || typeof body === 'object');
    const matcher = operation && matchers.get(operation);
    if (!plain || (operation && !matcher)) return parse(req, operation);
    const normalized = router.normalizeRequest(req);
    const params = matcher ? (matcher(router.normalizePath(normalized.path)) ?? {}) : {};
    return { ...normalized, params, headers: lowerCaseHeaders, query: copyOf(query) as typeof query, cookies: {}, requestBody: body };
  };
}

/** A deep copy of parsed query values: strings, numbers, booleans, arrays and plain objects. */
function copyOf(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(copyOf);
  if (value === null || typeof value !== 'object') return value;
  const copy: Record<string, unknown> = {};
  for (const key in value) copy[key] = copyOf((value as Record<string, unknown>)[key]);
  return copy;
}

type Operation = ReturnType<OpenAPIBackend['router']['getOperations']>[number];

/**
 * openapi-backend's routing rules, precomputed: an exact path first; then path templates, the most
 * specific (longest once parameters are removed) first; a path that matches but not its method is 405.
 */
class RouteTable {
  private readonly exact = new Map<string, Operation[]>();
  private readonly templates: Array<{ pattern: RegExp; operation: Operation }>;

  constructor(operations: Operation[]) {
    for (const operation of operations) {
      const list = this.exact.get(operation.path) ?? [];
      list.push(operation);
      this.exact.set(operation.path, list);
    }
    const specificity = (operation: Operation) => operation.path.replace(/\{.*?\}/g, '').length;
    this.templates = operations
      .filter((operation) => operation.path.includes('{'))
      .sort((a, b) => specificity(b) - specificity(a))
      .map((operation) => ({ pattern: templatePattern(operation.path), operation }));
  }

  match(router: OpenAPIBackend['router'], request: { method: string; path: string }, strict?: boolean): Operation | undefined {
    const fail = (message: string) => {
      if (strict) throw new Error(message);
      return undefined;
    };
    // The path and method as the router's normalizeRequest makes them, without copying the request.
    let requestPath = request.path?.trim() || '';
    if (!requestPath.startsWith('/')) requestPath = `/${requestPath}`;
    const path = router.normalizePath(requestPath.split('?')[0]);
    const method = request.method.trim().toLowerCase();
    const exact = this.exact.get(path)?.find((operation) => operation.method === method);
    if (exact) return exact;
    let pathMatched = this.exact.has(path);
    for (const { pattern, operation } of this.templates) {
      if (!pattern.test(path)) continue;
      if (operation.method === method) return operation;
      pathMatched = true;
    }
    return pathMatched
      ? fail('405-methodNotAllowed: this method is not registered for the route')
      : fail('404-notFound: no route matches request');
  }
}

/** `/subscribers/{subscriberId}` → /^\/subscribers\/[^/]+$/, literal parts escaped. */
function templatePattern(template: string): RegExp {
  const escape = (literal: string) => literal.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  return new RegExp(`^${template.split(/\{[^}]+\}/).map(escape).join('[^/]+')}$`);
}

function dropDiscriminatorMappings(node: unknown, seen: Set<object>): void {
  if (!node || typeof node !== 'object' || seen.has(node)) return;
  seen.add(node);
  const discriminator = (node as { discriminator?: { mapping?: unknown } }).discriminator;
  if (discriminator && typeof discriminator === 'object') delete discriminator.mapping;
  for (const value of Object.values(node)) dropDiscriminatorMappings(value, seen);
}

/**
 * The backend alone, for routing and response checks outside a server (tests, the mock server).
 *
 * `quick` does two things we want: it skips openapi-backend's own check of the definition, which
 * knows only OpenAPI 3.0 and, failing on our 3.1 contract, would leave the router empty (Redocly
 * lints the contract instead); and it compiles an operation's validators on first use rather than
 * all at once, which costs about 6 s of Ajv compilation up front. Tests may give another definition.
 */
export function createBackend(definition: string | OpenAPIBackend['inputDocument'] = SPEC_PATH): OpenAPIBackend {
  return new HeraldBackend({
    definition,
    apiRoot: '/',
    quick: true,
    coerceTypes: true,
    // The contract's own schemas are linted by Redocly: checking each against the meta-schema again
    // would compile that meta-schema for every validator openapi-backend makes.
    customizeAjv: (_ajv, ajvOpts) => createAjv({ ...ajvOpts, validateSchema: false }) as never,
  });
}

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

/** How deep a request may nest: far beyond any real payload, far within what the code that stores it can recurse through. */
export const MAX_NESTING = 64;

// NUL, which PostgreSQL's text cannot hold, and a UTF-16 surrogate without its other half, which
// is not Unicode and comes back from the database as something else than was sent.
const NOT_TEXT = /\u0000|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

/**
 * What the schema cannot say about a valid request but storing it needs: every string (and object
 * key) is Unicode text without NUL, and nothing nests deeper than MAX_NESTING (JSON.stringify
 * would overflow the stack). Iterative, so a hostile depth cannot overflow it either.
 */
export function unstorableInput(input: Record<string, unknown>): ErrorDetail | undefined {
  const pending: Array<{ value: unknown; field: string; depth: number }> = Object.entries(input).map(([field, value]) => ({ value, field, depth: 0 }));
  while (pending.length > 0) {
    const { value, field, depth } = pending.pop()!;
    if (typeof value === 'string') {
      if (NOT_TEXT.test(value)) return { field, message: 'must not contain NUL or an unpaired UTF-16 surrogate' };
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
 * The contract's router and validator in front of the handlers: unknown paths 404, wrong methods
 * 405, requests without a valid key 401, requests that break the schema 400, and only then the
 * operation's handler, whose reply is written as JSON.
 */
export async function createApi(handlers: OperationHandlers, deps: Deps): Promise<OpenAPIBackend> {
  const api = createBackend();
  const authOf = (res: Response): Authentication => res.locals.authentication;
  /**
   * Sends what `run` answers. With an Idempotency-Key it runs in a transaction that also records
   * its answer, a 4xx it throws included, or a repeat replays the recorded one (idempotency.ts).
   */
  const answer = async (c: Context, req: Request, res: Response, auth: Auth, run: (runDeps: Deps) => Promise<HandlerReply>) => {
    const key = idempotencyKeyOf(c);
    const reply = key
      ? await idempotent(deps, { environmentId: auth.environmentId, key, method: req.method, path: req.originalUrl.split('?')[0], body: c.request.requestBody }, run)
      : await run(deps);
    if (reply.headers) res.set(reply.headers);
    sendJson(res, reply.status, reply.body);
  };

  api.register({
    notFound: (_c: Context, req: Request) => {
      throw notFound(`No route matches ${req.method} ${req.originalUrl.split('?')[0]}`);
    },
    methodNotAllowed: (_c: Context, req: Request) => {
      throw new ApiError(405, `${req.method} is not allowed on ${req.originalUrl.split('?')[0]}`);
    },
    unauthorizedHandler: (_c: Context, _req: Request, res: Response) => {
      const result = authOf(res);
      throw unauthorized(result.ok ? 'This API key cannot be used here' : result.reason);
    },
    validationFail: async (c: Context, req: Request, res: Response) => {
      const details = validationDetails(c.validation.errors ?? []);
      const error = badRequest(details.map((d) => `${d.field} ${d.message}`).slice(0, 5).join('; '), details);
      // Recorded under the request's Idempotency-Key like any rejection, when the key itself is
      // valid and the request could be stored (its fingerprint reads the whole body).
      const result = authOf(res);
      const key = idempotencyKeyOf(c);
      const recordable = result.ok && key !== undefined && key.length <= MAX_IDEMPOTENCY_KEY && !unstorableInput({ body: c.request.requestBody });
      if (!recordable) throw error;
      await answer(c, req, res, result.auth, async () => {
        throw error;
      });
    },
  });
  api.registerSecurityHandler('bearerAuth', (_c: Context, _req: Request, res: Response) => {
    const result = authOf(res);
    return result.ok && result.scheme === 'bearer';
  });
  api.registerSecurityHandler('apiKeyAuth', (_c: Context, _req: Request, res: Response) => {
    const result = authOf(res);
    return result.ok && result.scheme === 'apikey';
  });

  for (const operationId of Object.keys(handlers) as OperationId[]) {
    const handler = handlers[operationId] as (ctx: HandlerContext<OperationId>) => Promise<{ status: number; body?: unknown; headers?: Record<string, string> }>;
    api.register(operationId, async (c: Context, req: Request, res: Response) => {
      const result = authOf(res);
      if (!result.ok) throw unauthorized(result.reason);
      // The router has already decoded each parameter once; decoding again would turn the id
      // "a%2Fb" (sent as a%252Fb) into "a/b", another resource, and make any id with a % unreachable.
      const params = c.request.params as never;
      const unstorable = unstorableInput({ path: c.request.params, query: c.request.query, body: c.request.requestBody });
      if (unstorable) throw badRequest(`${unstorable.field} ${unstorable.message}`, [unstorable]);
      await answer(c, req, res, result.auth, (runDeps) =>
        handler({ params, query: (c.request.query ?? {}) as never, body: c.request.requestBody as never, auth: result.auth, deps: runDeps }),
      );
    });
  }
  await api.init();
  return api;
}

/**
 * Compiles every operation's request validators, one operation per turn of the event loop, so a
 * server that has just started answers requests meanwhile and none of them pays the compile cost.
 */
export function precompileValidators(api: OpenAPIBackend): void {
  const operationIds = api.router.getOperations().map((operation) => operation.operationId!);
  const next = () => {
    const operationId = operationIds.shift();
    if (!operationId) return;
    api.validator.getRequestValidatorsForOperation(operationId);
    setImmediate(next);
  };
  setImmediate(next);
}

/**
 * Writes an operation's answer as the contract gives it: this status and this JSON (or no body),
 * whatever the request's conditions. Express's `res.json` hashes every body into an ETag and turns
 * a 2xx into a bodiless 304 for a request whose If-None-Match matches it (or is `*`): a status no
 * operation lists.
 */
export function sendJson(res: Response, status: number, body: unknown): void {
  res.statusCode = status;
  if (body === undefined) {
    res.end();
    return;
  }
  const text = JSON.stringify(body);
  res.setHeader('Content-Type', 'application/json; charset=utf-8');
  res.setHeader('Content-Length', Buffer.byteLength(text));
  res.end(text);
}

/**
 * Express glue: hand each request to the backend and anything thrown to the error handler. The
 * operation the route matched (`res.locals.operation`, app.ts) goes with it; without one the
 * backend's own matching answers the 404 or 405.
 */
export function apiMiddleware(api: OpenAPIBackend) {
  return (req: Request, res: Response, next: (err?: unknown) => void) => {
    const operation = res.locals.operation as Operation | undefined;
    const request: MatchedRequest = { method: req.method, path: req.path, body: req.body, query: req.query as never, headers: req.headers as never, operation };
    api
      .handleRequest(request, req, res)
      .catch((err: unknown) => {
        const error = err instanceof URIError ? malformedPath() : err;
        return error instanceof ApiError ? sendError(req, res, error) : next(error);
      });
  };
}
