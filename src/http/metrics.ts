import type { RequestHandler } from 'express';
import type { FinishedResponse } from './request-log.js';
import { httpRequestDuration, httpRequests, metricsRegistry } from '../metrics.js';

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
  // Express matches these routes in any letter case (`/HEALTH` is served): so does their label.
  const route = path.toLowerCase().replace(/\/+$/, '') || '/';
  const fixed = FIXED_ROUTES[route];
  if (fixed) return fixed;
  if (route === '/dashboard' || route.startsWith('/dashboard/')) return 'dashboard';
  return 'notFound';
}

/**
 * Counts and times a finished response (requestLog calls it) under the operationId the contract's
 * router matched for it (`res.locals.operation`, set once per /v1 request); anything the router
 * does not know (a wrong path or method) counts as `notFound`.
 */
export const recordHttpMetrics: FinishedResponse = (_req, res, path, seconds) => {
  const labels = { operation: operationOf(path, res.locals.operation?.operationId), status: String(res.statusCode) };
  httpRequests.inc(labels);
  httpRequestDuration.observe(labels, seconds);
};

/** GET /metrics in Prometheus's text format. */
export const metricsEndpoint: RequestHandler = async (_req, res) => {
  res.type(metricsRegistry.contentType).send(await metricsRegistry.metrics());
};
