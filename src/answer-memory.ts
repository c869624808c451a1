// How much memory the large answers a process is writing may hold together. A list's page is read
// whole before it is written, and written as slowly as its client reads it: a page of a hundred
// subscribers of 1 MiB is 100 MB held for as long, and eight of them at once took the process to
// 1.8 GB. A page whose stored values are large reserves their bytes before it is read (measured by
// the database without reading them), waiting while other large answers hold the memory, and
// gives them back once its answer has ended; past a wait of `waitMs`, the request is refused with a
// 503. Small pages and every other answer never wait. The reservations travel with the page's
// request (PageRequest.reserve), not in an AsyncLocalStorage: on Node 20 that one cost every
// request 6-10% of its CPU (the bench's GET row), every promise being tracked.
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

/** Reserves memory for an answer's large pages (PageRequest.reserve), the page's bytes measured before it is read. */
export type ReserveForAnswer = (bytes: number) => Promise<void>;

/**
 * One answer's reservations of `memory`: a page of LARGE_PAGE_BYTES or more reserves its bytes
 * (smaller ones nothing), held until `ended`'s release is called, once the answer has ended however
 * it did. Granted after that (its client left while it waited), a reservation is given back and
 * refused: the page is not read for no one.
 */
export function answerReservations(memory: AnswerMemory, ended: (release: () => void) => void): ReserveForAnswer {
  const releases: Array<() => void> = [];
  let over = false;
  ended(() => {
    over = true;
    for (const release of releases.splice(0)) release();
  });
  return async (bytes) => {
    if (bytes < LARGE_PAGE_BYTES) return;
    const release = await memory.reserve(bytes);
    if (!over) return void releases.push(release);
    release();
    throw busy(bytes);
  };
}
