// SQLite in WAL mode appends commits to the log, and from time to time copies the log back into the
// database file (a checkpoint), which ends in fsync. By default the commit that takes the log past
// 1,000 pages does it, on the thread that committed, and a fan-out batch waited for those fsyncs as
// long as it worked on its own inserts (bench/README.md). Here a thread of its own does it, so the waiting happens beside the work; the writers keep a checkpoint of
// their own only as a backstop for a log that grows past BACKSTOP_PAGES (the thread stopped, or a
// long read holds it back).
import { startThread } from './threads.js';

/** Pages (4 KiB each) after which a commit checkpoints by itself, when the thread runs. */
export const BACKSTOP_PAGES = 10_000;

/** How often the thread checkpoints: at fan-out speed, about 1,000 deliveries' rows apart. */
const INTERVAL_MS = 100;

export interface Checkpointer {
  /** Checkpoints once more, closes the thread's connection and ends the thread. */
  stop(): Promise<void>;
}

/** Starts checkpointing `file` (a SQLite database in WAL mode) on a thread of its own. */
export function startCheckpointer(file: string): Checkpointer {
  const worker = startThread(new URL('./checkpointer-thread', import.meta.url), { workerData: { file, intervalMs: INTERVAL_MS } });
  // It must never keep a process alive that has nothing else to do.
  worker.unref();
  worker.on('error', (err) => process.emitWarning(`SQLite checkpoints in the background stopped (${err.message}); commits checkpoint by themselves`));
  const exited = new Promise<void>((resolve) => worker.once('exit', () => resolve()));
  return {
    async stop() {
      worker.postMessage('stop');
      await exited;
    },
  };
}
