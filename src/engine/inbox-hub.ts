// The open inbox streams of this process, and how they learn of new events. A stream starts from
// the subscriber's counts (or replays what came after its Last-Event-ID), then is sent each event
// in `seq` order. The hub learns which subscribers changed from the inbox bus (after this process
// commits, or when another process's NOTIFY arrives) and reads their new events for all of their
// streams at once: one query per woken batch, not one per stream. Every few seconds it reads for
// every stream anyway, which covers a NOTIFY lost with a dropped connection.
import type { Config } from '../config.js';
import type { Deps } from '../deps.js';
import * as repo from '../db/repos/inbox.js';
import { listenInbox } from '../db/inbox-bus.js';
import { startInboxListener, type InboxListenerHandle } from '../db/inbox-listener.js';
import { originOf } from '../db/inbox-bus.js';

/** Where a stream's events go (the HTTP layer writes them as server-sent events). */
export interface InboxSink {
  /** An event with its number; `payload` is its JSON. */
  event(seq: number, type: repo.InboxEventType, payload: string): void;
  /** The stream ends (the server is stopping). */
  end(): void;
  /** Resolves once what was written has mostly been sent (or the stream is gone): replay pages wait for it. */
  drained(): Promise<void>;
}

export interface HubOptions {
  /** How often every stream is caught up from the database, whatever it was told. */
  catchUpMs?: number;
}

interface Stream {
  /** Whose share of this process's streams it takes. */
  organizationId: string;
  subscriberKey: string;
  sink: InboxSink;
  /** The last `seq` sent. */
  delivered: number;
  /** False while its replay is under way: events then wait for it. */
  ready: boolean;
}

/** Streams one subscriber may hold open on this process (its tabs and devices), so that one token cannot take every socket. */
export const MAX_STREAMS_PER_SUBSCRIBER = 10;

/** Why a stream may not open here: its subscriber, its organization (all its environments) or this process holds all it may. */
export type StreamsFull = 'subscriber' | 'organization' | 'process';

/** Where a reconnecting stream resumes: after an event's number, or `unknown` for an id Herald never sent. */
export type LastEventId = number | 'unknown';

const CHUNK = 1000;
const REPLAY_PAGE = 500;

export class InboxHub {
  private readonly streams = new Map<string, Set<Stream>>();
  /** Open streams in all, and by organization. */
  private total = 0;
  private readonly ofOrganization = new Map<string, number>();
  /** Streams this process holds at most, and one organization of them. */
  readonly limits: Config['inboxStreams'];
  private readonly woken = new Set<string>();
  private wakeAll = false;
  private flushing: Promise<void> | undefined;
  private again = false;
  private unlisten: (() => void) | undefined;
  private listener: InboxListenerHandle | undefined;
  private timer: NodeJS.Timeout | undefined;
  private readonly catchUpMs: number;

  constructor(
    private readonly deps: Deps,
    options: HubOptions = {},
  ) {
    this.catchUpMs = options.catchUpMs ?? 3000;
    this.limits = deps.config.inboxStreams;
  }

  /** How many streams are open. */
  get size(): number {
    return this.total;
  }

  /** Why a subscriber of an organization may not open another stream here, if it may not. */
  fullFor(organizationId: string, subscriberKey: string): StreamsFull | undefined {
    if ((this.streams.get(subscriberKey)?.size ?? 0) >= MAX_STREAMS_PER_SUBSCRIBER) return 'subscriber';
    if ((this.ofOrganization.get(organizationId) ?? 0) >= this.limits.perOrganization) return 'organization';
    if (this.total >= this.limits.max) return 'process';
    return undefined;
  }

  /**
   * Opens a stream: without `lastEventId` it begins with a `counts` event (numbered with the
   * subscriber's last event, so a reconnect resumes from there); with one it replays what came
   * after, or sends `reset` when that is no longer kept (or the id is not one this subscriber
   * reached). Answers the function that closes it.
   */
  async open(organizationId: string, subscriberKey: string, lastEventId: LastEventId | undefined, sink: InboxSink): Promise<() => void> {
    this.start();
    const stream: Stream = { organizationId, subscriberKey, sink, delivered: 0, ready: false };
    let set = this.streams.get(subscriberKey);
    if (!set) this.streams.set(subscriberKey, (set = new Set()));
    set.add(stream);
    this.total += 1;
    this.ofOrganization.set(organizationId, (this.ofOrganization.get(organizationId) ?? 0) + 1);
    const close = () => this.remove(stream);
    try {
      await this.begin(stream, lastEventId);
    } catch (err) {
      close();
      throw err;
    }
    stream.ready = true;
    this.wake([subscriberKey]);
    return close;
  }

