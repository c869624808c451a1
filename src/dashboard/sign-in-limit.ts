import { createHash } from 'node:crypto';
import type { Request, RequestHandler } from 'express';
import { ipKeyGenerator, rateLimit, type Options, type Store } from 'express-rate-limit';
import type { Clock } from '../clock.js';
import type { Db } from '../db/knex.js';
import { countSignInHit, forgetSignInHits, uncountSignInHit } from '../db/repos/sign-in-limits.js';
import { normalizeEmail } from '../db/repos/owners.js';

export const SIGN_IN_WINDOW_MS = 15 * 60 * 1000;
export const SIGN_IN_FAILURES_ALLOWED = 5;

/**
 * express-rate-limit's counters in the database, so every process sees the same failures.
 *
 * The window runs on the injected clock (tests move it), but express-rate-limit compares
 * `resetTime` with `Date.now()`: past it, a successful sign-in is not taken back. So `resetTime`
 * is the window's remaining time put on the wall clock.
 */
class DatabaseStore implements Store {
  readonly localKeys = false;
  private windowMs = SIGN_IN_WINDOW_MS;
  constructor(
    private readonly db: Db,
    private readonly clock: Clock,
  ) {}
  init(options: Options): void {
    this.windowMs = options.windowMs;
  }
  private static hash(key: string): string {
    return createHash('sha256').update(key).digest('hex');
  }
  async increment(key: string) {
    const now = this.clock.now();
    const { hits, resetAt } = await countSignInHit(this.db, DatabaseStore.hash(key), now, this.windowMs);
    return { totalHits: hits, resetTime: new Date(Date.now() + (resetAt.getTime() - now.getTime())) };
  }
  async decrement(key: string): Promise<void> {
    await uncountSignInHit(this.db, DatabaseStore.hash(key));
  }
  async resetKey(key: string): Promise<void> {
    await forgetSignInHits(this.db, DatabaseStore.hash(key));
  }
}

/** Failed sign-ins one address may make in a window, whatever emails they name. */
export const SIGN_IN_FAILURES_PER_ADDRESS = 20;

export type SignInLimitScope = 'address' | 'account';

/**
 * At most twenty failed sign-ins from one address in 15 minutes, whatever the emails (each costs a
 * 32 MiB scrypt: spraying emails must not make that free), and at most five per email and address;
 * then `onLimited` answers until the window ends, before any password is hashed. A successful
 * sign-in does not count (`skipSuccessfulRequests`: any answer under 400 is taken back).
 */
export function signInLimit(
  db: Db,
  clock: Clock,
  onLimited: (req: Request, res: Parameters<RequestHandler>[1], retryAfterSeconds: number, scope: SignInLimitScope) => void,
): RequestHandler {
  const limiter = (limit: number, scope: SignInLimitScope, key: (req: Request) => string) =>
    rateLimit({
      windowMs: SIGN_IN_WINDOW_MS,
      limit,
      skipSuccessfulRequests: true,
      standardHeaders: false,
      legacyHeaders: false,
      store: new DatabaseStore(db, clock),
      keyGenerator: key,
      handler: (req, res) => {
        const resetTime = (req as Request & { rateLimit?: { resetTime?: Date } }).rateLimit?.resetTime;
        const seconds = Math.max(1, Math.ceil(((resetTime?.getTime() ?? 0) - Date.now()) / 1000));
        onLimited(req, res, seconds, scope);
      },
    });
  const perAddress = limiter(SIGN_IN_FAILURES_PER_ADDRESS, 'address', (req) => `address|${ipKeyGenerator(req.ip ?? '')}`);
  const perAccount = limiter(SIGN_IN_FAILURES_ALLOWED, 'account', (req) => `${normalizeEmail(String(req.body?.email ?? ''))}|${ipKeyGenerator(req.ip ?? '')}`);
  return (req, res, next) => {
    void perAddress(req, res, (err?: unknown) => (err ? next(err) : void perAccount(req, res, next)));
  };
}
