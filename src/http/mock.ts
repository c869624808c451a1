import express, { type Express, type Request, type RequestHandler, type Response } from 'express';
import type { Context } from 'openapi-backend';
import { apiMiddleware, METHODS_WITH_BODY, validationDetails } from './api.js';
import { sendJson } from './send-json.js';
import { createBackend } from './backend.js';
import { CONTRACT_PATH } from '../contract.js';
import { badRequest, ApiError, notFound, unauthorized } from '../errors.js';
import { errorHandler, sendError } from './errors.js';
import type { Logger } from '../logger.js';
import { requestLog } from './request-log.js';
import { BODY_LIMIT, cappedBody } from './request-body.js';
import { sendFileFromMemory } from './files.js';

/**
 * `Prefer: code=409` or `Prefer: example=inactive` picks another documented response or example,
 * so a frontend can try its error paths against the mock too.
 */
function preferred(req: Request): { code?: number; example?: string } {
  const header = String(req.headers.prefer ?? '');
  const code = /\bcode=(\d{3})\b/.exec(header)?.[1];
  const example = /\bexample=([\w-]+)/.exec(header)?.[1];
  return { ...(code ? { code: Number(code) } : {}), ...(example ? { example } : {}) };
}

/** The example of each header a response documents (a 429's `Retry-After` and `RateLimit`…), as the real server would send them. */
function documentedHeaders(response: unknown): Record<string, string> {
  const headers = ((response ?? {}) as { headers?: Record<string, { schema?: { examples?: unknown[]; example?: unknown }; example?: unknown }> }).headers ?? {};
  const values: Record<string, string> = {};
  for (const [name, header] of Object.entries(headers)) {
    const example = header.example ?? header.schema?.examples?.[0] ?? header.schema?.example;
    if (example !== undefined) values[name] = String(example);
  }
  return values;
}

const hasScheme = (req: Request, scheme: string) => new RegExp(`^${scheme}\\s+\\S+\\s*$`, 'i').test(req.headers.authorization ?? '');

/**
 * The mock server: the real contract's router and request validation, with every operation
 * answered by its documented example (openapi-backend's mocking) instead of a handler. Any
 * well-formed key is accepted; a missing one is a 401 as on the real server. Errors have the real
 * error body.
 */
export async function createMockApp(logger: Logger): Promise<Express> {
  const api = await createBackend();
  api.register({
    notFound: (_c: Context, req: Request) => {
      throw notFound(`No route matches ${req.method} ${req.originalUrl.split('?')[0]}`);
    },
    methodNotAllowed: (c: Context, req: Request) => {
      const allow = api.allowedMethods(c.request.path).join(', ');
      throw new ApiError(405, `${req.method} is not allowed on ${req.originalUrl.split('?')[0]}`, undefined, { Allow: allow });
    },
    unauthorizedHandler: () => {
      throw unauthorized('Missing API key: send the header "Authorization: Bearer <key>"');
    },
    // As the real server words it (src/http/api.ts): the first problems in the message, all in details.
    validationFail: (c: Context) => {
      const details = validationDetails(c.validation.errors ?? []);
      throw badRequest(details.map((d) => `${d.field} ${d.message}`).slice(0, 5).join('; '), details);
    },
    notImplemented: (c: Context, req: Request, res: Response) => {
      const { status, mock } = c.api.mockResponseForOperation(c.operation.operationId!, preferred(req));
      res.set(documentedHeaders(c.operation.responses?.[String(status)]));
      return sendJson(res, status, mock);
    },
  });
  api.registerSecurityHandler('bearerAuth', (_c: Context, req: Request) => hasScheme(req, 'Bearer'));
  api.registerSecurityHandler('apiKeyAuth', (_c: Context, req: Request) => hasScheme(req, 'ApiKey'));
  api.registerSecurityHandler('subscriberToken', (_c: Context, req: Request) => hasScheme(req, 'Bearer'));
  api.registerSecurityHandler('inboxTicket', (_c: Context, req: Request) => typeof req.query.ticket === 'string' && req.query.ticket !== '');

  const app = express();
  app.disable('x-powered-by');
  app.use(requestLog(logger));
  app.get('/health', (_req, res) => {
    res.json({ status: 'ok', mock: true });
  });
  app.get('/v1/openapi.yaml', (_req, res, next) => sendFileFromMemory(res, CONTRACT_PATH, 'application/yaml', next));
  const json = cappedBody(express.json({ limit: BODY_LIMIT }), BODY_LIMIT, 'application/json');
  const jsonBody: RequestHandler = (req, res, next) => (METHODS_WITH_BODY.has(req.method) ? json(req, res, next) : next());
  app.use('/v1', jsonBody, apiMiddleware(api));
  app.use((req, res) => sendError(req, res, notFound(`No route matches ${req.method} ${req.path}`)));
  app.use(errorHandler(logger));
  return app;
}
