// The thread of checkpointer.ts. PASSIVE never waits for readers or writers: it copies what it can,
// and a busy moment waits for the next turn.
import { parentPort, workerData } from 'node:worker_threads';
import Database from 'better-sqlite3';

const port = parentPort!;
const { file, intervalMs } = workerData as { file: string; intervalMs: number };
const db = new Database(file, { fileMustExist: true });
db.pragma('synchronous = NORMAL');

function checkpoint(): void {
  try {
    db.pragma('wal_checkpoint(PASSIVE)');
  } catch {
    // Busy or closing: the next turn, or the writers' own backstop, copies it.
  }
}

const timer = setInterval(checkpoint, intervalMs);
port.on('message', () => {
  clearInterval(timer);
  checkpoint();
  db.close();
  port.close();
});
