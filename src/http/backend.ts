// Herald's fork of openapi-backend's request handling, kept by the rule of issue 22 (a fork only if
// it wins more than 10% on the trigger or GET row): `npm run bench -- --quick --only trigger,get`,
// run A (this fork, 5025147) and B (a stock OpenAPIBackend with the same registered handlers)
// alternately A,B,A,B in one session on a 2-core machine under a load average of ~13:
//   CPU per op, GET /v1/subscribers/:id   fork 0.876, 0.510 ms   stock 4.93, 3.89 ms   (stock 5-8× the fork)
//   CPU per op, POST /v1/events/trigger   fork 3.81, 2.17 ms     stock 4.13, 4.61 ms
// Stock openapi-backend flattens the whole dereferenced contract into its operation list on every
// route match (1.3 ms each here) and parses a request three or four times. Everything else of the
// HTTP layer (handlers registered by operationId, security handlers, the 401/400/404/405 hooks)
// is used as openapi-backend's authors intend, in api.ts; only this file reaches into its internals.
import { createRequire } from 'node:module';
import { OpenAPIBackend, type Context } from 'openapi-backend';
import type { ErrorObject } from 'ajv';
import type { Ajv2020 } from 'ajv/dist/2020.js';
import { createAjv, firstThenAll, type Validate } from '../json-schema.js';
import { CONTRACT_PATH, contractDocument } from '../contract.js';

/**
 * Ajv's discriminator support finds each branch by its `type` const and refuses an explicit
 * `mapping`, which the contract keeps for generated types and the docs: drop mappings from the
 * backend's own dereferenced copy before any validator is compiled.
 */
export class HeraldBackend extends OpenAPIBackend {
  override async init(): Promise<this> {
    await super.init();
    dropDiscriminatorMappings(this.definition, new Set());
    // openapi-backend flattens the whole dereferenced contract into its operation list on every
    // lookup, and compiles a RegExp per path template on every match. The definition never changes
    // after init: flatten it once and match against a table built once, by the same rules.
    const operations = this.router.getOperations();
    const routes = new RouteTable(operations);
    this.routes = routes;
    this.router.getOperations = () => operations;
    this.router.matchOperation = ((req: { method: string; path: string }, strict?: boolean) => routes.match(this.router, req, strict)) as never;
    this.requestShapes = new Map(operations.map((operation) => [operation, requestShapeOf(operation)]));
    this.router.parseRequest = repeatableParse(this.router, this.requestShapes);
    return this;
  }

  private requestShapes = new Map<Operation, RequestShape>();
  private routes?: RouteTable;

  /** The methods some operation answers at `path` (a 405's `Allow`), in upper case. */
  allowedMethods(path: string): string[] {
    return this.routes ? this.routes.methodsAt(this.router, path) : [];
  }

  /**
   * By validator, the allErrors instance beside the one that compiled it, with its options (the
   * parameters' coerce types, a body's do not): createBackend's customizeAjv makes both.
   */
  readonly listingAjvOf = new WeakMap<object, Ajv2020>();
  private readonly listings = new WeakMap<object, Validate>();

  /** The same validator listing every error, compiled when a small request first fails it. */
  private listingOf(validate: Validate): Validate {
    let all = this.listings.get(validate);
    if (!all) {
      all = (this.listingAjvOf.get(validate) ?? createAjv({ allErrors: true })).compile(validate.schema as object) as Validate;
      this.listings.set(validate, all);
    }
    return all;
  }

  /**
   * openapi-backend's `handleRequest`, for the hooks Herald registers (404, 405, postSecurityHandler,
   * 401, 400 and the operations), parsing the request once. Its own parses the request three or four times (before
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
    let parsed = this.router.parseRequest(req, operation);
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
    if (handlers.postSecurityHandler) {
      await handlers.postSecurityHandler(context, ...handlerArgs);
      // It may have read the body (api.ts does): validation and the handler take the request as it
      // is now, the 401 and 400 hooks the context as it left it, as openapi-backend's own does.
      if (req.body !== parsed.body) parsed = this.router.parseRequest(req, operation);
    }
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
      for (const name of shape.integers) {
        if (query[name] === undefined || (typeof query[name] === 'string' && WHOLE_NUMBER.test(query[name]))) continue;
        errors.push({ keyword: 'type', instancePath: `/query/${name}`, schemaPath: `#/parameters/${name}`, params: { type: 'integer' }, message: 'must be a whole number written in digits' });
        delete query[name];
      }
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
    // What openapi-backend's validation answers as `coerced`: the request's fields (not a spread of
    // `req`, whose body is a getter), the coerced query and path parameters put in below.
    const coerced = { method: req.method, path: req.path, headers: req.headers, query: req.query, body: req.body } as ValidationResult['coerced'];
    for (const validate of this.validator.getRequestValidatorsForOperation(operation.operationId!) ?? []) {
      const found = firstThenAll(validate, () => this.listingOf(validate), parameters);
      // One at a time: a small body can still have thousands of errors, past what a spread passes.
      if (found) for (const error of found) errors.push(error);
      else if (this.validator.coerceTypes) {
        coerced.query = parameters.query as never;
        coerced.params = parameters.path as never;
      }
    }
    return errors.length > 0 ? { valid: false, errors, coerced } : { valid: true, errors: null, coerced };
  }
}

/** Hooks of openapi-backend's `handleRequest` that Herald's own does not run. */
const OTHER_HOOKS = ['preRoutingHandler', 'postRoutingHandler', 'preOperationHandler', 'postResponseHandler'];

type ParsedRequest = ReturnType<Router['parseRequest']>;
type ValidationResult = Context['validation'];

/** What parsing and validating a request need to know of an operation's query parameters and body, worked out once. */
interface RequestShape {
  /** Query parameters whose schema is an array: a single value is made a list of one. */
  arrays: string[];
  /** Query parameters whose schema is an integer: only digits (and a minus) are one; ajv's coercion would also take `0x1`, `1e1` or ` 1`. */
  integers: string[];
  /** Query parameters sent as JSON (`content: application/json`), checked to parse. */
  jsonParameters: string[];
  /** Some query parameter needs openapi-backend's decoding (a `content` media type, a non-exploded array). */
  decodedQuery: boolean;
  /** The body's only media type is JSON: a string body must parse. */
  jsonBodyOnly: boolean;
}

const WHOLE_NUMBER = /^-?[0-9]+$/;

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
    integers: inQuery.filter((parameter) => parameter.schema?.type === 'integer').map((parameter) => parameter.name),
    jsonParameters: inQuery.filter((parameter) => parameter.content?.['application/json']).map((parameter) => parameter.name),
    decodedQuery: inQuery.some((parameter) => parameter.content !== undefined || parameter.explode === false),
    jsonBodyOnly: formats.length === 1 && formats[0] === 'application/json',
  };
}

