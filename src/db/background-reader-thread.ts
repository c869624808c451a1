// The thread of background-reader.ts: reads on a read-only connection of its own, answered a slice
// of rows at a time (each slice when the event loop has taken the last one).
import { parentPort, workerData } from 'node:worker_threads';
import Database from 'better-sqlite3';
import { slicesByText } from './chunks.js';

type Message = 'stop' | { id: number; sql: string; bindings: unknown[] } | { next: number };

const port = parentPort!;
const { file } = workerData as { file: string };
const db = new Database(file, { readonly: true, fileMustExist: true });
db.pragma('busy_timeout = 5000');
// The SQL functions every connection has (sqlite.ts defineFunctions): a filtered count runs here too.
db.function('unicode_lower', { deterministic: true }, (value: unknown) => (typeof value === 'string' ? value.toLowerCase() : value));
const statements = new Map<string, Database.Statement>();
/** Each read's slices not sent yet. */
const unsent = new Map<number, unknown[][]>();

function sendSlice(id: number): void {
  const slices = unsent.get(id);
  if (!slices) return;
  const rows = slices.shift()!;
  if (slices.length === 0) unsent.delete(id);
  port.postMessage({ id, rows, more: slices.length > 0 });
}

port.on('message', (message: Message) => {
  if (message === 'stop') {
    db.close();
    port.close();
    return;
  }
  if ('next' in message) {
    sendSlice(message.next);
    return;
  }
  try {
    let statement = statements.get(message.sql);
    if (!statement) {
      statement = db.prepare(message.sql);
      if (statements.size < 50) statements.set(message.sql, statement);
    }
    const rows = statement.all(...message.bindings);
    unsent.set(message.id, rows.length > 0 ? slicesByText(rows) : [[]]);
    sendSlice(message.id);
  } catch (err) {
    port.postMessage({ id: message.id, error: err instanceof Error ? err.message : String(err) });
  }
});
