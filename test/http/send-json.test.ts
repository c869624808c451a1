// sendJson writes the same text JSON.stringify makes; a page of large items goes in pieces, the
// event loop turning between them, held back by a client that does not read and stopped by one
// that leaves. Real sockets on 127.0.0.1.
import http from 'node:http';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { setStoredJson } from '../../src/db/json.js';
import { PIECE_CHARS, sendJson } from '../../src/http/send-json.js';

let server: http.Server | undefined;
afterEach(async () => {
  server?.closeAllConnections();
  await new Promise((resolve) => server?.close(resolve) ?? resolve(undefined));
  server = undefined;
});

/** A server answering every request with `body` through sendJson; `written` settles when sendJson does. */
async function serve(body: unknown) {
  let responses: http.ServerResponse[] = [];
  let written!: Promise<void>;
  server = http.createServer((_req, res) => {
    responses.push(res);
    written = sendJson(res, 200, body);
  });
  await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return { port, responses: () => responses, written: () => written, reset: () => (responses = []) };
}

async function get(port: number) {
  const res = await fetch(`http://127.0.0.1:${port}/`);
  return { text: await res.text(), headers: res.headers };
}

/** A page of `n` items of about `chars` characters each, shaped like every list's envelope. */
function pageOf(n: number, chars: number) {
  const data = Array.from({ length: n }, (_, i) => ({ id: `s${i}`, data: { text: 'x'.repeat(chars), list: [1, 'two', null] } }));
  return { data, totalCount: 1000, page: 0, pageSize: n, hasMore: true };
}

