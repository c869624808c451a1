// Server-sent events over fetch, because a browser's EventSource cannot send an Authorization
// header (and a token in its URL would land in logs and history). It reads the stream as the HTML
// standard's parser does, remembers the last event id, and reconnects with `Last-Event-ID`, so the
// server replays what the connection missed.

/** One event as the stream framed it. */
export interface StreamEvent {
  /** The `id:` it carried, or the last one before it ('' when none has come yet). */
  id: string;
  /** The `event:` name, `message` when it had none. */
  event: string;
  /** The `data:` lines, joined with newlines. */
  data: string;
}

export interface EventStreamOptions {
  url: string;
  /** Headers for each connection, asked again at every reconnect (a token may have been renewed). */
  headers?: () => Record<string, string> | Promise<Record<string, string>>;
  /** Resume after this event id (sent as `Last-Event-ID` on the first connection too). */
  lastEventId?: string;
  onEvent(event: StreamEvent): void;
  /** Each time a connection is open and its answer is a stream. */
  onOpen?(): void;
  /** A connection failed or ended; `retryInMs` is when the next one starts, undefined when none will. */
  onError?(error: EventStreamError, retryInMs: number | undefined): void;
  /** The first wait before reconnecting (the server's `retry:` replaces it); doubled per failure up to `maxRetryMs`. */
  retryMs?: number;
  maxRetryMs?: number;
  /** No byte for this long (the server pings every 25 s) means a dead connection: reconnect. */
  idleTimeoutMs?: number;
  /** Try again after a 401 (default): worth it only when `headers` can bring a renewed credential. */
  retryUnauthorized?: boolean;
  fetch?: typeof fetch;
}

export class EventStreamError extends Error {
  constructor(
    message: string,
    /** The HTTP status of a refused connection, 0 for a network failure or a stream that ended. */
    readonly status: number,
    /** The error body the server sent with a refusal, when it sent one. */
    readonly body?: unknown,
  ) {
    super(message);
    this.name = 'EventStreamError';
  }
}

export interface EventStream {
  /** Stops for good: the open connection is aborted and no other is made. */
  close(): void;
  /** The id of the last event received, the one a reconnect resumes after. */
  readonly lastEventId: string;
}

/** Refusals that will not change by trying again with the same request. */
const FATAL = new Set([400, 403, 404, 405, 406, 410, 413, 414, 415, 422]);

