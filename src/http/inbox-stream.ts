// GET /v1/inbox/events: the inbox's server-sent events. The contract routes, authorizes and
// validates it like any operation; this writes the stream instead of a JSON answer. The events
// themselves come from the engine's hub (engine/inbox-hub.ts).
import type { Request, Response } from 'express';
import type { Deps } from '../deps.js';
import type { Auth, InboxCredential } from '../contract.js';
import { credentialLive } from '../engine/inbox-tokens.js';
import { goneSubscriberKeys, inboxSubscriberKey } from '../engine/inbox.js';
import { MAX_STREAMS_PER_SUBSCRIBER, type InboxHub, type LastEventId, type StreamsFull } from '../engine/inbox-hub.js';
import { ApiError, badRequest } from '../errors.js';
import { DRAIN_MS, drained } from './send-json.js';

/** A comment line this often keeps proxies (nginx waits 60 s by default) from closing an idle stream. */
export const PING_MS = 25_000;
/**
 * Bytes a live stream may have waiting to be sent: past that its client is not reading (or not
 * keeping up), and the stream is cut rather than buffered without bound. A client that reconnects
 * with Last-Event-ID is replayed what it missed, a page at a time as it reads. Each stream may hold
 * an equal share of BACKLOG_BUDGET_BYTES, between these two bounds, so that many stalled streams
 * together cannot take the process's memory either.
 */
export const MAX_STREAM_BACKLOG_BYTES = 1 << 20;
const MIN_STREAM_BACKLOG_BYTES = 16 << 10;
const BACKLOG_BUDGET_BYTES = 64 << 20;

/**
 * What the streams of one app hold past their bounds, together: an event larger than a stream's
 * bound (a message of up to 1 MiB, with 16 KiB bounds when thousands of streams are open) goes to
 * a client that is keeping up while this has room, and is given back as the stream drains.
 */
class OverBound {
  private bytes = 0;

  /** Takes `n` bytes; false when that would pass BACKLOG_BUDGET_BYTES. */
  take(n: number): boolean {
    if (this.bytes + n > BACKLOG_BUDGET_BYTES) return false;
    this.bytes += n;
    return true;
  }

  give(n: number): void {
    this.bytes -= n;
  }
}

/** The backlog one of `streams` open streams may have before it is cut. */
export function backlogBound(streams: number): number {
  return Math.min(MAX_STREAM_BACKLOG_BYTES, Math.max(MIN_STREAM_BACKLOG_BYTES, Math.floor(BACKLOG_BUDGET_BYTES / Math.max(1, streams))));
}
/** What a browser's EventSource waits before reconnecting. */
const RETRY_MS = 3000;

/**
 * The Last-Event-ID a reconnecting client sends: a whole number, or `unknown` for any other text,
 * which Herald never sends as an id (the client holds events it cannot place, so it is told to
 * start over); undefined when it sends none.
 */
function lastEventIdOf(req: Request): LastEventId | undefined {
  const header = req.headers['last-event-id'];
  // A new EventSource opened with a fresh ticket cannot set the header: it may say it in the query.
  const value = (Array.isArray(header) ? header[0] : header) ?? (typeof req.query.lastEventId === 'string' ? req.query.lastEventId : undefined);
  if (value === undefined || value.trim() === '') return undefined;
  return /^\d{1,15}$/.test(value.trim()) ? Number(value.trim()) : 'unknown';
}

/** Seconds a client waits before it asks again for a stream it was refused (room comes as streams close). */
const FULL_RETRY_AFTER = { 'Retry-After': '5' };

function streamsFull(full: StreamsFull, hub: InboxHub): ApiError {
  switch (full) {
    case 'subscriber':
      return new ApiError(429, `This subscriber has ${MAX_STREAMS_PER_SUBSCRIBER} inbox streams open, the most it may have; close one first`, undefined, FULL_RETRY_AFTER);
    case 'organization':
      return new ApiError(429, `This organization's environments have ${hub.limits.perOrganization} inbox streams open on this server, the most one organization may have; close one first`, undefined, FULL_RETRY_AFTER);
    case 'process':
      return new ApiError(503, `This server holds all the inbox streams it allows (${hub.limits.max}); retry shortly`, undefined, FULL_RETRY_AFTER);
  }
}

