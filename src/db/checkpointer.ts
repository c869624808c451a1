// SQLite in WAL mode appends commits to the log, and from time to time copies the log back into the
// database file (a checkpoint), which ends in fsync. By default the commit that takes the log past
// 1,000 pages does it, on the thread that committed, and a fan-out batch waited for those fsyncs as
// long as it worked on its own inserts (bench/README.md, "Checkpoints"). Here a thread of its own
// does it, so the waiting happens beside the work; the writers keep a checkpoint of their own only
// as a backstop for a log that grows past BACKSTOP_PAGES (the thread stopped, or a long read holds
// it back).
//
// Copying is not enough to keep the log short: a writer starts the log over only if, when its
// transaction begins, every page of it is already copied. Under a steady stream of writes (a
// fan-out's batches, back to back) that moment never comes, the log grows to the backstop, and the
// backstop's checkpoint holds the event loop while it copies and syncs. So once the log is long
// (ROOM_PAGES), a write transaction waits before it begins, without holding the event loop, until
// the thread has copied everything (`roomToWrite`): that transaction starts the log over.
import { startThread } from './threads.js';

/** Pages (4 KiB each) after which a commit checkpoints by itself, when the thread runs. */
export const BACKSTOP_PAGES = 10_000;

/** A log this long makes the next write transaction wait for the thread to copy it all. */
const ROOM_PAGES = 2_000;

/** How often the thread checkpoints: at fan-out speed, about 1,000 deliveries' rows apart. */
const INTERVAL_MS = 100;

/** Checkpoints asked for at most, one after another, before a write goes on regardless. */
const MAX_TRIES = 3;

/** What a checkpoint found: the log's length in pages and how many of them are in the file (-1, -1 when it could not run). */
export interface LogReading {
  pages: number;
  copied: number;
}

export interface Checkpointer {
  /**
   * Resolves at once while the log is short; once it is long, after the thread has copied all of
   * it (so that the next write transaction starts it over), or has tried MAX_TRIES times.
   */
  roomToWrite(): Promise<void>;
  /** Checkpoints once more, closes the thread's connection and ends the thread. */
  stop(): Promise<void>;
}

/** Starts checkpointing `file` (a SQLite database in WAL mode) on a thread of its own. */
export function startCheckpointer(file: string): Checkpointer {
  const worker = startThread(new URL('./checkpointer-thread', import.meta.url), { workerData: { file, intervalMs: INTERVAL_MS } });
  // It must never keep a process alive that has nothing else to do.
  worker.unref();
  worker.on('error', (err) => process.emitWarning(`SQLite checkpoints in the background stopped (${err.message}); commits checkpoint by themselves`));
  let running = true;
  /** The log's length at the thread's last reading. */
  let pages = 0;
  /** Who waits for the checkpoint asked for; one at a time, since `waiting` is shared. */
  let answer: ((reading: LogReading) => void) | undefined;
  let waiting: Promise<void> | undefined;
  const exited = new Promise<void>((resolve) =>
    worker.once('exit', () => {
      running = false;
      answer?.({ pages: -1, copied: -1 });
      resolve();
    }),
  );
  worker.on('message', (reading: LogReading & { asked?: boolean }) => {
    pages = reading.pages;
    if (reading.asked) answer?.(reading);
  });
  const checkpointNow = () =>
    new Promise<LogReading>((resolve) => {
      answer = resolve;
      // Waited for, the thread keeps the process alive until it answers.
      worker.ref();
      worker.postMessage('now');
    }).finally(() => {
      answer = undefined;
      worker.unref();
    });
  const copyAll = async () => {
    for (let tries = 0; tries < MAX_TRIES && running; tries++) {
      const reading = await checkpointNow();
      if (reading.pages >= 0 && reading.copied === reading.pages) return;
    }
  };
  return {
    roomToWrite() {
      if (pages < ROOM_PAGES || !running) return Promise.resolve();
      waiting ??= copyAll().then(() => {
        // Copied (this transaction starts the log over), or held back by a reader: either way the
        // writes go on until the thread's next reading says otherwise.
        pages = 0;
        waiting = undefined;
      });
      return waiting;
    },
    async stop() {
      worker.postMessage('stop');
      await exited;
    },
  };
}
