import { pino, type DestinationStream, type Logger } from 'pino';

export type { Logger };

/** JSON lines at `level`, to stdout or (tests) to `destination`. */
export function createLogger(level: string, destination?: DestinationStream): Logger {
  return pino(
    {
      level,
      base: undefined,
      // Belt and braces: credentials and keys never reach the log, whatever a caller passes in.
      redact: ['req.headers.authorization', '*.credentials', '*.password', '*.apiKey', '*.secretKey', '*.token'],
    },
    destination,
  );
}

/** How often a failure that goes on is summed up in the log; a failure after a quiet gap this long starts a new run. */
const SUMMED_UP_EVERY_MS = 60_000;

/**
 * The log of a task tried again and again while something it needs is down (the database,
 * mostly): its first failure with the error, then, while failures go on, one line a minute with
 * their count and the last error's message, and one line when the task works again
 * (`succeeded`) or, for a task that cannot tell, once a minute has passed without a failure. A
 * runner whose database was down logged every failed try with its stack: 94 lines, 15 KB, a
 * second, burying everything else the log said.
 */
export class FailureLog {
  private failures = 0;
  private since = 0;
  private lastAt = 0;
  private summedUpAt = 0;

  constructor(
    private readonly logger: Logger,
    private readonly message: string,
    private readonly bindings: Record<string, unknown> = {},
    private readonly now: () => number = Date.now,
  ) {}

  /** Records a failure; answers how many came in a row, this one included. */
  failed(err: unknown): number {
    const at = this.now();
    // A minute without failures ended the last run, though nobody said it works again.
    if (this.failures > 0 && at - this.lastAt >= SUMMED_UP_EVERY_MS) this.ended(this.lastAt, false);
    this.failures += 1;
    this.lastAt = at;
    if (this.failures === 1) {
      this.since = at;
      this.summedUpAt = at;
      this.logger.error({ ...this.bindings, err }, this.message);
    } else if (at - this.summedUpAt >= SUMMED_UP_EVERY_MS) {
      this.summedUpAt = at;
      const last = err instanceof Error ? err.message : String(err);
      this.logger.error({ ...this.bindings, failures: this.failures, sinceMs: at - this.since, last }, `${this.message}; still failing`);
    }
    return this.failures;
  }

  /** The task worked: ends a run of failures, saying how many there were and how long it lasted. */
  succeeded(): void {
    if (this.failures > 0) this.ended(this.now(), true);
  }

  /**
   * The end of a run (the task working again, or a quiet minute): its count and length, unless it
   * was the one failure already logged in full and nothing says it works again.
   */
  private ended(at: number, worksAgain: boolean): void {
    if (this.failures > 1 || worksAgain) {
      this.logger.info({ ...this.bindings, failures: this.failures, ms: at - this.since }, `${this.message} earlier; ${worksAgain ? 'it works again' : 'none since'}`);
    }
    this.failures = 0;
  }
}
