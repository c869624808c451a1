/** Time comes from here, so tests of delays, digests and retries can move it. */
export interface Clock {
  now(): Date;
}

export const systemClock: Clock = { now: () => new Date() };
