import type { Deps } from '../deps.js';
import type { Metrics } from '../metrics.js';
import { countOpenJobsByStatus, queueDepth } from '../db/repos/jobs.js';

/** How long a scrape's job counts are served again: scrapes that come together cost one read. */
export const JOB_GAUGES_TTL_MS = 5_000;

/**
 * A read shared by the scrapes of one TTL: later callers get the reading under way or the last
 * one while it is fresh, so a burst of scrapes (or several Prometheus) cannot multiply the reads.
 */
function cached<T>(read: () => Promise<T>, clock: Deps['clock']): () => Promise<T> {
  let last: { at: number; value: Promise<T> } | undefined;
  return () => {
    const now = clock.now().getTime();
    if (!last || now - last.at >= JOB_GAUGES_TTL_MS) {
      const value = read();
      last = { at: now, value };
      value.catch(() => (last = undefined)); // a failed read is not served again
    }
    return last.value;
  };
}

/**
 * The engine's gauges on /metrics, read from the database at scrape time (so any process can serve
 * them). Both count only jobs not yet done, through indexes of those jobs alone, so a scrape costs
 * the same with a thousand finished jobs or a hundred million; and each is read at most once per
 * TTL. Finished jobs are not counted: their number grows with the table (GET /v1/notifications/stats
 * tells outcomes).
 */
export function registerEngineMetrics(deps: Deps, metrics: Metrics): void {
  const openJobs = cached(() => countOpenJobsByStatus(deps.db), deps.clock);
  const depth = cached(() => queueDepth(deps.db, deps.clock.now()), deps.clock);
  metrics.registerGauge('herald_jobs', 'Jobs not yet done, by status (pending, queued, delayed, running).', async () =>
    (await openJobs()).map(({ status, count }) => ({ labels: { status }, value: count })),
  ['status']);
  metrics.registerGauge('herald_queue_depth', 'Jobs due now or running: the work in front of the job runners.', depth);
}
