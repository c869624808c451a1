// The runner's loops wait on these between claims.

/** The longest gap between two notifies a Wakeup's average counts: after an idle hour, a burst is coalesced again within a few notifies. */
const GAP_CAP_MS = 100;
/** The weight of the newest gap in that average. */
const GAP_WEIGHT = 0.2;

/**
 * A wait that a notify ends early; a notify while nobody waits ends the next wait at once. It
 * counts the notifies since it was last reset (the work that arrived) and keeps the time between
 * the last two and a running average of it (how often work arrives).
 */
export class Wakeup {
  private pending = false;
  private resolve?: () => void;
  arrived = 0;
  private meanGapMs = GAP_CAP_MS;
  private lastGapMs = Infinity;
  private lastNotify = -Infinity;

  constructor(private readonly now: () => number = () => performance.now()) {}

  notify(): void {
    const now = this.now();
    this.lastGapMs = now - this.lastNotify;
    this.meanGapMs += GAP_WEIGHT * (Math.min(this.lastGapMs, GAP_CAP_MS) - this.meanGapMs);
    this.lastNotify = now;
    this.arrived++;
    this.pending = true;
    this.resolve?.();
  }

  /** Whether more notifies are likely within `ms`: lately they have come more often than that, the last one too. */
  expectsMoreWithin(ms: number): boolean {
    return this.meanGapMs < ms && this.lastGapMs < ms;
  }

  /** Forgets the notifies that came since the last wait. */
  clear(): void {
    this.pending = false;
  }

  /** Resolves at the next notify (at once if one came since the last wait), or after `ms`; answers whether it was notified. */
  async wait(ms: number): Promise<boolean> {
    if (!this.pending) {
      await new Promise<void>((resolve) => {
        const timer = setTimeout(done, ms);
        function done() {
          clearTimeout(timer);
          resolve();
        }
        this.resolve = done;
      });
      this.resolve = undefined;
    }
    const notified = this.pending;
    this.pending = false;
    return notified;
  }
}
