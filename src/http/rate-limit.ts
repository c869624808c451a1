// Rate limits by plan: a token bucket per environment (or per client address for requests without
// a valid key), on express-rate-limit with a store of our own that implements the bucket.
import type { Request, RequestHandler, Response } from 'express';
import { ipKeyGenerator, rateLimit, type ClientRateLimitInfo, type RateLimitInfo, type Store } from 'express-rate-limit';
import type { Clock } from '../clock.js';
import type { Plan } from '../config.js';
import type { Db } from '../db/knex.js';
import { bucketsInDatabase, deleteBucket, deleteFullBuckets, findBucket, giveTokenBack, takeToken, UNITS_PER_TOKEN } from '../db/repos/rate-limits.js';
import type { Deps } from '../deps.js';
import type { Logger } from '../logger.js';
import { ApiError } from '../errors.js';
import { sendError } from './errors.js';
import type { Authentication, KeyPlan } from './security.js';

/**
 * A budget: a bucket of `burst` tokens, refilled continuously at `ratePerMinute` (nginx's
 * `limit_req rate burst`). Each request takes one token; an empty bucket answers 429.
 */
export interface RatePolicy {
  /** The name clients see in the `RateLimit` and `RateLimit-Policy` headers. */
  name: string;
  ratePerMinute: number;
  burst: number;
}

/** The plans of README's "Rate limits" table. Enterprise numbers are stored on the organization. */
export const PLAN_POLICIES: Record<Exclude<Plan, 'enterprise'>, RatePolicy> = {
  free: { name: 'free', ratePerMinute: 100, burst: 20 },
  pro: { name: 'pro', ratePerMinute: 1000, burst: 100 },
};

/** Requests without a valid key are limited per client address with the Free numbers. */
export const UNAUTHENTICATED_POLICY: RatePolicy = { name: 'unauthenticated', ratePerMinute: 100, burst: 20 };

/** The budget of a key's organization, or undefined for no limit (enterprise without numbers). */
export function policyFor(plan: KeyPlan): RatePolicy | undefined {
  if (plan.plan !== 'enterprise') return PLAN_POLICIES[plan.plan] ?? PLAN_POLICIES.free;
  if (plan.ratePerMinute === null || plan.burst === null) return undefined;
  return { name: 'enterprise', ratePerMinute: plan.ratePerMinute, burst: plan.burst };
}

// ---- The bucket arithmetic ----------------------------------------------------------------------

// One token is UNITS_PER_TOKEN units (db/repos/rate-limits.ts): a rate of N tokens per minute is
// exactly N units per millisecond, and every step below is integer arithmetic.
export { UNITS_PER_TOKEN };

export interface Bucket {
  units: number;
  /** Milliseconds since the epoch of the last refill. */
  refilledAt: number;
}

/** The bucket as it stands at `now`: refilled for the time gone by, never above `burst`. */
export function refill(bucket: Bucket | undefined, policy: RatePolicy, now: number): Bucket {
  const capacity = policy.burst * UNITS_PER_TOKEN;
  if (!bucket) return { units: capacity, refilledAt: now };
  // A clock that went backwards (another host's, a bit behind) refills nothing.
  const elapsed = Math.max(0, now - bucket.refilledAt);
  return { units: Math.min(capacity, bucket.units + elapsed * policy.ratePerMinute), refilledAt: Math.max(bucket.refilledAt, now) };
}

export interface Decision {
  allowed: boolean;
  /** The bucket after the request: one token fewer when allowed. */
  bucket: Bucket;
}

/** Takes one token if there is one. */
export function take(bucket: Bucket | undefined, policy: RatePolicy, now: number): Decision {
  const current = refill(bucket, policy, now);
  if (current.units < UNITS_PER_TOKEN) return { allowed: false, bucket: current };
  return { allowed: true, bucket: { units: current.units - UNITS_PER_TOKEN, refilledAt: current.refilledAt } };
}

/** Whole tokens left. */
export function remainingTokens(bucket: Bucket): number {
  return Math.floor(bucket.units / UNITS_PER_TOKEN);
}

/** Milliseconds until the bucket holds `tokens` tokens (0 when it already does). */
export function msUntil(bucket: Bucket, tokens: number, policy: RatePolicy): number {
  return Math.max(0, Math.ceil((tokens * UNITS_PER_TOKEN - bucket.units) / policy.ratePerMinute));
}

/** The policy's window for `RateLimit-Policy`: the seconds an empty bucket takes to fill (`w`). */
export function windowMs(policy: RatePolicy): number {
  return (policy.burst * 60_000) / policy.ratePerMinute;
}

// ---- Where buckets live ---------------------------------------------------------------------------