  private async begin(stream: Stream, lastEventId: LastEventId | undefined): Promise<void> {
    const { db } = this.deps;
    const { seq, ...counts } = await repo.readCounts(db, stream.subscriberKey);
    const reset = () => {
      stream.sink.event(seq, 'reset', JSON.stringify({ type: 'reset' }));
      stream.delivered = seq;
    };
    if (lastEventId === undefined) {
      stream.sink.event(seq, 'counts', JSON.stringify({ type: 'counts', counts }));
      stream.delivered = seq;
      return;
    }
    if (lastEventId === 'unknown' || lastEventId > seq) return reset();
    if (lastEventId === seq) {
      stream.delivered = seq;
      return;
    }
    const oldest = await repo.oldestSeq(db, stream.subscriberKey);
    if (oldest === 0 || oldest > lastEventId + 1) return reset();
    stream.delivered = lastEventId;
    for (;;) {
      const events = await repo.eventsAfter(db, stream.subscriberKey, stream.delivered, REPLAY_PAGE);
      this.send(stream, events);
      if (events.length < REPLAY_PAGE) return;
      // A client reading slowly is not sent the next page before it has taken this one.
      await stream.sink.drained();
    }
  }

  /** Sends a stream the events after what it has, in order; a hole (events pruned meanwhile) is a reset. */
  private send(stream: Stream, events: repo.StoredEvent[]): void {
    for (const event of events) {
      if (event.seq <= stream.delivered) continue;
      if (event.seq !== stream.delivered + 1) {
        stream.sink.event(event.seq - 1, 'reset', JSON.stringify({ type: 'reset' }));
      }
      stream.sink.event(event.seq, event.type, event.payload);
      stream.delivered = event.seq;
    }
  }

  private remove(stream: Stream): void {
    const set = this.streams.get(stream.subscriberKey);
    if (!set?.delete(stream)) return;
    if (set.size === 0) this.streams.delete(stream.subscriberKey);
    this.total -= 1;
    const left = this.ofOrganization.get(stream.organizationId)! - 1;
    if (left === 0) this.ofOrganization.delete(stream.organizationId);
    else this.ofOrganization.set(stream.organizationId, left);
    if (this.streams.size === 0) this.stop();
  }

  /** Marks subscribers (or all, `*`) to be read for, and reads soon, coalescing what arrives meanwhile. */
  wake(keys: string[] | '*'): void {
    if (keys === '*') this.wakeAll = true;
    else for (const key of keys) if (this.streams.has(key)) this.woken.add(key);
    if (!this.wakeAll && this.woken.size === 0) return;
    if (this.flushing) {
      this.again = true;
      return;
    }
    this.flushing = this.flush().finally(() => {
      this.flushing = undefined;
      if (this.again) {
        this.again = false;
        this.wake([]);
      }
    });
  }

  private async flush(): Promise<void> {
    const keys = this.wakeAll ? [...this.streams.keys()] : [...this.woken];
    this.wakeAll = false;
    this.woken.clear();
    for (let start = 0; start < keys.length; start += CHUNK) {
      const cursors: Array<{ subscriberKey: string; seq: number }> = [];
      for (const subscriberKey of keys.slice(start, start + CHUNK)) {
        let low = Infinity;
        for (const stream of this.streams.get(subscriberKey) ?? []) if (stream.ready) low = Math.min(low, stream.delivered);
        if (low !== Infinity) cursors.push({ subscriberKey, seq: low });
      }
      let events: repo.StoredEvent[];
      try {
        events = await repo.eventsAfterMany(this.deps.db, cursors);
      } catch (err) {
        this.deps.logger.warn({ err }, 'could not read inbox events for open streams; the next catch-up tries again');
        return;
      }
      const byKey = new Map<string, repo.StoredEvent[]>();
      for (const event of events) {
        const list = byKey.get(event.subscriberKey);
        if (list) list.push(event);
        else byKey.set(event.subscriberKey, [event]);
      }
      for (const [subscriberKey, list] of byKey) {
        for (const stream of this.streams.get(subscriberKey) ?? []) if (stream.ready) this.send(stream, list);
      }
    }
  }

  private start(): void {
    if (this.unlisten) return;
    this.unlisten = listenInbox(this.deps.db, (keys) => this.wake(keys));
    this.listener = startInboxListener(this.deps.db, originOf(this.deps.db), (err) => this.deps.logger.warn({ err }, 'the inbox LISTEN connection failed; reconnecting'));
    this.timer = setInterval(() => this.wake('*'), this.catchUpMs);
    this.timer.unref();
  }

  private stop(): void {
    this.unlisten?.();
    this.unlisten = undefined;
    void this.listener?.close();
    this.listener = undefined;
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }

  /** Ends every open stream (the server is stopping) and stops listening. */
  async close(): Promise<void> {
    for (const set of this.streams.values()) for (const stream of set) stream.sink.end();
    this.streams.clear();
    this.total = 0;
    this.ofOrganization.clear();
    this.stop();
    await this.flushing;
  }
}