describe('sendJson', () => {
  it('sends a small answer at once, with its Content-Length', async () => {
    const body = pageOf(3, 10);
    const { port } = await serve(body);
    const { text, headers } = await get(port);
    expect(text).toBe(JSON.stringify(body));
    expect(headers.get('content-length')).toBe(String(Buffer.byteLength(text)));
    expect(headers.get('content-type')).toBe('application/json; charset=utf-8');
  });

  it('writes exactly what JSON.stringify writes, for pages and for anything else', async () => {
    const bodies: unknown[] = [
      pageOf(40, 5_000),
      { data: [], totalCount: 0, page: 0, pageSize: 10, hasMore: false },
      { data: [undefined, 'é€😀', { a: undefined, b: [undefined] }, 1e21, new Date(0)], rest: 'last' },
      { data: Array.from({ length: 30 }, () => 'y'.repeat(10_000)) },
      { data: { notAList: 'z'.repeat(200_000) }, after: 1 },
      { first: 1, data: ['w'.repeat(200_000)] },
      ['v'.repeat(200_000)],
      'u'.repeat(200_000),
      { data: { one: 'item', nested: { list: [1, undefined] } }, after: true },
      { data: undefined, after: 1 },
      { data: undefined },
      { data: null },
      { data: 'text' },
    ];
    for (const body of bodies) {
      const { port } = await serve(body);
      expect((await get(port)).text).toBe(JSON.stringify(body));
      server!.closeAllConnections();
      await new Promise((resolve) => server!.close(resolve));
      server = undefined;
    }
  });

  it("writes an item's stored JSON as it is stored: alone, in a small page and in a large one", async () => {
    // Spaces JSON.stringify would not write: in the answer only if the stored text is spliced in.
    const stored = JSON.stringify({ text: 'x'.repeat(100_000), list: [1, 'two'] }, null, 1);
    const itemOf = (id: string) => {
      const item = { id, data: {} as unknown };
      setStoredJson(item, 'data', stored, {}, true);
      return item;
    };
    const expected = (id: string) => `{"id":"${id}","data":${stored}}`;
    const answers: Array<[unknown, string]> = [
      [{ data: itemOf('alone') }, `{"data":${expected('alone')}}`],
      [{ data: itemOf('alone'), more: 1 }, `{"data":${expected('alone')},"more":1}`],
      ...[1, 30].map((n): [unknown, string] => {
        const ids = Array.from({ length: n }, (_, i) => `s${i}`);
        return [{ data: ids.map(itemOf), hasMore: false }, `{"data":[${ids.map(expected).join(',')}],"hasMore":false}`];
      }),
    ];
    for (const [body, text] of answers) {
      const { port } = await serve(body);
      expect((await get(port)).text).toBe(text);
      server!.closeAllConnections();
      await new Promise((resolve) => server!.close(resolve));
      server = undefined;
    }
  });

  it('makes no body for a HEAD of a page, which Node would not send', async () => {
    let made = 0;
    const item = {
      get data() {
        made++;
        return 'x'.repeat(100_000);
      },
    };
    const { port } = await serve({ data: [item, item, item], hasMore: false });
    const res = await fetch(`http://127.0.0.1:${port}/`, { method: 'HEAD' });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('application/json; charset=utf-8');
    expect(await res.text()).toBe('');
    expect(made).toBe(0);
    expect(JSON.parse((await get(port)).text).data).toHaveLength(3);
    expect(made).toBe(3);
  });

  it('writes a page of large items in pieces, letting the event loop turn while it does', async () => {
    // Each item takes 2 ms to write, whatever the machine (60 ms in all), and says in which turn of
    // the event loop it was written: the loop must turn between them, not wait out the page.
    let turn = 0;
    const writtenIn = new Set<number>();
    const slowItem = (i: number) => ({
      toJSON() {
        writtenIn.add(turn);
        const until = performance.now() + 2;
        while (performance.now() < until);
        return { i, text: 'x'.repeat(200_000) };
      },
    });
    const body = { data: Array.from({ length: 30 }, (_, i) => slowItem(i)), hasMore: false };
    const expected = JSON.stringify(body);
    writtenIn.clear();
    const { port, written } = await serve(body);
    let counting = true;
    const count = () => {
      turn++;
      if (counting) setImmediate(count);
    };
    setImmediate(count);
    const { text, headers } = await get(port);
    await written();
    counting = false;
    expect(writtenIn.size).toBeGreaterThan(5);
    expect(text).toBe(expected);
    expect(headers.get('content-length')).toBeNull();
    expect(headers.get('transfer-encoding')).toBe('chunked');
  });

  it('holds back while the client does not read, and finishes when it does', async () => {
    const body = pageOf(100, 200_000); // 20 MB
    const { port, responses, written } = await serve(body);
    const socket = net.connect(port, '127.0.0.1');
    socket.pause();
    socket.write('GET / HTTP/1.1\r\nHost: x\r\n\r\n');
    await new Promise((resolve) => setTimeout(resolve, 300));
    const [res] = responses();
    // What waits in the server's buffer is a few pieces, not the answer.
    expect(res.writableLength).toBeLessThan(2 * 1024 * 1024);
    expect(res.writableEnded).toBe(false);
    const received: Buffer[] = [];
    socket.on('data', (chunk) => received.push(chunk));
    socket.resume();
    await written();
    await new Promise((resolve) => (res.writableFinished ? resolve(undefined) : res.once('finish', resolve)));
    await new Promise((resolve) => setTimeout(resolve, 50));
    socket.destroy();
    const raw = Buffer.concat(received).toString('utf8');
    const chunked = raw.slice(raw.indexOf('\r\n\r\n') + 4);
    expect(dechunk(chunked)).toBe(JSON.stringify(body));
  });

  it('disconnects a client that has not read what was written within the drain bound', async () => {
    const body = pageOf(100, 200_000);
    let res!: http.ServerResponse;
    let written!: Promise<void>;
    server = http.createServer((_req, response) => {
      res = response;
      written = sendJson(response, 200, body, 300);
    });
    await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', resolve));
    const socket = net.connect((server.address() as AddressInfo).port, '127.0.0.1');
    socket.pause();
    socket.write('GET / HTTP/1.1\r\nHost: x\r\n\r\n');
    await new Promise((resolve) => setTimeout(resolve, 100));
    await written;
    expect(res.destroyed).toBe(true);
    expect(res.writableEnded).toBe(false);
    socket.destroy();
  });

  it('makes nothing for a client that left before the answer was ready', async () => {
    const body = pageOf(100, 200_000);
    let res!: http.ServerResponse;
    let written!: Promise<void>;
    const left = new Promise<void>((resolve) => {
      server = http.createServer((req, response) => {
        res = response;
        // The answer is ready only once the client has gone, as after a slow read.
        req.socket.once('close', () => {
          written = sendJson(response, 200, body, 60_000);
          resolve();
        });
      });
    });
    await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', resolve));
    const socket = net.connect((server!.address() as AddressInfo).port, '127.0.0.1');
    socket.write('GET / HTTP/1.1\r\nHost: x\r\n\r\n');
    await new Promise((resolve) => setTimeout(resolve, 100));
    socket.destroy();
    await left;
    // Not the drain bound's 60 s: the test's own time limit would end it first.
    await written;
    expect(res.writableEnded).toBe(false);
  });

  it('stops writing when the client leaves', async () => {
    const body = pageOf(100, 200_000);
    const { port, responses, written } = await serve(body);
    const socket = net.connect(port, '127.0.0.1');
    socket.pause();
    socket.write('GET / HTTP/1.1\r\nHost: x\r\n\r\n');
    await new Promise((resolve) => setTimeout(resolve, 200));
    socket.destroy();
    await written();
    const [res] = responses();
    expect(res.writableEnded).toBe(false);
    expect(PIECE_CHARS).toBeLessThan(JSON.stringify(body).length);
  });
});

/** The body of a chunked HTTP/1.1 answer. */
function dechunk(text: string): string {
  let body = '';
  let at = 0;
  for (;;) {
    const end = text.indexOf('\r\n', at);
    const size = parseInt(text.slice(at, end), 16);
    if (size === 0) return body;
    // Sizes count bytes; the test's text is ASCII, so characters are bytes.
    body += text.slice(end + 2, end + 2 + size);
    at = end + 2 + size + 2;
  }
}
