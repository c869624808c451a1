// herald/client's server-sent events over fetch: the stream format as the HTML standard parses it,
// and the reconnection a live inbox depends on, against a real HTTP server on 127.0.0.1.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { EventParser, openEventStream, type EventStream, type StreamEvent } from '../../src/client/sse.js';

describe('EventParser', () => {
  const parse = (chunks: string[]) => {
    const events: StreamEvent[] = [];
    const parser = new EventParser((event) => events.push(event));
    for (const chunk of chunks) parser.push(chunk);
    return events;
  };

  it('joins data lines, names events, keeps the last id, and skips comments and empty events', () => {
    expect(parse([': ping\n\nid: 1\nevent: counts\ndata: {"a":\ndata: 1}\n\n', 'data: plain\n\n', 'id: 7\n\n', 'data:x\n\n'])).toEqual([
      { id: '1', event: 'counts', data: '{"a":\n1}' },
      { id: '1', event: 'message', data: 'plain' },
      { id: '7', event: 'message', data: 'x' },
    ]);
  });

  it('reads CR, LF and CRLF line ends, also when a CRLF or a line is split across chunks', () => {
    expect(parse(['id: 1\r', '\ndata: a\r\n\r\nid: 2\rdata: b\r\rda', 'ta: c', '\n\n'])).toEqual([
      { id: '1', event: 'message', data: 'a' },
      { id: '2', event: 'message', data: 'b' },
      { id: '2', event: 'message', data: 'c' },
    ]);
  });

  it('moves the resume point only at the end of an event, so a cut-off event is asked for again', () => {
    const ids: string[] = [];
    const parser = new EventParser(() => undefined, '4');
    parser.onLastEventId = (id) => ids.push(id);
    parser.push('id: 5\ndata: whole\n\nid: 6\ndata: cut');
    expect(ids).toEqual(['5']);
  });
});

interface Connection {
  headers: http.IncomingHttpHeaders;
  res: http.ServerResponse;
}

let server: http.Server | undefined;
let stream: EventStream | undefined;
afterEach(async () => {
  stream?.close();
  server?.closeAllConnections();
  await new Promise((resolve) => server?.close(resolve) ?? resolve(undefined));
  server = undefined;
});