/** Bucket storage shared by every policy's store, so a key keeps its bucket when its plan changes. */
export interface Buckets {
  take(key: string, policy: RatePolicy, now: number): Promise<Decision>;
  /** Gives a token back (express-rate-limit's `decrement`). */
  giveBack(key: string, policy: RatePolicy, now: number): Promise<void>;
  peek(key: string, policy: RatePolicy, now: number): Promise<Bucket | undefined>;
  reset(key: string): Promise<void>;
}

/** A full bucket is the same as none, so buckets are swept away once full; this often at most. */
const SWEEP_EVERY_MS = 60_000;

/** One process (SQLite): buckets in a Map, no query at all. */
export class MemoryBuckets implements Buckets {
  private readonly buckets = new Map<string, Bucket & { fullAt: number }>();
  private lastSweep = 0;

  async take(key: string, policy: RatePolicy, now: number): Promise<Decision> {
    this.sweep(now);
    const decision = take(this.buckets.get(key), policy, now);
    this.buckets.set(key, { ...decision.bucket, fullAt: now + msUntil(decision.bucket, policy.burst, policy) });
    return decision;
  }

  async giveBack(key: string, policy: RatePolicy, now: number): Promise<void> {
    const bucket = this.buckets.get(key);
    if (!bucket) return;
    const current = refill(bucket, policy, now);
    const units = Math.min(policy.burst * UNITS_PER_TOKEN, current.units + UNITS_PER_TOKEN);
    this.buckets.set(key, { units, refilledAt: current.refilledAt, fullAt: now + msUntil({ ...current, units }, policy.burst, policy) });
  }

  async peek(key: string, policy: RatePolicy, now: number): Promise<Bucket | undefined> {
    const bucket = this.buckets.get(key);
    return bucket && refill(bucket, policy, now);
  }

  async reset(key: string): Promise<void> {
    this.buckets.delete(key);
  }

  /** How many buckets are held (tests). */
  get size(): number {
    return this.buckets.size;
  }

  private sweep(now: number): void {
    if (now - this.lastSweep < SWEEP_EVERY_MS) return;
    this.lastSweep = now;
    for (const [key, bucket] of this.buckets) if (bucket.fullAt <= now) this.buckets.delete(key);
  }
}

/**
 * Several API processes on one PostgreSQL: buckets in the database (db/repos/rate-limits.ts), each
 * request one statement that takes a token under the row's lock.
 */
export class DatabaseBuckets implements Buckets {
  private lastSweep = 0;

  constructor(
    private readonly db: Db,
    private readonly logger?: Logger,
  ) {}

  async take(key: string, policy: RatePolicy, now: number): Promise<Decision> {
    this.sweep(now);
    const { allowed, bucket } = await takeToken(this.db, key, policy, now);
    if (allowed) return { allowed: true, bucket: bucket! };
    // Refused. In the rare race where another process created the row after the statement's
    // snapshot it is not visible: call the bucket empty.
    return { allowed: false, bucket: refill(bucket ?? { units: 0, refilledAt: now }, policy, now) };
  }

  async giveBack(key: string, policy: RatePolicy, now: number): Promise<void> {
    const bucket = await this.peek(key, policy, now);
    if (!bucket) return;
    await giveTokenBack(this.db, key);
  }

  async peek(key: string, policy: RatePolicy, now: number): Promise<Bucket | undefined> {
    const stored = await findBucket(this.db, key);
    return stored && refill(stored, policy, now);
  }

  async reset(key: string): Promise<void> {
    await deleteBucket(this.db, key);
  }

  /** Drops full buckets (the same as none) now and then, so per-address rows do not pile up. */
  private sweep(now: number): void {
    if (now - this.lastSweep < SWEEP_EVERY_MS) return;
    this.lastSweep = now;
    deleteFullBuckets(this.db, now).catch((err: unknown) => this.logger?.warn({ err }, 'could not sweep full rate-limit buckets'));
  }
}

// ---- express-rate-limit -----------------------------------------------------------------------

/**
 * express-rate-limit's Store for one policy: `increment` takes a token. It answers in the terms
 * express-rate-limit counts in: `totalHits` is the tokens used (burst − tokens left), one more than
 * the limit when the bucket was empty; `resetTime` is when the bucket is full again.
 *
 * express-rate-limit writes the headers against `Date.now()`, whereas the bucket runs on the
 * injected clock (tests move it); so `resetTime` is the bucket's delay put on the wall clock.
 */
export class TokenBucketStore implements Store {
  /** The buckets are shared with other policies' stores (and, on PostgreSQL, other processes). */
  readonly localKeys = false;

  constructor(
    private readonly buckets: Buckets,
    private readonly policy: RatePolicy,
    private readonly clock: Clock,
  ) {}