/**
 * Events encoded for the wire, each once for all the streams it goes to in a turn of the event loop
 * (a subscriber may have ten streams open): they are written the same bytes, shared until sent. A
 * message of 1 MB to eight subscribers' eighty streams had been encoded, and held, eighty times.
 */
export class EncodedEvents {
  private readonly thisTurn = new Map<string, { seq: number; type: string; bytes: Buffer }>();

  of(seq: number, type: string, payload: string): Buffer {
    const known = this.thisTurn.get(payload);
    if (known && known.seq === seq && known.type === type) return known.bytes;
    const bytes = Buffer.from(`id: ${seq}\nevent: ${type}\ndata: ${payload}\n\n`);
    if (this.thisTurn.size === 0) setImmediate(() => this.thisTurn.clear());
    this.thisTurn.set(payload, { seq, type, bytes });
    return bytes;
  }
}

/** How often the open streams' credentials are looked at again (CredentialWatch). */
export const CREDENTIAL_CHECK_MS = 5_000;

/**
 * The credentials of one app's open streams, looked at together every `checkMs` (one timer for
 * them all): a stream whose token has expired, or whose signing secret has been retired, ends. Its
 * client reconnects and is refused, or comes back with a new token. Checked at the stream's
 * opening only, a leaked token (or a session's hash) held one stream open for ever. A stream whose
 * subscriber was deleted ends too (its client's reconnect gets a 404): it would be sent nothing
 * more, yet hold its connection and its place under the stream limits. One read for all the
 * streams sees a deletion made by any process, with no message that could be lost on the way.
 */
class CredentialWatch {
  private readonly streams = new Map<() => void, { credential: InboxCredential | undefined; subscriberKey: string; openedAt: number }>();
  private timer: NodeJS.Timeout | undefined;
  private checking = false;

  constructor(
    private readonly deps: Deps,
    private readonly checkMs: number,
  ) {}

  /** Calls `end` once the credential no longer opens the inbox, or its subscriber is gone; answers the function that stops watching. */
  watch(credential: InboxCredential | undefined, subscriberKey: string, end: () => void): () => void {
    this.streams.set(end, { credential, subscriberKey, openedAt: this.deps.clock.now().getTime() });
    this.timer ??= setInterval(() => void this.check(), this.checkMs).unref();
    return () => {
      this.streams.delete(end);
      if (this.streams.size > 0) return;
      clearInterval(this.timer);
      this.timer = undefined;
    };
  }

  private async check(): Promise<void> {
    if (this.checking) return;
    this.checking = true;
    const now = this.deps.clock.now().getTime();
    let failed: unknown;
    const streams = [...this.streams];
    let gone = new Set<string>();
    try {
      gone = await goneSubscriberKeys(this.deps, [...new Set(streams.map(([, { subscriberKey }]) => subscriberKey))]);
    } catch (err) {
      failed = err;
    }
    for (const [end, { credential, subscriberKey, openedAt }] of streams) {
      if (gone.has(subscriberKey)) {
        end();
        continue;
      }
      try {
        if (!(await credentialLive(this.deps.db, credential, openedAt, this.deps.config.secret, now))) end();
      } catch (err) {
        // Its secret could not be read (an expired token is seen without a read): it is looked at again next time.
        failed = err;
      }
    }
    this.checking = false;
    if (failed) this.deps.logger.warn({ err: failed }, "could not check some inbox streams' credentials");
  }
}

/** How often an app's streams ping, and look at their credentials again. */
export interface StreamTimings {
  pingMs?: number;
  credentialCheckMs?: number;
}

/**
 * Writes the inbox's stream of one app: its streams share what they may hold past their bounds
 * (OverBound), the events' encoding, and the watch over their credentials.
 */
export function inboxStreams(hub: InboxHub, deps: Deps, { pingMs = PING_MS, credentialCheckMs = CREDENTIAL_CHECK_MS }: StreamTimings = {}) {
  const overBound = new OverBound();
  const encoded = new EncodedEvents();
  const credentials = new CredentialWatch(deps, credentialCheckMs);
  return (auth: Auth, req: Request, res: Response) => streamInboxEvents(hub, { overBound, encoded, credentials }, deps, auth, req, res, pingMs);
}

