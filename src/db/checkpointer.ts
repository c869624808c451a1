// SQLite in WAL mode appends commits to the log, and from time to time copies the log back into the
// database file (a checkpoint), which ends in fsync. By default the commit that takes the log past
// 1,000 pages does it, on the thread that committed: a fan-out batch of 500 deliveries spent about
// as long waiting for those fsyncs as on its own inserts. Here a thread of its own does it, so the
// waiting happens beside the work; the writers keep a checkpoint of their own only as a backstop
// for a log that grows past BACKSTOP_PAGES (the thread stopped, or a long read holds it back).
import { Worker } from 'node:worker_threads';
import { createRequire } from 'node:module';

/** Pages (4 KiB each) after which a commit checkpoints by itself, when the thread runs. */
export const BACKSTOP_PAGES = 10_000;

/** How often the thread checkpoints: at fan-out speed, about 1,000 deliveries' rows apart. */
const INTERVAL_MS = 100;

// The thread's code, kept as text: it runs as it is, whether Herald runs from src/ or from the build.
// PASSIVE never waits for readers or writers: it copies what it can, and a busy moment waits for the next turn.
const THREAD = `
const { workerData, parentPort } = require('node:worker_threads');
const Database = require(workerData.driver);
const db = new Database(workerData.file, { fileMustExist: true });
db.pragma('synchronous = NORMAL');
const checkpoint = () => {
  try {
    db.pragma('wal_checkpoint(PASSIVE)');
  } catch {}
};
const timer = setInterval(checkpoint, workerData.intervalMs);
parentPort.on('message', () => {
  clearInterval(timer);
  checkpoint();
  db.close();
  parentPort.close();
});
`;

export interface Checkpointer {
  /** Checkpoints once more, closes the thread's connection and ends the thread. */
  stop(): Promise<void>;
}

/** Starts checkpointing `file` (a SQLite database in WAL mode) on a thread of its own. */
export function startCheckpointer(file: string): Checkpointer {
  const driver = createRequire(import.meta.url).resolve('better-sqlite3');
  const worker = new Worker(THREAD, { eval: true, workerData: { driver, file, intervalMs: INTERVAL_MS } });
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
