// PostgreSQL: one dedicated LISTEN connection per API process (LISTEN cannot share a pooled
// connection, nor pass through a transaction-mode pooler), which hears the inbox changes other
// processes commit (repos/inbox.ts notifyInboxChanged) and tells this process's streams on the
// inbox bus. NOTIFY is best effort: a dropped connection is reopened, and on reopening every
// stream is told to look (`*`); the hub's periodic catch-up covers what falls between.
import pg from 'pg';
import type { Db } from './knex.js';
import { isPostgres } from './knex.js';
import { INBOX_CHANNEL } from './repos/inbox.js';
import { tellInbox } from './inbox-bus.js';

export interface InboxListenerHandle {
  close(): Promise<void>;
}

/**
 * Starts listening for the inbox changes of other processes (`origin` names this one, whose own
 * changes reach its streams after their commit already). SQLite: nothing to listen to.
 */
export function startInboxListener(db: Db, origin: string, onError: (err: unknown) => void = () => undefined): InboxListenerHandle {
  if (!isPostgres(db)) return { close: async () => undefined };
  const config = db.client.config as { connection: string | pg.ClientConfig };
  let client: pg.Client | undefined;
  let closed = false;
  let retryMs = 250;
  let timer: NodeJS.Timeout | undefined;

  const connect = async () => {
    if (closed) return;
    const next = new pg.Client(typeof config.connection === 'string' ? { connectionString: config.connection } : config.connection);
    next.on('notification', (message) => {
      if (message.channel !== INBOX_CHANNEL || !message.payload) return;
      const space = message.payload.indexOf(' ');
      if (message.payload.slice(0, space) === origin) return;
      const keys = message.payload.slice(space + 1);
      tellInbox(db, keys === '*' ? '*' : keys.split(','));
    });
    const reopen = (err?: unknown) => {
      if (err) onError(err);
      if (client !== next) return;
      client = undefined;
      next.removeAllListeners('end');
      next.end().catch(() => undefined);
      if (!closed) timer = setTimeout(connect, retryMs);
      retryMs = Math.min(retryMs * 2, 10_000);
    };
    next.on('error', reopen);
    next.on('end', () => reopen());
    client = next;
    try {
      await next.connect();
      await next.query(`LISTEN ${INBOX_CHANNEL}`);
      retryMs = 250;
      // What was committed while no one listened.
      tellInbox(db, '*');
    } catch (err) {
      reopen(err);
    }
  };
  void connect();

  return {
    async close() {
      closed = true;
      if (timer) clearTimeout(timer);
      const open = client;
      client = undefined;
      if (open) {
        open.removeAllListeners('end');
        await open.end().catch(() => undefined);
      }
    },
  };
}
