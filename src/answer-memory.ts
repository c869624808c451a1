// How much memory the large answers a process is writing may hold together. A list's page is read
// whole before it is written, and written as slowly as its client reads it: a page of a hundred
// subscribers of 1 MiB is 100 MB held for as long, and eight of them at once took the process to
// 1.8 GB. A page whose stored values are large reserves their bytes before it is read (measured by
// the database without reading them), waiting while other large answers hold the memory, and
// gives them back once its answer has ended; past a wait of `waitMs`, the request is refused with a
// 503. Small pages and every other answer never wait.
import { AsyncLocalStorage } from 'node:async_hooks';
import { ApiError } from './errors.js';

/** A page whose large columns hold this many bytes or more reserves them. */
export const LARGE_PAGE_BYTES = 8 * 1024 * 1024;

interface Waiter {
  bytes: number;
  grant: () => void;
}

/** The memory large answers may hold together, given out first come, first served. */
export class AnswerMemory {
  private held = 0;
  private holders = 0;
  private readonly waiting: Waiter[] = [];

  constructor(
    readonly capacity: number,
    readonly waitMs: number,
  ) {}

  /** Bytes held by the answers under way now. */
  get inUse(): number {
    return this.held;
  }

  /**
   * Resolves to the release of `bytes` once they fit beside what is held (more than the capacity
   * fits when nothing else is held), or rejects with a 503 after `waitMs`.
   */
  reserve(bytes: number): Promise<() => void> {
    return new Promise((resolve, reject) => {
      const waiter: Waiter = {
        bytes,
        grant: () => {
          clearTimeout(timer);
          this.held += bytes;
          this.holders++;
          let released = false;
          resolve(() => {
            if (released) return;
            released = true;
            this.held -= bytes;
            this.holders--;
            this.grantWaiting();
          });
        },
      };
      const timer = setTimeout(() => {
        this.waiting.splice(this.waiting.indexOf(waiter), 1);
        // The one that gave up may have kept smaller ones behind it waiting.
        this.grantWaiting();
        reject(busy(bytes));
      }, this.waitMs);
      timer.unref();
      this.waiting.push(waiter);
      this.grantWaiting();
    });
  }

  /** Grants the waiting reservations, in order, while the first of them fits. */
  private grantWaiting(): void {
    while (this.waiting.length > 0 && (this.holders === 0 || this.held + this.waiting[0].bytes <= this.capacity)) this.waiting.shift()!.grant();
  }
}

function busy(bytes: number): ApiError {
  return new ApiError(
    503,
    `This page's items take ${bytes} bytes, and the large answers under way hold the memory this server allows them; retry shortly, or ask for fewer with limit`,
    undefined,
    { 'Retry-After': '5' },
  );
}

/** The answer a request is making: its server's memory, and what it reserved. */
interface AnswerScope {
  memory: AnswerMemory;
  releases: Array<() => void>;
  /** Whether the answer has ended: what is granted after that is given back at once. */
  ended: boolean;
}

const current = new AsyncLocalStorage<AnswerScope>();

/**
 * Runs `make` (a request's operation) with `memory` for its large pages; what it reserves is held
 * until the release `ended` is given is called (once the answer has ended, however it did).
 */
export async function makingAnswer<T>(memory: AnswerMemory, make: () => Promise<T>, ended: (release: () => void) => void): Promise<T> {
  const scope: AnswerScope = { memory, releases: [], ended: false };
  ended(() => {
    scope.ended = true;
    for (const release of scope.releases.splice(0)) release();
  });
  return current.run(scope, make);
}

/**
 * Reserves `bytes` for the page about to be read, when they are LARGE_PAGE_BYTES or more and a
 * request is making its answer (a read made for anything else holds nothing).
 */
export async function reserveForAnswer(bytes: number): Promise<void> {
  const scope = current.getStore();
  if (!scope || bytes < LARGE_PAGE_BYTES) return;
  const release = await scope.memory.reserve(bytes);
  if (!scope.ended) return void scope.releases.push(release);
  // Its client left while it waited: the page is not read for no one.
  release();
  throw busy(bytes);
}