export function openEventStream(options: EventStreamOptions): EventStream {
  const doFetch = options.fetch ?? globalThis.fetch.bind(globalThis);
  const maxRetryMs = options.maxRetryMs ?? 30_000;
  const idleTimeoutMs = options.idleTimeoutMs ?? 60_000;
  let baseRetryMs = options.retryMs ?? 3_000;
  let failures = 0;
  let lastEventId = options.lastEventId ?? '';
  let closed = false;
  let controller: AbortController | undefined;
  let timer: ReturnType<typeof setTimeout> | undefined;

  const connect = async () => {
    controller = new AbortController();
    const { signal } = controller;
    let idle: ReturnType<typeof setTimeout> | undefined;
    const armIdle = () => {
      clearTimeout(idle);
      idle = setTimeout(() => controller?.abort(new EventStreamError(`No data for ${idleTimeoutMs} ms`, 0)), idleTimeoutMs);
    };
    let retryAfterMs: number | undefined;
    try {
      // No Cache-Control header (`cache` says it): from another origin a header CORS does not
      // safelist costs a preflight, which every server the client talks to must then allow.
      const headers: Record<string, string> = { Accept: 'text/event-stream', ...(await options.headers?.()) };
      if (lastEventId) headers['Last-Event-ID'] = lastEventId;
      armIdle();
      const response = await doFetch(options.url, { headers, signal, cache: 'no-store' });
      if (!response.ok) {
        const body: unknown = await response.json().catch(() => undefined);
        const seconds = Number(response.headers.get('Retry-After'));
        if ((response.status === 429 || response.status === 503) && seconds > 0) retryAfterMs = seconds * 1000;
        const message = (body as { message?: unknown } | undefined)?.message;
        throw new EventStreamError(typeof message === 'string' ? message : `The stream was refused with ${response.status}`, response.status, body);
      }
      if (!response.body || !(response.headers.get('Content-Type') ?? '').startsWith('text/event-stream')) {
        throw new EventStreamError(`Expected text/event-stream, got ${response.headers.get('Content-Type')}`, 406);
      }
      options.onOpen?.();
      const parser = new EventParser((event) => {
        failures = 0;
        options.onEvent(event);
      }, lastEventId);
      parser.onRetry = (ms) => (baseRetryMs = ms);
      parser.onLastEventId = (id) => (lastEventId = id);
      const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        armIdle();
        parser.push(value);
      }
      throw new EventStreamError('The stream ended', 0);
    } catch (caught) {
      if (closed) return;
      const reason = signal.aborted ? signal.reason : caught;
      const error = reason instanceof EventStreamError ? reason : new EventStreamError(reason instanceof Error ? reason.message : String(reason), 0);
      if (FATAL.has(error.status) || (error.status === 401 && options.retryUnauthorized === false)) {
        closed = true;
        options.onError?.(error, undefined);
        return;
      }
      // Full jitter on an exponential backoff, so many clients cut off together do not come back together.
      const ceiling = Math.min(maxRetryMs, baseRetryMs * 2 ** failures);
      const backoff = Math.round(failures === 0 ? baseRetryMs : ceiling / 2 + (Math.random() * ceiling) / 2);
      // A Retry-After is the least wait, spread over half as much again: the clients a full server
      // refused together must not come back together either.
      const wait = retryAfterMs === undefined ? backoff : Math.max(backoff, Math.round(retryAfterMs * (1 + Math.random() / 2)));
      failures += 1;
      options.onError?.(error, wait);
      timer = setTimeout(() => void connect(), wait);
    } finally {
      clearTimeout(idle);
    }
  };

  void connect();
  return {
    close() {
      closed = true;
      clearTimeout(timer);
      controller?.abort();
    },
    get lastEventId() {
      return lastEventId;
    },
  };
}

/**
 * The event-stream format (HTML standard, "Parsing an event stream"): lines end in CR, LF or CRLF;
 * `:` starts a comment; `data` lines add up; a blank line dispatches; `id` sticks until changed.
 */
export class EventParser {
  private buffer = '';
  private sawCR = false;
  private data: string[] = [];
  private event = '';
  private id = '';
  onRetry?: (ms: number) => void;
  /** At each blank line, before its event (if any) is dispatched: where a reconnect resumes. */
  onLastEventId?: (id: string) => void;

  constructor(
    private readonly dispatch: (event: StreamEvent) => void,
    lastEventId = '',
  ) {
    this.id = lastEventId;
  }

  push(chunk: string): void {
    let text = chunk;
    // A CRLF split across two chunks: the LF belongs to the line the CR already ended.
    if (this.sawCR && text.startsWith('\n')) text = text.slice(1);
    this.sawCR = false;
    this.buffer += text;
    const lines = this.buffer.split(/\r\n|\r|\n/);
    this.buffer = lines.pop() ?? '';
    if (this.buffer === '' && text.endsWith('\r')) this.sawCR = true;
    for (const line of lines) this.line(line);
  }

  private line(line: string): void {
    if (line === '') return this.flush();
    if (line.startsWith(':')) return;
    const colon = line.indexOf(':');
    const field = colon === -1 ? line : line.slice(0, colon);
    let value = colon === -1 ? '' : line.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (field === 'data') this.data.push(value);
    else if (field === 'event') this.event = value;
    else if (field === 'id' && !value.includes('\0')) this.id = value;
    else if (field === 'retry' && /^\d+$/.test(value)) this.onRetry?.(Number(value));
  }

  private flush(): void {
    // Only a whole event moves the resume point: an id whose event was cut off is asked for again.
    this.onLastEventId?.(this.id);
    const event = { id: this.id, event: this.event || 'message', data: this.data.join('\n') };
    const hadData = this.data.length > 0;
    this.data = [];
    this.event = '';
    if (hadData) this.dispatch(event);
  }
}
