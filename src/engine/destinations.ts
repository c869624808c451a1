// Where sends go, kept apart: each destination (an integration, and for chat and push webhooks the
// host they post to; an outbound webhook endpoint) has a bound on its sends in flight and a circuit
// breaker. A slow or failing destination then holds a few slots and defers its own jobs, never the
// other destinations'. Both live in the memory of one runner: on PostgreSQL each worker process
// keeps its own.
import { ProviderError } from '../providers/types.js';

export interface DestinationOptions {
  /** Sends in flight at once to one destination. */
  perDestination: number;
  /**
   * Of those, while the destination is slow or has not answered yet: so that the hanging
   * destinations of one environment hold few of its slots. A quarter of perDestination unless set,
   * as only tests do.
   */
  slowPerDestination?: number;
  /** Failures in a row (timeouts, network errors, 5xx) that open the breaker. */
  failures: number;
  /** How long an open breaker waits before it lets one probe through; doubled at each failed probe. */
  cooldownMs: number;
  maxCooldownMs: number;
}

/** Whether a send may start now (and when it started, to hand back), or when its job should come back instead. */
export type Admission =
  | { go: true; started: number }
  | {
      go: false;
      until: Date;
      /** Why, for the execution detail (breaker); undefined when the destination is only busy. */
      why?: string;
      /**
       * The destination's other sends would be turned away until then too: its breaker is open, or
       * its sends in flight hang (isHanging). Not so at a busy destination that answers, quickly or
       * slowly, whose places free up as its sends end.
       */
      allUntil?: boolean;
    };

/** What a finished send says of its destination's health. */
export type Verdict = 'ok' | 'failed' | 'neutral';

/** What a send asks before it starts and tells when it ends (the runner's `Destinations`). */
export interface Gate {
  admit(destination: string): Promise<Admission>;
  finished(destination: string, verdict: Verdict, started: number): void;
}

interface State {
  /** When each send in flight started (epoch ms). */
  starts: number[];
  /** When a send here last ended (epoch ms); 0 if none has since it was remembered. */
  answeredAt: number;
  /** Sends waiting for one of this destination's places, first come first served. */
  waiting: Array<(started: number | undefined) => void>;
  /** Failures in a row. */
  failures: number;
  /** Epoch ms until which the breaker is open; 0 when closed. */
  openUntil: number;
  cooldownMs: number;
  /** A probe is out (half open): the others wait for its answer. */
  probing: boolean;
  /** A running average of how long a send here takes: how long a job waits for a busy destination. */
  averageMs: number;
}

/**
 * A destination is slow when its sends take, or one of those in flight has taken, this long: then
 * a send finding it busy goes back to the queue at once. At a quick one it waits in the slot it has,
 * at most this long, for a place to free up (cheaper than a trip through the queue).
 */
const SLOW_MS = 1_000;
/** The shortest and longest a job waits in the queue for a busy destination. */
const BUSY_WAIT_MS = { min: 250, max: 30_000 };
/**
 * How long a destination's last answer lets it have all its places: a burst after a quiet minute
 * starts with a quarter of them again, as at a new destination (it may hang now).
 */
const ANSWERS_TRUSTED_MS = 60_000;
/** How long jobs wait while a probe is out. */
const PROBE_WAIT_MS = 2_000;

export class Destinations implements Gate {
  private readonly states = new Map<string, State>();
  /** The places of a destination that is slow or has not answered lately (places). */
  private readonly fewPlaces: number;

  constructor(
    private readonly options: DestinationOptions,
    private readonly now: () => number,
    private readonly random: () => number = Math.random,
  ) {
    this.fewPlaces = Math.min(options.perDestination, options.slowPerDestination ?? Math.max(1, Math.floor(options.perDestination / 4)));
  }

  async admit(destination: string): Promise<Admission> {
    const state = this.stateOf(destination);
    const now = this.now();
    const busy = state.openUntil === 0 && state.starts.length >= this.places(state, now);
    if (busy && !this.isSlow(state, now)) {
      const started = await new Promise<number | undefined>((resolve) => {
        const waiter = (at: number | undefined) => {
          clearTimeout(timer);
          resolve(at);
        };
        const timer = setTimeout(() => {
          const at = state.waiting.indexOf(waiter);
          if (at >= 0) state.waiting.splice(at, 1);
          resolve(undefined);
        }, SLOW_MS);
        state.waiting.push(waiter);
      });
      // finished() handed this send its place.
      if (started !== undefined) return { go: true, started };
    }
    return this.admitNow(destination, state);
  }

  /** admit, without waiting: go, or the time to come back. */
  private admitNow(destination: string, state: State): Admission {
    const now = this.now();
    if (state.openUntil > 0) {
      if (now < state.openUntil) {
        // Spread over a second, so that the jobs do not all come back at the probe's moment.
        return this.deferred(state.openUntil + this.random() * 1000, destination, state);
      }
      if (state.probing) return this.deferred(now + PROBE_WAIT_MS * (0.5 + this.random()), destination, state);
      state.probing = true;
    } else if (state.starts.length >= this.places(state, now)) {
      const wait = Math.min(BUSY_WAIT_MS.max, Math.max(BUSY_WAIT_MS.min, state.averageMs, this.oldestInFlightMs(state, now)));
      return { go: false, until: new Date(now + wait * (0.5 + this.random())), allUntil: this.isHanging(state, now) };
    }
    state.starts.push(now);
    return { go: true, started: now };
  }

