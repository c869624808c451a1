// PostgreSQL: one connection per database handle that LISTENs on every channel asked for (LISTEN
// cannot share a pooled connection, nor pass through a transaction-mode pooler), reopened when it
// drops, after 250 ms at first and up to 10 s; it ends once no one listens. NOTIFY is best effort:
// whatever was sent while no one listened is lost, so every listener is told (`missed`) each time
// the connection drops and each time it opens.
import pg from 'pg';
import type { Db } from './knex.js';
import { databaseOf } from './after-commit.js';

export interface ChannelListener {
  /** A notification's payload. */
  heard(payload: string): void;
  /** Notifications may have been missed: now, or while no connection listened. */
  missed(): void;
  error(err: unknown): void;
}

export interface Listening {
  /** Settles once the connection listens on this channel, or has failed (it is then retried meanwhile). */
  opened: Promise<void>;
  close(): Promise<void>;
}

/** The LISTEN connection of one database handle, and who listens on which channel through it. */
class SharedListener {
  private readonly channels = new Map<string, Set<ChannelListener>>();
  private client?: pg.Client;
  /** Channels the open connection LISTENs on: none on a new one. */
  private listening = new Set<string>();
  private retryMs = 250;
  private timer?: NodeJS.Timeout;
  /** Who waits for a channel to be listened on, or for the connection's attempt to fail. */
  private waiting: Array<{ channel: string; settle: () => void }> = [];

  constructor(private readonly connection: string | pg.ClientConfig) {}

  add(channel: string, listener: ChannelListener): Promise<void> {
    let set = this.channels.get(channel);
    if (!set) this.channels.set(channel, (set = new Set()));
    set.add(listener);
    const opened = new Promise<void>((settle) => this.waiting.push({ channel, settle }));
    if (!this.client && !this.timer) void this.connect();
    // A LISTEN that fails with its connection is made again when the connection reopens.
    else if (this.client) this.listenToAll(this.client).catch(() => this.settleWaiting((waited) => waited === channel));
    return opened;
  }

  /** Stops telling `listener` (a channel left without listeners stays LISTENed on, its notifications told to no one); the connection ends with the last listener. */
  async remove(channel: string, listener: ChannelListener): Promise<void> {
    const set = this.channels.get(channel);
    set?.delete(listener);
    if (set?.size === 0) this.channels.delete(channel);
    if (this.channels.size > 0) return;
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    const open = this.client;
    this.client = undefined;
    this.settleWaiting(() => true);
    if (open) {
      // What ending it causes is no drop to report (nor an unhandled 'error').
      open.removeAllListeners('end').removeAllListeners('error').on('error', () => undefined);
      await open.end().catch(() => undefined);
    }
  }

  private listenersOf(): ChannelListener[] {
    return [...this.channels.values()].flatMap((set) => [...set]);
  }

  private settleWaiting(done: (channel: string) => boolean): void {
    const settled = this.waiting.filter(({ channel }) => done(channel));
    this.waiting = this.waiting.filter(({ channel }) => !done(channel));
    for (const { settle } of settled) settle();
  }

  private async connect(): Promise<void> {
    this.timer = undefined;
    if (this.channels.size === 0) return;
    const next = new pg.Client(typeof this.connection === 'string' ? { connectionString: this.connection } : this.connection);
    next.on('notification', (message) => {
      if (!message.payload) return;
      for (const listener of this.channels.get(message.channel) ?? []) listener.heard(message.payload);
    });
    const reopen = (err?: unknown) => {
      if (err) for (const listener of this.listenersOf()) listener.error(err);
      if (this.client !== next) return;
      this.client = undefined;
      for (const listener of this.listenersOf()) listener.missed();
      next.removeAllListeners('end');
      next.end().catch(() => undefined);
      // The retry does not keep a process alive that has nothing else to do.
      if (this.channels.size > 0) this.timer = setTimeout(() => void this.connect(), this.retryMs).unref();
      this.retryMs = Math.min(this.retryMs * 2, 10_000);
    };
    next.on('error', reopen);
    next.on('end', () => reopen());
    this.client = next;
    this.listening = new Set();
    try {
      await next.connect();
      await this.listenToAll(next);
      this.retryMs = 250;
      for (const listener of this.listenersOf()) listener.missed();
    } catch (err) {
      reopen(err);
      // Those waiting for this attempt are told it failed; the retry goes on meanwhile.
      this.settleWaiting(() => true);
    }
  }

  /** LISTENs on the channels asked for that `client` does not listen on yet. */
  private async listenToAll(client: pg.Client): Promise<void> {
    for (const channel of this.channels.keys()) {
      if (this.listening.has(channel)) continue;
      this.listening.add(channel);
      await client.query(`LISTEN ${channel}`);
    }
    if (this.client === client) this.settleWaiting((channel) => this.listening.has(channel));
  }
}

const shared = new WeakMap<object, SharedListener>();

/**
 * Listens on `channel` until closed, through the database handle's one LISTEN connection; answers
 * at once, the connection opening meanwhile.
 */
export function listenOn(db: Db, channel: string, listener: ChannelListener): Listening {
  const database = databaseOf(db);
  let connection = shared.get(database);
  if (!connection) {
    const config = db.client.config as { connection: string | pg.ClientConfig };
    shared.set(database, (connection = new SharedListener(config.connection)));
  }
  const opened = connection.add(channel, listener);
  let closed = false;
  return {
    opened,
    async close() {
      if (closed) return;
      closed = true;
      await connection.remove(channel, listener);
    },
  };
}
