// How much memory the large answers a process is writing may hold together. A list's page is read
// whole before it is written, and written as slowly as its client reads it: a page of a hundred
// subscribers of 1 MiB is 100 MB held for as long, and eight pages of 80 MB at once took a process
// to 1.5 GB. A page whose stored values are large reserves their bytes before it is read (measured by
// the database without reading them), waiting while other large answers hold the memory, and
// gives them back once its operation has ended (its answer written, or given up); past a wait of
// `waitMs`, the request is refused with a 503. One organization (all its environments) holds at most half of it. Small
// pages and every other answer never wait. The reservations travel with the page's request
// (PageRequest.reserve), not in an AsyncLocalStorage, which on Node 20 has every promise tracked.
import { ApiError } from './errors.js';

/** A page whose large columns hold this many bytes or more reserves them. */
export const LARGE_PAGE_BYTES = 8 * 1024 * 1024;

interface Waiter {
  bytes: number;
  owner: string;
  grant: () => void;
}

/**
 * The memory large answers may hold together, given out first come, first served, of which one
 * owner (an organization) holds at most half: its slow readers cannot keep every other
 * tenant's large pages waiting.
 */
export class AnswerMemory {
  private held = 0;
  private holders = 0;
  private readonly heldBy = new Map<string, number>();
  private readonly waiting: Waiter[] = [];

  constructor(
    readonly capacity: number,
    readonly waitMs: number,
  ) {}

  /** The most one owner holds, unless it holds nothing else. */
  get share(): number {
    return this.capacity / 2;
  }

  /** Bytes held by the answers under way now. */
  get inUse(): number {
    return this.held;
  }

  /**
   * Resolves to the release of `bytes` once they fit beside what is held, and beside what `owner`
   * holds within its share (more than either fits when nothing else is held), or rejects with a
   * 503 after `waitMs`.
   */
  reserve(bytes: number, owner: string): Promise<() => void> {
    return new Promise((resolve, reject) => {
      const waiter: Waiter = {
        bytes,
        owner,
        grant: () => {
          clearTimeout(timer);
          this.held += bytes;
          this.holders++;
          this.heldBy.set(owner, (this.heldBy.get(owner) ?? 0) + bytes);
          let released = false;
          resolve(() => {
            if (released) return;
            released = true;
            this.held -= bytes;
            this.holders--;
            const left = this.heldBy.get(owner)! - bytes;
            if (left === 0) this.heldBy.delete(owner);
            else this.heldBy.set(owner, left);
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

  /**
   * Grants the waiting reservations in order while they fit: one whose owner holds its share lets
   * those behind it go first; one that does not fit in what is left keeps them waiting behind it.
   */
  private grantWaiting(): void {
    for (let i = 0; i < this.waiting.length; ) {
      const waiter = this.waiting[i];
      const own = this.heldBy.get(waiter.owner) ?? 0;
      if (own > 0 && own + waiter.bytes > this.share) {
        i++;
        continue;
      }
      if (this.holders > 0 && this.held + waiter.bytes > this.capacity) return;
      this.waiting.splice(i, 1);
      waiter.grant();
    }
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

/** One answer's reservations: `reserve` for its pages, `release` once its operation has ended. */
export interface AnswerReservations {
  reserve: ReserveForAnswer;
  release(): void;
}

/**
 * One answer's reservations of `memory` for `owner` (its organization): a page of LARGE_PAGE_BYTES
 * or more reserves its bytes (smaller ones nothing), held until `release`, which the caller makes
 * once the operation has ended, its answer written or given up (a client gone mid-read does not
 * free what the read still holds). A reservation granted once `gone` says the client has left is
 * refused: the page is not read for no one.
 */
export function answerReservations(memory: AnswerMemory, owner: string, gone: () => boolean): AnswerReservations {
  const releases: Array<() => void> = [];
  return {
    async reserve(bytes) {
      if (bytes < LARGE_PAGE_BYTES) return;
      const release = await memory.reserve(bytes, owner);
      releases.push(release);
      if (gone()) throw busy(bytes);
    },
    release() {
      for (const release of releases.splice(0)) release();
    },
  };
}