  finished(destination: string, verdict: Verdict, started: number): void {
    const state = this.stateOf(destination);
    const now = this.now();
    const at = state.starts.indexOf(started);
    if (at >= 0) state.starts.splice(at, 1);
    const durationMs = now - started;
    state.answeredAt = now;
    state.averageMs = state.averageMs === 0 ? durationMs : state.averageMs * 0.8 + durationMs * 0.2;
    const probe = state.probing;
    state.probing = false;
    if (verdict === 'ok') {
      state.failures = 0;
      state.openUntil = 0;
      state.cooldownMs = this.options.cooldownMs;
    } else if (verdict === 'failed') {
      state.failures++;
      if (probe) this.open(state, Math.min(this.options.maxCooldownMs, state.cooldownMs * 2));
      else if (state.openUntil === 0 && state.failures >= this.options.failures) this.open(state, this.options.cooldownMs);
    }
    if (state.openUntil > 0) {
      // Open: the sends waiting for a place are deferred instead (admitNow).
      for (const waiter of state.waiting.splice(0)) waiter(undefined);
    } else {
      // A first quick answer opens every place: as many waiting sends as there are places go.
      while (state.waiting.length > 0 && state.starts.length < this.places(state, now)) {
        state.starts.push(now);
        state.waiting.shift()!(now);
      }
    }
  }

  /** Whether the destination's breaker is open now (for tests). */
  isOpen(destination: string): boolean {
    return (this.states.get(destination)?.openUntil ?? 0) > 0;
  }

  /**
   * How many sends may be in flight at the destination now: all its places once it has answered
   * quickly; fewer while it is slow or has not answered yet (a new destination may hang), so that an
   * environment's hanging destinations leave it slots for the others until their breakers open.
   */
  private places(state: State, now: number): number {
    return now - state.answeredAt < ANSWERS_TRUSTED_MS && !this.isSlow(state, now) ? this.options.perDestination : this.fewPlaces;
  }

  private isSlow(state: State, now: number): boolean {
    return state.averageMs >= SLOW_MS || this.oldestInFlightMs(state, now) >= SLOW_MS;
  }

  /**
   * Slow, and all its places but one held by sends that have taken twice its usual answer or more:
   * its places will not free up soon (the one left: a send let in as a hung one timed out). A
   * destination that is slow but answering, or quick with a send hung among the others, frees one
   * every usual answer, and a send put back at its own random time finds it, where all of them
   * deferred to one time would leave its places idle until then.
   */
  private isHanging(state: State, now: number): boolean {
    if (!this.isSlow(state, now)) return false;
    const longMs = Math.max(SLOW_MS, 2 * state.averageMs);
    return state.starts.filter((start) => now - start >= longMs).length >= Math.max(1, this.places(state, now) - 1);
  }

  private oldestInFlightMs(state: State, now: number): number {
    return state.starts.length === 0 ? 0 : now - Math.min(...state.starts);
  }

  private open(state: State, cooldownMs: number): void {
    state.cooldownMs = cooldownMs;
    state.openUntil = this.now() + cooldownMs;
  }

  private forgetIdle(): void {
    const now = this.now();
    for (const [destination, state] of this.states) {
      if (state.starts.length === 0 && state.waiting.length === 0 && !state.probing && state.openUntil <= now) this.states.delete(destination);
    }
  }

  private deferred(at: number, destination: string, state: State): Admission {
    const until = new Date(Math.round(at));
    return {
      go: false,
      until,
      why: `${describeDestination(destination)} failed ${state.failures} times in a row; its sends wait until ${until.toISOString()}`,
      allUntil: true,
    };
  }

  /** How many destinations are remembered (for tests). */
  get size(): number {
    return this.states.size;
  }

  private stateOf(destination: string): State {
    let state = this.states.get(destination);
    if (!state) {
      if (this.states.size >= MAX_REMEMBERED) this.forgetIdle();
      state = { starts: [], answeredAt: 0, waiting: [], failures: 0, openUntil: 0, cooldownMs: this.options.cooldownMs, probing: false, averageMs: 0 };
      this.states.set(destination, state);
    }
    return state;
  }
}

/** A destination's key: the channel, the integration (for an outbound webhook, its endpoint), and the host a webhook posts to. */
export function destinationOf(channel: string, integrationId: string, url?: string): string {
  let host = '';
  if (url) {
    try {
      host = new URL(url).host;
    } catch {
      host = 'invalid-url';
    }
  }
  return host ? `${channel}:${integrationId}:${host}` : `${channel}:${integrationId}`;
}

/**
 * Destinations remembered before the idle ones are forgotten. A destination is remembered when
 * idle too (its failures count towards its breaker, its last answer keeps it its places); tenants
 * can name ever new hosts, so past this many the idle ones (nothing in flight or waiting, the
 * breaker closed or its cooldown over) are forgotten, as if never seen.
 */
const MAX_REMEMBERED = 10_000;

function describeDestination(destination: string): string {
  const [channel, integrationId, host] = destination.split(':', 3);
  return host ? `The ${channel} destination ${destination.slice(channel.length + integrationId.length + 2)}` : `The ${channel} integration ${integrationId}`;
}

/** A provider's 429: it asked for time, which is no fault of the job's. */
export function isRateLimited(err: unknown): err is ProviderError {
  return err instanceof ProviderError && err.kind === 'rate-limited';
}

/**
 * What a send's error says of its destination: timeouts, network errors and 5xx count against it;
 * a 429 or a refused address does not (the destination is pacing us, or was never reached).
 */
export function verdictOf(err: unknown): Verdict {
  if (!(err instanceof ProviderError) || err.kind === 'rate-limited' || err.kind === 'refused') return 'neutral';
  return err.permanent ? 'ok' : 'failed';
}
