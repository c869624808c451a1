// The thread of checkpointer.ts. PASSIVE never waits for readers or writers: it copies what it can,
// and a busy moment waits for the next turn. After each checkpoint it tells the writer how long the
// log is and how much of it is copied; a request ('now') gets a checkpoint at once.
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

const timer = setInterval(() => port.postMessage(checkpoint()), intervalMs);
port.on('message', (message: 'now' | 'stop') => {
  if (message === 'now') {
    port.postMessage({ ...checkpoint(), asked: true });
    return;
  }
  clearInterval(timer);
  checkpoint();
  db.close();
  port.close();
});
