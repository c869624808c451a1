// Reads that scan a whole table (every job counted for /metrics, an environment's notifications
// counted for their stats) take tens to hundreds of milliseconds a million rows on SQLite, and so
// does a list's page of large rows (a hundred of 1 MiB); better-sqlite3 runs a statement on the
// thread that calls it: the event loop, and every request in flight with it, would wait that long.
// Such reads run here instead, on a thread of their own with a read-only connection to the same
// file, and the event loop goes on meanwhile.
import type { Worker } from 'node:worker_threads';
import { startThread } from './threads.js';

type Binding = string | number | null;

interface Pending {
  sql: string;
  /** The rows of the slices received so far. */
  rows: unknown[];
  resolve(rows: unknown[]): void;
  reject(error: Error): void;
}

interface Reply {
  id: number;
  rows?: unknown[];
  /** More slices of these rows follow, each sent when asked for. */
  more?: boolean;
  error?: string;
}

/** A thread and the reads waiting for it. */
interface Thread {
  worker: Worker;
  pending: Map<number, Pending>;
}

/** A SQLite file's reads off the event loop: the thread starts with the first read. */
export class BackgroundReader {
  private thread?: Thread;
  private lastId = 0;

  constructor(private readonly file: string) {}

  /** The rows of one read-only statement, with `?` placeholders, as better-sqlite3 gives them. */
  read<T>(sql: string, bindings: readonly Binding[]): Promise<T[]> {
    const { worker, pending } = (this.thread ??= this.start());
    const id = ++this.lastId;
    return new Promise<T[]>((resolve, reject) => {
      pending.set(id, { sql, rows: [], resolve: resolve as Pending['resolve'], reject });
      // The thread keeps the process alive only while a read waits for it.
      if (pending.size === 1) worker.ref();
      worker.postMessage({ id, sql, bindings });
    });
  }

  /** Closes the thread's connection and ends the thread; a later read starts another. */
  async close(): Promise<void> {
    const thread = this.thread;
    if (!thread) return;
    this.thread = undefined;
    const exited = new Promise<void>((resolve) => thread.worker.once('exit', () => resolve()));
    thread.worker.postMessage('stop');
    await exited;
  }

  private start(): Thread {
    const worker = startThread(new URL('./background-reader-thread', import.meta.url), { workerData: { file: this.file } });
    const thread: Thread = { worker, pending: new Map() };
    worker.unref();
    worker.on('message', ({ id, rows, more, error }: Reply) => {
      const waiting = thread.pending.get(id);
      if (!waiting) return;
      // A large answer comes a slice at a time, the next asked for once this one is taken: every
      // message waiting for the event loop is taken in one go, and copying all of them at once
      // would hold the loop as long as reading them there.
      if (more) {
        for (const row of rows!) waiting.rows.push(row);
        worker.postMessage({ next: id });
        return;
      }
      thread.pending.delete(id);
      if (thread.pending.size === 0) worker.unref();
      if (error !== undefined) waiting.reject(new Error(`${waiting.sql} - ${error}`));
      else waiting.resolve(waiting.rows.length === 0 ? rows! : [...waiting.rows, ...rows!]);
    });
    // A thread that failed (its connection would not open) or ended fails what waits for it; the next read starts another.
    const fail = (error: Error) => {
      if (this.thread === thread) this.thread = undefined;
      for (const waiting of thread.pending.values()) waiting.reject(new Error(`${waiting.sql} - ${error.message}`));
      thread.pending.clear();
    };
    worker.on('error', fail);
    worker.on('exit', (code) => fail(new Error(`the background reader's thread ended (exit code ${code})`)));
    return thread;
  }
}