/** An SSE server whose every connection `answer` handles; resolves with its URL and the connections so far. */
async function sseServer(answer: (connection: Connection, index: number) => void) {
  const connections: Connection[] = [];
  server = http.createServer((req, res) => {
    const connection = { headers: req.headers, res };
    connections.push(connection);
    answer(connection, connections.length - 1);
  });
  await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/events`, connections };
}

const streamHead = (res: http.ServerResponse) => res.writeHead(200, { 'Content-Type': 'text/event-stream', 'Cache-Control': 'no-cache' });

describe('openEventStream', () => {
  it('sends the headers of the moment, and after a dropped connection resumes with Last-Event-ID', async () => {
    const { url, connections } = await sseServer(({ res }, index) => {
      streamHead(res);
      if (index === 0) res.end('retry: 50\nid: 1\ndata: one\n\nid: 2\ndata: two\n\nid: 3\ndata: cut off');
      else res.write('id: 3\ndata: three\n\n');
    });
    const received: string[] = [];
    let tokens = 0;
    stream = openEventStream({ url, headers: () => ({ Authorization: `Bearer token-${++tokens}` }), onEvent: (event) => received.push(`${event.id}:${event.data}`) });
    await expect.poll(() => received, { timeout: 5000 }).toEqual(['1:one', '2:two', '3:three']);
    expect(connections.map((c) => [c.headers.authorization, c.headers['last-event-id'], c.headers.accept])).toEqual([
      ['Bearer token-1', undefined, 'text/event-stream'],
      ['Bearer token-2', '2', 'text/event-stream'],
    ]);
    expect(stream.lastEventId).toBe('3');
  });

  it('starts after a given event id', async () => {
    const { url, connections } = await sseServer(({ res }) => {
      streamHead(res);
      res.write(': hello\n\n');
    });
    stream = openEventStream({ url, lastEventId: '41', onEvent: () => undefined });
    await expect.poll(() => connections.length).toBe(1);
    expect(connections[0].headers['last-event-id']).toBe('41');
  });

  it('tries again after a 401 or a 503 (a token may be renewed meanwhile), and stops for good at a 400', async () => {
    const statuses = [401, 503, 400];
    const { url, connections } = await sseServer(({ res }, index) => {
      res.writeHead(statuses[index], { 'Content-Type': 'application/json' }).end(JSON.stringify({ statusCode: statuses[index], error: 'x', message: `refused ${index}` }));
    });
    const errors: Array<[number, string, boolean]> = [];
    stream = openEventStream({ url, retryMs: 20, onEvent: () => undefined, onError: (error, retryIn) => errors.push([error.status, error.message, retryIn !== undefined]) });
    await expect.poll(() => errors.length, { timeout: 5000 }).toBe(3);
    expect(errors).toEqual([
      [401, 'refused 0', true],
      [503, 'refused 1', true],
      [400, 'refused 2', false],
    ]);
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(connections).toHaveLength(3);
  });

  it('waits at least what Retry-After says after a 429 or a 503 (a server holding all the streams it allows), and at most half as much again', async () => {
    const statuses = [429, 503];
    const { url } = await sseServer(({ res }, index) => {
      if (index >= statuses.length) return void streamHead(res);
      res.writeHead(statuses[index], { 'Content-Type': 'application/json', 'Retry-After': '1' }).end(JSON.stringify({ statusCode: statuses[index], error: 'x', message: `refused ${index}` }));
    });
    const waits: Array<[number, number | undefined]> = [];
    stream = openEventStream({ url, retryMs: 20, onEvent: () => undefined, onError: (error, retryIn) => waits.push([error.status, retryIn]) });
    await expect.poll(() => waits.length, { timeout: 5000 }).toBe(2);
    expect(waits.map(([status]) => status)).toEqual([429, 503]);
    for (const [, wait] of waits) {
      expect(wait).toBeGreaterThanOrEqual(1000);
      expect(wait).toBeLessThanOrEqual(1500);
    }
  });

  it('stops at a 401 when told the credential cannot change', async () => {
    const { url, connections } = await sseServer(({ res }) => {
      res.writeHead(401, { 'Content-Type': 'application/json' }).end('{"statusCode":401,"error":"Unauthorized","message":"Invalid subscriber token"}');
    });
    const errors: Array<number | undefined> = [];
    stream = openEventStream({ url, retryMs: 20, retryUnauthorized: false, onEvent: () => undefined, onError: (_error, retryIn) => errors.push(retryIn) });
    await expect.poll(() => errors).toEqual([undefined]);
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(connections).toHaveLength(1);
  });

  it('drops a connection that says nothing for longer than the idle timeout, and reconnects', async () => {
    const { url, connections } = await sseServer(({ res }, index) => {
      streamHead(res);
      if (index === 0) res.write('id: 1\ndata: then silence\n\n');
      else res.write('id: 2\ndata: back\n\n');
    });
    const received: string[] = [];
    stream = openEventStream({ url, retryMs: 20, idleTimeoutMs: 300, onEvent: (event) => received.push(event.data) });
    await expect.poll(() => received, { timeout: 5000 }).toEqual(['then silence', 'back']);
    expect(connections[1].headers['last-event-id']).toBe('1');
  });

  it('makes no connection after close()', async () => {
    const { url, connections } = await sseServer(({ res }) => {
      streamHead(res);
      res.end('id: 1\ndata: bye\n\n');
    });
    const received: string[] = [];
    stream = openEventStream({ url, retryMs: 50, onEvent: (event) => received.push(event.data) });
    await expect.poll(() => received).toEqual(['bye']);
    stream.close();
    const seen = connections.length;
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(connections.length).toBe(seen);
  });
});
