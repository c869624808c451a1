// The thread of background-reader.ts: whole-table reads on a read-only connection of its own.
import { parentPort, workerData } from 'node:worker_threads';
import Database from 'better-sqlite3';

const port = parentPort!;
const { file } = workerData as { file: string };
const db = new Database(file, { readonly: true, fileMustExist: true });
db.pragma('busy_timeout = 5000');
// The SQL functions every connection has (sqlite.ts defineFunctions): a filtered count runs here too.
db.function('unicode_lower', { deterministic: true }, (value: unknown) => (typeof value === 'string' ? value.toLowerCase() : value));
const statements = new Map<string, Database.Statement>();

port.on('message', (message: 'stop' | { id: number; sql: string; bindings: unknown[] }) => {
  if (message === 'stop') {
    db.close();
    port.close();
    return;
  }
  try {
    let statement = statements.get(message.sql);
    if (!statement) {
      statement = db.prepare(message.sql);
      if (statements.size < 50) statements.set(message.sql, statement);
    }
    port.postMessage({ id: message.id, rows: statement.all(...message.bindings) });
  } catch (err) {
    port.postMessage({ id: message.id, error: err instanceof Error ? err.message : String(err) });
  }
});
