// PostgreSQL: a connection of its own that LISTENs on one channel (LISTEN cannot share a pooled
// connection, nor pass through a transaction-mode pooler), reopened when it drops, after 250 ms at
// first and up to 10 s. NOTIFY is best effort: whatever was sent while no one listened is lost, so
// the listener is told (`missed`) each time the connection drops and each time it opens.
import pg from 'pg';
import type { Db } from './knex.js';

export interface ChannelListener {
  /** A notification's payload. */
  heard(payload: string): void;
  /** Notifications may have been missed: now, or while no connection listened. */
  missed(): void;
  error(err: unknown): void;
}

export interface Listening {
  /** Settles once the first connection listens, or has failed (it is then retried meanwhile). */
  opened: Promise<void>;
  close(): Promise<void>;
}

/** Listens on `channel` until closed; answers at once, the connection opening meanwhile. */
export function listenOn(db: Db, channel: string, listener: ChannelListener): Listening {
  const config = db.client.config as { connection: string | pg.ClientConfig };
  let client: pg.Client | undefined;
  let closed = false;
  let retryMs = 250;
  let timer: NodeJS.Timeout | undefined;
  let firstTried: () => void = () => undefined;
  const opened = new Promise<void>((resolve) => (firstTried = resolve));

  const connect = async () => {
    if (closed) return;
    const next = new pg.Client(typeof config.connection === 'string' ? { connectionString: config.connection } : config.connection);
    next.on('notification', (message) => {
      if (message.channel === channel && message.payload) listener.heard(message.payload);
    });
    const reopen = (err?: unknown) => {
      if (err) listener.error(err);
      if (client !== next) return;
      client = undefined;
      listener.missed();
      next.removeAllListeners('end');
      next.end().catch(() => undefined);
      // The retry does not keep a process alive that has nothing else to do.
      if (!closed) timer = setTimeout(connect, retryMs).unref();
      retryMs = Math.min(retryMs * 2, 10_000);
    };
    next.on('error', reopen);
    next.on('end', () => reopen());
    client = next;
    try {
      await next.connect();
      await next.query(`LISTEN ${channel}`);
      retryMs = 250;
      listener.missed();
    } catch (err) {
      reopen(err);
    } finally {
      firstTried();
    }
  };
  void connect();

  return {
    opened,
    async close() {
      closed = true;
      if (timer) clearTimeout(timer);
      const open = client;
      client = undefined;
      if (open) {
        // What ending it causes is no drop to report (nor an unhandled 'error').
        open.removeAllListeners('end').removeAllListeners('error').on('error', () => undefined);
        await open.end().catch(() => undefined);
      }
    },
  };
}