  async increment(key: string): Promise<ClientRateLimitInfo> {
    const now = this.clock.now().getTime();
    const { allowed, bucket } = await this.buckets.take(key, this.policy, now);
    return {
      totalHits: allowed ? this.policy.burst - remainingTokens(bucket) : this.policy.burst + 1,
      resetTime: new Date(Date.now() + msUntil(bucket, this.policy.burst, this.policy)),
    };
  }

  async get(key: string): Promise<ClientRateLimitInfo | undefined> {
    const bucket = await this.buckets.peek(key, this.policy, this.clock.now().getTime());
    if (!bucket) return undefined;
    return {
      totalHits: this.policy.burst - remainingTokens(bucket),
      resetTime: new Date(Date.now() + msUntil(bucket, this.policy.burst, this.policy)),
    };
  }

  async decrement(key: string): Promise<void> {
    await this.buckets.giveBack(key, this.policy, this.clock.now().getTime());
  }

  async resetKey(key: string): Promise<void> {
    await this.buckets.reset(key);
  }
}

/**
 * `Retry-After`: whole seconds until one token is back. The store gives the time until the bucket
 * is full; one token comes (burst − 1) tokens' worth of refill before that.
 */
export function retryAfterSeconds(resetTime: Date | undefined, policy: RatePolicy): number {
  const untilFull = resetTime ? resetTime.getTime() - Date.now() : windowMs(policy);
  const untilOneToken = untilFull - ((policy.burst - 1) * 60_000) / policy.ratePerMinute;
  return Math.max(1, Math.ceil(untilOneToken / 1000));
}

const RATE_LIMIT_KEY = 'rateLimitKey';

function limiterFor(policy: RatePolicy, buckets: Buckets, deps: Deps): RequestHandler {
  return rateLimit({
    store: new TokenBucketStore(buckets, policy, deps.clock),
    limit: policy.burst,
    windowMs: windowMs(policy),
    identifier: policy.name,
    standardHeaders: 'draft-8',
    legacyHeaders: false,
    keyGenerator: (_req: Request, res: Response) => res.locals[RATE_LIMIT_KEY] as string,
    retryAfter: (req: Request) => retryAfterSeconds((req as Request & { rateLimit?: RateLimitInfo }).rateLimit?.resetTime, policy),
    handler: (req: Request, res: Response) => {
      const seconds = Number(res.getHeader('Retry-After'));
      sendError(req, res, new ApiError(429, `Rate limit exceeded; retry in ${seconds} second${seconds === 1 ? '' : 's'}`));
    },
    // Enterprise limiters are made on first use, inside a request: that is intended here.
    validate: { creationStack: false },
    logger: deps.logger,
  });
}

/**
 * The rate limits, mounted after `authentication()`: a key's requests spend its environment's
 * bucket, under its organization's plan; requests without a valid key spend their address's
 * bucket (they still get their 401 while it lasts). Every limited response carries `RateLimit`
 * and `RateLimit-Policy`; an organization without a limit gets neither.
 *
 * Buckets live in the process on SQLite (one process) and in the database on PostgreSQL (shared by
 * every API process; db/repos/rate-limits.ts chooses): no query per request on SQLite, one on PostgreSQL.
 */
export function rateLimits(deps: Deps): RequestHandler {
  const buckets: Buckets = bucketsInDatabase(deps.db) ? new DatabaseBuckets(deps.db, deps.logger) : new MemoryBuckets();
  const limiters = new Map<string, RequestHandler>();

  return (req, res, next) => {
    const authentication = res.locals.authentication as Authentication | undefined;
    let policy: RatePolicy | undefined;
    if (authentication?.ok) {
      policy = policyFor(authentication.plan);
      // A subscriber token spends its subscriber's own bucket, so one busy browser cannot use up its environment's.
      const { environmentId, subscriberId } = authentication.auth;
      res.locals[RATE_LIMIT_KEY] = subscriberId === undefined ? `env:${environmentId}` : `sub:${environmentId}:${subscriberId}`;
    } else {
      policy = UNAUTHENTICATED_POLICY;
      // IPv6 clients by their /56, as express-rate-limit's own key generator does.
      res.locals[RATE_LIMIT_KEY] = `ip:${ipKeyGenerator(req.ip ?? req.socket.remoteAddress ?? 'unknown')}`;
    }
    if (!policy) return next();
    const id = `${policy.name}/${policy.ratePerMinute}/${policy.burst}`;
    let limiter = limiters.get(id);
    if (!limiter) {
      limiter = limiterFor(policy, buckets, deps);
      limiters.set(id, limiter);
    }
    limiter(req, res, next);
  };
}
