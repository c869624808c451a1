// The thread of checkpointer.ts. PASSIVE never waits for readers or writers: it copies what it can,
// and a busy moment waits for the next turn. After a checkpoint whose reading changed it tells the
// writer how long the log is and how much of it is copied (an idle process is not woken); a request
// ('now') gets a checkpoint and its reading at once.
import { parentPort, workerData } from 'node:worker_threads';
import Database from 'better-sqlite3';
import type { LogReading } from './checkpointer.js';

const port = parentPort!;
const { file, intervalMs } = workerData as { file: string; intervalMs: number };
const db = new Database(file, { fileMustExist: true });
db.pragma('synchronous = NORMAL');

function checkpoint(): LogReading {
  try {
    const [{ log, checkpointed }] = db.pragma('wal_checkpoint(PASSIVE)') as Array<{ log: number; checkpointed: number }>;
    return { pages: log, copied: checkpointed };
  } catch {
    // Busy or closing: the next turn, or the writers' own backstop, copies it.
    return { pages: -1, copied: -1 };
  }
}

let last: LogReading = { pages: 0, copied: 0 };
const timer = setInterval(() => {
  const reading = checkpoint();
  if (reading.pages !== last.pages || reading.copied !== last.copied) port.postMessage(reading);
  last = reading;
}, intervalMs);
port.on('message', (message: 'now' | 'stop') => {
  if (message === 'now') {
    // The writer that asked starts the log over next: the same reading told again by the next turn
    // would be taken for a new one, and make the next writer wait for a log already started over.
    last = checkpoint();
    port.postMessage({ ...last, asked: true });
    return;
  }
  clearInterval(timer);
  checkpoint();
  db.close();
  port.close();
});
