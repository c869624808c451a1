import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';

/** Node's own process metrics: one set for the process, whatever apps it serves. */
const processRegistry = new Registry();
collectDefaultMetrics({ register: processRegistry, prefix: 'herald_' });

export type GaugeReading = number | Array<{ labels: Record<string, string>; value: number }>;

/**
 * Everything an app's `/metrics` shows: the process's metrics, and the app's own request counts and
 * latencies and the gauges other parts register (the engine's jobs by status and queue depth). Each
 * app has its own (createApp), so that several apps in one process (as tests make them) neither
 * count into each other's nor read each other's database.
 */
export class Metrics {
  private readonly registry = new Registry();

  /** Labels are the operationId (never the raw path, which would grow without bound) and the status. */
  readonly httpRequests = new Counter({
    name: 'herald_http_requests_total',
    help: 'HTTP requests answered, by operation and status.',
    labelNames: ['operation', 'status'] as const,
    registers: [this.registry],
  });

  readonly httpRequestDuration = new Histogram({
    name: 'herald_http_request_duration_seconds',
    help: 'Time from a request arriving to its response being sent, by operation and status.',
    labelNames: ['operation', 'status'] as const,
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [this.registry],
  });

  /**
   * A gauge read when Prometheus scrapes: `collect` answers with one number, or with one value per
   * label set (labels not in the answer disappear, so a status that no job has any more reads as
   * gone rather than stuck at its last value). Registering a name again replaces the first one.
   *
   *   metrics.registerGauge('herald_queue_depth', 'Jobs due now or running.', depth);   // engine/metrics.ts
   */
  registerGauge(name: string, help: string, collect: () => Promise<GaugeReading>, labelNames: string[] = []): void {
    if (this.registry.getSingleMetric(name)) this.registry.removeSingleMetric(name);
    new Gauge({
      name,
      help,
      labelNames,
      registers: [this.registry],
      async collect() {
        const reading = await collect();
        this.reset();
        if (typeof reading === 'number') this.set(reading);
        else for (const { labels, value } of reading) this.set(labels, value);
      },
    });
  }

  readonly contentType = this.registry.contentType;

  /** The text Prometheus scrapes. */
  text(): Promise<string> {
    return Registry.merge([processRegistry, this.registry]).metrics();
  }
}
