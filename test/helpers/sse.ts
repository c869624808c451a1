// A server-sent events client for tests, as a fetch-based browser client reads a stream: every
// event with its id, name and parsed data, and the comment lines (pings) apart. And a raw socket,
// for clients no fetch can play: one that pipelines its requests, one that stops reading.
import net from 'node:net';

export interface SseEvent {
  id?: string;
  event: string;
  data: Record<string, unknown>;
}

export interface SseStream {
  status: number;
  headers: Headers;
  /** The error body, when the answer is not a stream. */
  body?: unknown;
  events: SseEvent[];
  comments: string[];
  /** The first event (from the start of the stream) that `match` accepts and is not yet taken, within `timeoutMs`. */
  next(match?: (event: SseEvent) => boolean, timeoutMs?: number): Promise<SseEvent>;
  /** Resolves once a comment line has arrived. */
  comment(timeoutMs?: number): Promise<string>;
  /** Whether the server ended the stream within `timeoutMs`. */
  endedWithin(timeoutMs: number): Promise<boolean>;
  close(): void;
}

export async function openSse(url: string, headers: Record<string, string> = {}): Promise<SseStream> {
  const abort = new AbortController();
  const res = await fetch(url, { headers: { Accept: 'text/event-stream', ...headers }, signal: abort.signal });
  const events: SseEvent[] = [];
  const comments: string[] = [];
  const taken = new Set<SseEvent>();
  let wake: () => void = () => undefined;
  let ended: () => void = () => undefined;
  const end = new Promise<void>((resolve) => (ended = resolve));
  const stream: SseStream = {
    status: res.status,
    headers: res.headers,
    events,
    comments,
    async next(match = () => true, timeoutMs = 5000) {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const found = events.find((event) => !taken.has(event) && match(event));
        if (found) {
          taken.add(found);
          return found;
        }
        const left = deadline - Date.now();
        if (left <= 0) throw new Error(`No matching event within ${timeoutMs} ms; got ${JSON.stringify(events)}`);
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, left);
          wake = () => {
            clearTimeout(timer);
            resolve();
          };
        });
      }
    },
    async comment(timeoutMs = 5000) {
      const deadline = Date.now() + timeoutMs;
      while (comments.length === 0) {
        if (Date.now() > deadline) throw new Error(`No comment within ${timeoutMs} ms`);
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      return comments[0];
    },
    endedWithin: (timeoutMs) => Promise.race([end.then(() => true), new Promise<boolean>((resolve) => setTimeout(() => resolve(false), timeoutMs).unref())]),
    close: () => abort.abort(),
  };
  if (!res.headers.get('content-type')?.startsWith('text/event-stream')) {
    stream.body = await res.json().catch(() => undefined);
    return stream;
  }
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  let buffer = '';
  void (async () => {
    try {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) return ended();
        buffer += decoder.decode(value, { stream: true });
        let end: number;
        while ((end = buffer.indexOf('\n\n')) !== -1) {
          const block = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          const event: Partial<SseEvent> & { lines: string[] } = { lines: [] };
          for (const line of block.split('\n')) {
            if (line.startsWith(':')) comments.push(line.slice(1).trim());
            else if (line.startsWith('id: ')) event.id = line.slice(4);
            else if (line.startsWith('event: ')) event.event = line.slice(7);
            else if (line.startsWith('data: ')) event.lines.push(line.slice(6));
          }
          if (event.event) events.push({ id: event.id, event: event.event, data: JSON.parse(event.lines.join('\n')) });
          wake();
        }
      }
    } catch {
      // Closed by the test or the server.
    }
  })();
  return stream;
}

/** The bytes of a `GET /v1/inbox/events` with a subscriber token (and `headers`), for a raw socket. */
export function streamRequest(token: string, headers: Record<string, string> = {}): string {
  const lines = Object.entries({ Host: '127.0.0.1', Authorization: `Bearer ${token}`, Accept: 'text/event-stream', ...headers }).map(([name, value]) => `${name}: ${value}\r\n`);
  return `GET /v1/inbox/events HTTP/1.1\r\n${lines.join('')}\r\n`;
}

/** A TCP connection to the server at `url` (http://127.0.0.1:port), once connected. */
export async function rawConnection(url: string): Promise<net.Socket> {
  const socket = net.connect(Number(new URL(url).port), '127.0.0.1');
  await new Promise((resolve) => socket.once('connect', resolve));
  return socket;
}
