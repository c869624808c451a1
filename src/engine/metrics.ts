import type { Deps } from '../deps.js';
import { registerGauge } from '../metrics.js';
import { countJobsByStatus, queueDepth } from '../db/repos/jobs.js';

/** The engine's gauges on /metrics, read from the database at scrape time (so any process can serve them). */
export function registerEngineMetrics(deps: Deps): void {
  registerGauge('herald_jobs', 'Jobs by status.', async () =>
    (await countJobsByStatus(deps.db)).map(({ status, count }) => ({ labels: { status }, value: count })),
  ['status']);
  registerGauge('herald_queue_depth', 'Jobs due now or running: the work in front of the job runners.', () => queueDepth(deps.db, deps.clock.now()));
}
