// The stack floor of `npm run bench`: express and openapi-backend as Herald uses them (the same
// JSON parser, the contract's router and request validation, Herald's route table), with each
// operation answering the body Herald answered, and nothing else: no key check, rate limit, log,
// metrics or database. It is the most throughput the chosen stack leaves for Herald's own work,
// measured in the same run as the bare-express baseline.
//
//   node dist/bench/stack-floor.js <routes.json>     (the bench compiles it; same routes file as the baseline)
import express, { type Request, type Response } from 'express';
import type { Context } from 'openapi-backend';
import { createBackend } from '../../src/http/backend.js';
import { readRoutes, serve } from './routes.js';

const config = readRoutes();
const api = await createBackend();
api.register({
  notFound: (_c: Context, _req: Request, res: Response) => res.status(404).end(),
  methodNotAllowed: (_c: Context, _req: Request, res: Response) => res.status(405).end(),
  validationFail: (_c: Context, _req: Request, res: Response) => res.status(400).end(),
  unauthorizedHandler: (_c: Context, _req: Request, res: Response) => res.status(401).end(),
});
for (const scheme of ['bearerAuth', 'apiKeyAuth']) api.registerSecurityHandler(scheme, () => true);
for (const route of config.routes) {
  const operation = api.router.matchOperation({ method: route.method, path: route.path.replace(/^\/v1/, ''), headers: {} });
  if (!operation?.operationId) throw new Error(`No operation for ${route.method} ${route.path}`);
  api.register(operation.operationId, (_c: Context, _req: Request, res: Response) => res.status(route.status).json(route.body));
  api.validator.getRequestValidatorsForOperation(operation.operationId);
}

const app = express();
app.disable('x-powered-by');
const json = express.json({ limit: '1mb' });
app.get('/health', (_req, res) => {
  res.json({ status: 'ok' });
});
app.use('/v1', (req, res, next) => (req.method === 'POST' ? json(req, res, next) : next()), (req, res, next) => {
  api.handleRequest({ method: req.method, path: req.path, body: req.body, query: req.query as never, headers: req.headers as never }, req, res).catch(next);
});
serve(app, config, 'stack floor');
