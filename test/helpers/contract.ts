import type { OpenAPIBackend, Operation } from 'openapi-backend';
import type { RequestHandler } from 'express';
import { createBackend } from '../../src/http/backend.js';
import { createAjv } from '../../src/json-schema.js';

let backendPromise: Promise<OpenAPIBackend> | undefined;
function contract(): Promise<OpenAPIBackend> {
  backendPromise ??= (async () => {
    const backend = await createBackend();
    return backend;
  })();
  return backendPromise;
}

export interface SeenResponse {
  method: string;
  path: string;
  status: number;
  headers: Record<string, unknown>;
  body: string;
}

/**
 * Every way a response can break the contract: an undocumented status, a body that does not match
 * the documented schema (or that is there when none is documented), a wrong content type. Requests
 * that match no operation must still answer 404/405 with the error body.
 */
export async function contractViolations(response: SeenResponse): Promise<string[]> {
  const backend = await contract();
  const where = `${response.method} ${response.path} → ${response.status}`;
  if (!response.path.startsWith('/v1/') || response.path === '/v1/openapi.yaml') return [];
  const apiPath = response.path.slice('/v1'.length);
  const operation = backend.router.matchOperation({ method: response.method, path: apiPath, headers: {} }, false) as
    | Operation
    | undefined;
  const isJson = String(response.headers['content-type'] ?? '').startsWith('application/json');
  const parsed = response.body ? safeParse(response.body) : undefined;

  if (response.method === 'HEAD') return [];
  // CORS preflights of the inbox are answered before the contract (http/inbox-cors.ts): 204, or 403 with the error body.
  if (response.method === 'OPTIONS' && apiPath.startsWith('/inbox/') && response.status === 204) return response.body ? [`${where}: a preflight with a body`] : [];
  if (response.method === 'OPTIONS' && apiPath.startsWith('/inbox/') && response.status === 403) return errorBodyViolations(backend, where, isJson, parsed);
  if (!operation) {
    // The rate limit runs before routing, so an unmatched request may also be refused with 429.
    if (![404, 405, 429].includes(response.status)) return [`${where}: no operation matches, yet the status is not 404, 405 or 429`];
    return errorBodyViolations(backend, where, isJson, parsed);
  }
  const documented = operation.responses?.[String(response.status)] as { content?: Record<string, unknown> } | undefined;
  if (!documented) return [`${where}: status ${response.status} is not documented for ${operation.operationId}`];
  if (!documented.content) {
    return response.body ? [`${where}: ${operation.operationId} documents no body for ${response.status}, yet one was sent`] : [];
  }
  // A stream the server ended (a failed open, a stop): each event's data is one documented object.
  const contentType = String(response.headers['content-type'] ?? '');
  const stream = documented.content['text/event-stream'] as { schema: object } | undefined;
  if (contentType.startsWith('text/event-stream') && stream) return eventViolations(where, stream.schema, response.body);
  if (!isJson) return [`${where}: content-type is ${contentType}, not application/json`];
  if (parsed === undefined) return [`${where}: the body is not JSON: ${response.body.slice(0, 200)}`];
  const result = backend.validateResponse(parsed, operation, response.status);
  const problems = (result.errors ?? []).map((e) => `${where}: body${e.instancePath} ${e.message}`);
  if (response.status === 429 && response.headers['retry-after'] === undefined) problems.push(`${where}: 429 without Retry-After`);
  return problems;
}

let errorValidator: ReturnType<ReturnType<typeof createAjv>['compile']> | undefined;
function errorBodyViolations(backend: OpenAPIBackend, where: string, isJson: boolean, parsed: unknown): string[] {
  if (!isJson || parsed === undefined) return [`${where}: the error is not a JSON body`];
  if (!errorValidator) {
    const ajv = createAjv();
    ajv.addSchema({ $id: 'contract', components: backend.definition.components });
    errorValidator = ajv.compile({ $ref: 'contract#/components/schemas/Error' });
  }
  return errorValidator(parsed) ? [] : (errorValidator.errors ?? []).map((e) => `${where}: error body${e.instancePath} ${e.message}`);
}

const eventValidators = new WeakMap<object, ReturnType<ReturnType<typeof createAjv>['compile']>>();
function eventViolations(where: string, schema: object, body: string): string[] {
  let validate = eventValidators.get(schema);
  if (!validate) eventValidators.set(schema, (validate = createAjv().compile(schema)));
  const problems: string[] = [];
  for (const line of body.split('\n').filter((l) => l.startsWith('data:'))) {
    const data = safeParse(line.slice('data:'.length));
    if (data === undefined) problems.push(`${where}: event data is not JSON: ${line.slice(0, 200)}`);
    else if (!validate(data)) problems.push(...(validate.errors ?? []).map((e) => `${where}: event data${e.instancePath} ${e.message}`));
  }
  return problems;
}

function safeParse(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/**
 * Express middleware for tests: it records every response the app sends and checks it against
 * the contract, collecting what does not match in `violations`.
 */
export function contractRecorder(violations: string[], pending: Set<Promise<void>>): RequestHandler {
  return (req, res, next) => {
    const chunks: Buffer[] = [];
    const write = res.write.bind(res);
    const end = res.end.bind(res);
    res.write = ((chunk: unknown, ...rest: unknown[]) => {
      if (chunk) chunks.push(Buffer.from(chunk as string));
      return (write as (...args: unknown[]) => boolean)(chunk, ...rest);
    }) as typeof res.write;
    res.end = ((chunk?: unknown, ...rest: unknown[]) => {
      if (chunk && typeof chunk !== 'function') chunks.push(Buffer.from(chunk as string));
      return (end as (...args: unknown[]) => typeof res)(chunk, ...rest);
    }) as typeof res.end;
    res.on('finish', () => {
      const check = contractViolations({
        method: req.method,
        path: req.originalUrl.split('?')[0],
        status: res.statusCode,
        headers: res.getHeaders(),
        body: req.method === 'HEAD' ? '' : Buffer.concat(chunks).toString('utf8'),
      }).then((problems) => {
        violations.push(...problems);
      });
      pending.add(check);
      void check.finally(() => pending.delete(check));
    });
    next();
  };
}
