import express, { type Express, type RequestHandler } from 'express';
import type { Deps } from './deps.js';
import { handlers } from './handlers/index.js';
import { apiMiddleware, contractMethod, createApi, precompileValidators } from './http/api.js';
import { CONTRACT_PATH } from './contract.js';
import { errorHandler, sendError } from './http/errors.js';
import { ApiError, notFound } from './errors.js';
import { requestLog } from './http/request-log.js';
import { authentication } from './http/security.js';
import { rateLimits } from './http/rate-limit.js';
import { docsPage } from './http/docs.js';
import { sendFileFromMemory } from './http/files.js';
import { httpMetricsRecorder, metricsEndpoint } from './http/metrics.js';
import { Metrics } from './metrics.js';
import { registerEngineMetrics } from './engine/metrics.js';
import { dashboard } from './dashboard/index.js';
import { inboxExample } from './http/examples.js';
import { isReady } from './db/knex.js';
import { InboxHub } from './engine/inbox-hub.js';
import { inboxCors, inboxPreflight } from './http/inbox-cors.js';
import type { StreamTimings } from './http/inbox-stream.js';

export interface AppOptions {
  /** Compile every request validator before createApp resolves (the server listens after it), rather than each on its first use. */
  precompile?: boolean;
  /** Where the rendered API reference lives (built on first request when missing). */
  docsFile?: string;
  /** The inbox streams' ping and catch-up intervals (tests shorten them). */
  inbox?: StreamTimings & { catchUpMs?: number };
}

/** The HTTP application: request id and log → inbox preflight → operation → API key → inbox CORS → rate limit → contract router (key check, JSON body, validation) → errors. */
export async function createApp(deps: Deps, options: AppOptions = {}): Promise<Express> {
  // The inbox's open streams; `app.locals.inboxHub.close()` ends them when the server stops.
  const inboxHub = new InboxHub(deps, { catchUpMs: options.inbox?.catchUpMs });
  const api = await createApi(handlers, deps, { inboxHub, inboxStreams: options.inbox });
  if (options.precompile) await precompileValidators(api);
  const app = express();
  app.disable('x-powered-by');
  // Behind the proxies HERALD_TRUST_PROXY names, the client's address and scheme are what they forward.
  if (deps.config.trustProxy !== undefined) app.set('trust proxy', deps.config.trustProxy);
  // Paths are what the contract and the pages say, letter for letter: `/DASHBOARD` would be served,
  // and set cookies for a path the browser never sends them back to.
  app.enable('case sensitive routing');
  app.locals.inboxHub = inboxHub;
  // Every answer is what its Content-Type says: a browser never sniffs a JSON error into HTML.
  app.use((_req, res, next) => {
    res.setHeader('X-Content-Type-Options', 'nosniff');
    next();
  });
  // What this app's /metrics shows (`app.locals.metrics`).
  const metrics = new Metrics();
  app.locals.metrics = metrics;
  app.use(requestLog(deps.logger, httpMetricsRecorder(metrics)));
  registerEngineMetrics(deps, metrics);

  app.get('/v1/openapi.yaml', (_req, res, next) => sendFileFromMemory(res, CONTRACT_PATH, 'application/yaml', next));
  app.all('/v1/openapi.yaml', onlyGet);
  // The API comes before the other routes: it takes nearly every request, and express tries each
  // route in turn. Each /v1 request is matched to its operation once, here: the metrics (a 429 is
  // counted under its operation too) and the contract's router (apiMiddleware) use it.
  const route: RequestHandler = (req, res, next) => {
    res.locals.operation = api.router.matchOperation({ method: contractMethod(req.method), path: req.path, headers: {} });
    next();
  };
  // A browser's inbox preflight (OPTIONS) is answered first, before any key. Then the key is read
  // and the rate limit spent before the backend begins, so a refused request costs no parsing and
  // every answer, a body parser's 400 and 413 included, carries the RateLimit headers. Whether the
  // key authorizes the request is the backend's decision, and the body is read only once it has
  // (api.ts, securityHandler). The five steps after the preflight are one layer, so express's
  // router strips and restores the /v1 prefix twice, not six times.
  app.use('/v1', inboxPreflight(), inSequence(route, authentication(deps), inboxCors(deps), rateLimits(deps), apiMiddleware(api)));
  app.get('/health', (_req, res) => {
    res.json({ status: 'ok' });
  });
  app.get('/ready', async (_req, res) => {
    const ready = await isReady(deps.db);
    res.status(ready ? 200 : 503).json({ status: ready ? 'ready' : 'unavailable' });
  });
  app.get('/metrics', metricsEndpoint(deps.config, metrics));
  app.get('/docs', docsPage(deps.logger, options.docsFile));
  app.all(['/health', '/ready', '/metrics', '/docs'], onlyGet);
  app.use('/dashboard', dashboard(deps));
  app.use('/examples/inbox', inboxExample());

  app.use((req, res) => sendError(req, res, notFound(`No route matches ${req.method} ${req.path}`)));
  app.use(errorHandler(deps.logger));
  return app;
}

/** The paths outside the contract answer GET (and HEAD) only; any other method is a 405. */
const onlyGet: RequestHandler = (req, res) => {
  sendError(req, res, new ApiError(405, `${req.method} is not allowed on ${req.path}`, undefined, { Allow: 'GET, HEAD' }));
};

/**
 * Express handlers run one after another as one handler, as express runs layers: an error (passed
 * to `next`, thrown, or a rejected promise) skips the rest and goes to express's error handling.
 */
function inSequence(...handlers: RequestHandler[]): RequestHandler {
  return (req, res, done) => {
    let index = 0;
    const next = (err?: unknown) => {
      const handler = handlers[index++];
      if (err || !handler) return done(err);
      try {
        const result: unknown = handler(req, res, next);
        if (result instanceof Promise) result.catch((error: unknown) => done(error || new Error('Rejected promise')));
      } catch (error) {
        done(error);
      }
    };
    next();
  };
}
