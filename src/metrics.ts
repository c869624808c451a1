import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';

/**
 * Everything `/metrics` shows, in one registry for the process: the HTTP layer's request counts
 * and latencies, Node's own process metrics, and the gauges other parts register (the engine's
 * jobs by status and queue depth).
 */
export const metricsRegistry = new Registry();
collectDefaultMetrics({ register: metricsRegistry, prefix: 'herald_' });

/** Labels are the operationId (never the raw path, which would grow without bound) and the status. */
export const httpRequests = new Counter({
  name: 'herald_http_requests_total',
  help: 'HTTP requests answered, by operation and status.',
  labelNames: ['operation', 'status'] as const,
  registers: [metricsRegistry],
});

export const httpRequestDuration = new Histogram({
  name: 'herald_http_request_duration_seconds',
  help: 'Time from a request arriving to its response being sent, by operation and status.',
  labelNames: ['operation', 'status'] as const,
  buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
  registers: [metricsRegistry],
});

export type GaugeReading = number | Array<{ labels: Record<string, string>; value: number }>;

/**
 * A gauge read when Prometheus scrapes: `collect` answers with one number, or with one value per
 * label set (labels not in the answer disappear, so a status that no job has any more reads as
 * gone rather than stuck at its last value). Registering a name again replaces the first one.
 *
 *   registerGauge('herald_jobs', 'Jobs by status.', async () => countOpenJobsByStatus(db), ['status']);
 *   registerGauge('herald_queue_depth', 'Jobs waiting to be claimed.', async () => countQueued());
 */
export function registerGauge(name: string, help: string, collect: () => Promise<GaugeReading>, labelNames: string[] = []): void {
  if (metricsRegistry.getSingleMetric(name)) metricsRegistry.removeSingleMetric(name);
  new Gauge({
    name,
    help,
    labelNames,
    registers: [metricsRegistry],
    async collect() {
      const reading = await collect();
      this.reset();
      if (typeof reading === 'number') this.set(reading);
      else for (const { labels, value } of reading) this.set(labels, value);
    },
  });
}
