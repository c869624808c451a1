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
  /**
   * A runner's continuous control loop: how long its leases last, and whether it would take this job
   * on now (false once it stops, or while jobs of its claim wait to start). With it, a fan-out
   * with no other control step due goes on to its next batch under its claim; without (runBatch, tests), it
   * runs one batch a claim.
   */
  loop?: { leaseMs: number; taking(): boolean };
}

/** Thrown inside an outcome's transaction when this worker no longer holds the claim: the change is rolled back and dropped, the new holder's to make. */
export class LeaseLost extends Error {}
