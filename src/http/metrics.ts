import { createHash, timingSafeEqual } from 'node:crypto';
import type { RequestHandler } from 'express';
import type { Config } from '../config.js';
import { ApiError, notFound } from '../errors.js';
import { sendError } from './errors.js';
import type { FinishedResponse } from './request-log.js';
import type { Metrics } from '../metrics.js';

/** Routes outside the contract, named like operations so that every label stays a small fixed set. */
const FIXED_ROUTES: Record<string, string> = {
  '/health': 'health',
  '/ready': 'ready',
  '/metrics': 'metrics',
  '/docs': 'docs',
  '/v1/openapi.yaml': 'getOpenApiSpec',
};

/** An operation's label: a route outside the contract by its fixed name, anything unknown as `notFound`. */
function operationOf(path: string, matched: string | undefined): string {
  if (matched) return matched;
  // Express matches these routes letter for letter (app.ts), with or without a trailing slash: so does their label.
  const route = path.replace(/\/+$/, '') || '/';
  const fixed = FIXED_ROUTES[route];
  if (fixed) return fixed;
  if (route === '/dashboard' || route.startsWith('/dashboard/')) return 'dashboard';
  if (route === '/examples/inbox' || route.startsWith('/examples/inbox/')) return 'inboxExample';
  return 'notFound';
}

/**
 * Counts and times a finished response (requestLog calls it) under the operationId the contract's
 * router matched for it (`res.locals.operation`, set once per /v1 request); anything the router
 * does not know (a wrong path or method) counts as `notFound`.
 */
export function httpMetricsRecorder(metrics: Metrics): FinishedResponse {
  return (_req, res, path, seconds) => {
    const labels = { operation: operationOf(path, res.locals.operation?.operationId), status: String(res.statusCode) };
    metrics.httpRequests.inc(labels);
    metrics.httpRequestDuration.observe(labels, seconds);
  };
}

const digest = (text: string) => createHash('sha256').update(text).digest();

/**
 * GET /metrics in Prometheus's text format, for the holder of HERALD_METRICS_TOKEN (`Authorization:
 * Bearer <token>`): it tells every tenant's request volumes. Without a token configured it is not
 * served at all (a 404 like any unknown path). The token is read from `deps.config` on each request
 * and compared in constant time.
 */
export function metricsEndpoint(config: Config, metrics: Metrics): RequestHandler {
  return async (req, res) => {
    const token = config.metricsToken;
    if (!token) return sendError(req, res, notFound(`No route matches ${req.method} ${req.path}`));
    const given = /^Bearer[ ]+(.+)$/i.exec(req.get('authorization') ?? '')?.[1]?.trim() ?? '';
    if (!timingSafeEqual(digest(given), digest(token))) {
      return sendError(req, res, new ApiError(401, '/metrics needs the metrics token: Authorization: Bearer <HERALD_METRICS_TOKEN>', undefined, { 'WWW-Authenticate': 'Bearer realm="metrics"' }));
    }
    res.type(metrics.contentType).send(await metrics.text());
  };
}