async function streamInboxEvents(
  hub: InboxHub,
  { overBound, encoded, credentials }: { overBound: OverBound; encoded: EncodedEvents; credentials: CredentialWatch },
  deps: Deps,
  auth: Auth,
  req: Request,
  res: Response,
  pingMs: number,
): Promise<void> {
  // A request pipelined behind another on its connection has its answer queued, without a socket:
  // behind a stream it would never be answered, nor its connection's end be seen, so it is not one.
  if (!res.socket) throw badRequest('An inbox stream needs a connection of its own: do not pipeline it behind another request');
  const key = await inboxSubscriberKey(deps, { environmentId: auth.environmentId, subscriberId: auth.subscriberId! });
  // A client gone meanwhile will send no 'close' for the listener below: its stream would stay counted.
  if (res.destroyed || req.socket.destroyed) return;
  // Checked and taken in one turn of the event loop: hub.open counts the stream before it awaits.
  const full = hub.fullFor(auth.organizationId, key);
  if (full) throw streamsFull(full, hub);
  const headers = {
    'Content-Type': 'text/event-stream; charset=utf-8',
    'Cache-Control': 'no-cache, no-transform',
    'X-Accel-Buffering': 'no',
  };
  // A HEAD asks what a stream would answer, and opens none.
  if (req.method === 'HEAD') return void res.writeHead(200, headers).end();
  res.writeHead(200, { ...headers, Connection: 'keep-alive' });
  res.flushHeaders();
  res.write(`retry: ${RETRY_MS}\n\n`);
  let closed = false;
  // Until the replay is done, pages wait for the client (drained) instead of cutting it.
  let live = false;
  let close: (() => void) | undefined;
  const ping = setInterval(() => res.write(': ping\n\n'), pingMs);
  ping.unref();
  const done = () => {
    if (closed) return;
    closed = true;
    clearInterval(ping);
    unwatch();
    close?.();
  };
  const unwatch = credentials.watch(auth.credential, key, () => {
    done();
    res.end();
  });
  res.on('close', done);
  // Bytes of this stream's backlog on the shared allowance: given back when it has all been sent,
  // or when the stream closes (one whose client does not read it within DRAIN_MS is closed).
  let lent = 0;
  // What was waiting right after the last event lent, and whether that was in this turn.
  let lentUpTo = 0;
  let lentThisTurn = false;
  const giveBack = () => {
    overBound.give(lent);
    lent = 0;
  };
  res.on('close', giveBack);
  const opened = await hub
    .open(auth.organizationId, key, lastEventIdOf(req), {
      event: (seq, type, payload) => {
        if (closed) return;
        const text = encoded.of(seq, type, payload);
        // What waits beyond what the allowance holds for this stream is the stream's own backlog.
        const waiting = res.writableLength - lent;
        const bound = backlogBound(hub.size);
        const size = text.length;
        if (!live || waiting + size <= bound) return void res.write(text);
        // Past its bound: a client behind is cut; one keeping up takes an event larger than the
        // bound on the allowance the streams share, until all it was lent is sent. Keeping up, with
        // events already lent: they came in this same turn, or the socket has taken some of them since.
        const keepingUp = lent === 0 || lentThisTurn || res.writableLength < lentUpTo;
        if (size <= bound || waiting > bound || !keepingUp || !overBound.take(size)) return void res.destroy();
        lent += size;
        const flushed = res.write(text);
        lentUpTo = res.writableLength;
        if (!lentThisTurn) {
          lentThisTurn = true;
          setImmediate(() => (lentThisTurn = false));
        }
        if (flushed) return giveBack();
        if (lent === size) void drained(res, DRAIN_MS).then((took) => (took ? giveBack() : res.destroy()));
      },
      end: () => {
        done();
        res.end();
      },
      drained: async () => {
        if (!closed && res.writableLength > backlogBound(hub.size)) await drained(res);
      },
    })
    .catch((err: unknown) => {
      deps.logger.error({ err }, 'could not open an inbox stream');
      done();
      res.end();
      return undefined;
    });
  live = true;
  if (closed) opened?.();
  else close = opened;
}