type Router = OpenAPIBackend['router'];
type RawRequest = Parameters<Router['parseRequest']>[0];
/** A request its caller has already matched to an operation (apiMiddleware): it is not matched again. */
export type MatchedRequest = RawRequest & { operation?: Operation };

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
    // The fields openapi-backend's parser answers, built without copying `req` (whose body is a
    // getter, apiMiddleware: a spread of it takes V8's slow path on every request).
    const path = normalRequestPath(req.path);
    const params = matcher ? (matcher(router.normalizePath(path)) ?? {}) : {};
    return { method: req.method.trim().toLowerCase(), path, body, query: copyOf(query) as typeof query, headers: lowerCaseHeaders, params, cookies: {}, requestBody: body };
  };
}

/** A request's path as openapi-backend's `normalizeRequest` makes it: trimmed, with a leading slash, without a query string. */
function normalRequestPath(path: string | undefined): string {
  const trimmed = path?.trim() || '';
  return (trimmed.startsWith('/') ? trimmed : `/${trimmed}`).split('?')[0];
}

/** A deep copy of parsed query values: strings, numbers, booleans, arrays and plain objects. */
function copyOf(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(copyOf);
  if (value === null || typeof value !== 'object') return value;
  const copy: Record<string, unknown> = {};
  for (const key in value) copy[key] = copyOf((value as Record<string, unknown>)[key]);
  return copy;
}

export type Operation = ReturnType<OpenAPIBackend['router']['getOperations']>[number];

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
    const path = router.normalizePath(normalRequestPath(request.path));
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

  /** The methods of every operation whose path is `path` or whose template matches it, as `match` reads it. */
  methodsAt(router: OpenAPIBackend['router'], requestPath: string): string[] {
    const path = router.normalizePath(normalRequestPath(requestPath));
    const methods = new Set((this.exact.get(path) ?? []).map((operation) => operation.method));
    for (const { pattern, operation } of this.templates) if (pattern.test(path)) methods.add(operation.method);
    // A GET is answered to HEAD too (api.ts, contractMethod).
    if (methods.has('get')) methods.add('head');
    return [...methods].map((method) => method.toUpperCase()).sort();
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
 * A backend's copy of the contract (contract.ts). Given the file's path instead, openapi-backend
 * would read and parse it twice per backend, which the tests, starting dozens of backends, paid for
 * dozens of times. Each backend needs an object of its own: given an object, openapi-backend
 * dereferences it with dereference-json-schema, which remembers its answer by that object, and the
 * same answer would be every backend's definition, mutated by each init. That dereferencing drops
 * whatever stands beside a `$ref` but a description (test/unit/contract-refs.test.ts keeps the bundle so).
 */
function backendDocument(): OpenAPIBackend['inputDocument'] {
  return contractDocument() as OpenAPIBackend['inputDocument'];
}

/**
 * The backend alone, loaded and ready for handlers, for routing and response checks outside a
 * server too (tests, the mock server, the benchmark's stack floor).
 *
 * `quick` does two things we want: it skips openapi-backend's own check of the definition, which
 * knows only OpenAPI 3.0 and, failing on our 3.1 contract, would leave the router empty (Redocly
 * lints the contract instead); and it compiles an operation's validators on first use rather than
 * all at once, with the event loop held, when the backend is made (precompileValidators, api.ts,
 * compiles them a turn each before the server listens). Tests may give another definition.
 */
export async function createBackend(definition: string | OpenAPIBackend['inputDocument'] = CONTRACT_PATH): Promise<HeraldBackend> {
  const backend = new HeraldBackend({
    definition: definition === CONTRACT_PATH ? backendDocument() : definition,
    apiRoot: '/',
    quick: true,
    coerceTypes: true,
    // The contract's own schemas are linted by Redocly: checking each against the meta-schema again
    // would compile that meta-schema for every validator openapi-backend makes.
    // Requests are validated to their first error, and small ones again to list them all (firstThenAll).
    // Each validation context (parameters, body, …) has options of its own: its listing instance
    // must have them too, or the listing pass would call a query's "1" no integer.
    customizeAjv: (_ajv, ajvOpts) => {
      const first = createAjv({ ...ajvOpts, validateSchema: false, allErrors: false });
      const listing = createAjv({ ...ajvOpts, validateSchema: false, allErrors: true });
      const compile = first.compile.bind(first);
      first.compile = ((schema: object) => {
        const validate = compile(schema);
        backend.listingAjvOf.set(validate, listing);
        return validate;
      }) as typeof first.compile;
      return first as never;
    },
  });
  return backend.init();
}
