import type { Deps } from '../deps.js';
import type { Gate } from './destinations.js';

/** What a job runner hands every job it runs. */
export interface WorkerContext {
  deps: Deps;
  /** This worker's name on the leases it holds. */
  owner: string;
  /** 0 ≤ x < 1; injected so that tests can pin the retry jitter. */
  random: () => number;
  /** Bounds and breakers per destination; without one, every send goes at once (runUntilIdle, tests). */
  gate?: Gate;
}
