import http from 'node:http';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { LOCAL_PEERS, startHttpPeer, startSmtpPeer } from '../helpers/peers.js';
import { REFUSED_DESTINATION, type OutboundPolicy, type ResolvedAddress } from '../../src/outbound-guard.js';
import { ANSWER_LIMIT_BYTES, RAW_EXCERPT_CHARS } from '../../src/providers/http.js';
import { senders } from '../../src/providers/index.js';
import { ProviderError, type Delivery } from '../../src/providers/types.js';

// The providers' side of the outbound guard, timeouts and bounded answers, against real peers on
// 127.0.0.1. Names are resolved by a resolver the test controls (no DNS of the internet).

const closers: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const close of closers.splice(0)) await close();
});

const SMALL_TIMEOUTS = { connectMs: 300, firstByteMs: 300, sendMs: 800 };

function delivery(outbound: Partial<OutboundPolicy> = {}): Delivery {
  return { deliveryId: 'd1', outbound: { allowedNetworks: [LOCAL_PEERS], timeouts: SMALL_TIMEOUTS, ...outbound } };
}

/** A resolver that knows only `names`, counting its calls. */
function resolver(names: Record<string, string | string[]>) {
  const calls: string[] = [];
  const resolve = async (hostname: string): Promise<ResolvedAddress[]> => {
    calls.push(hostname);
    const answer = names[hostname];
    if (!answer) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' });
    return (Array.isArray(answer) ? answer : [answer]).map((address) => ({ address, family: address.includes(':') ? 6 : 4 }));
  };
  return { resolve, calls };
}

async function peer(respond?: Parameters<typeof startHttpPeer>[0]) {
  const server = await startHttpPeer(respond);
  closers.push(server.close);
  return server;
}

/** A raw HTTP server on 127.0.0.1 that handles each request its own way (hang, answer late, drip). */
async function rawServer(handle: (req: http.IncomingMessage, res: http.ServerResponse) => void) {
  const sockets = new Set<net.Socket>();
  const server = http.createServer(handle);
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  closers.push(() => {
    for (const socket of sockets) socket.destroy();
    return new Promise<void>((resolve) => server.close(() => resolve()));
  });
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

async function failure(promise: Promise<unknown>): Promise<ProviderError> {
  const err = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ProviderError);
  return err as ProviderError;
}

const slack = (webhookUrl: string, outbound: Delivery) => senders.chat.slack!.send({ webhookUrl, content: 'x' }, {}, outbound);

describe('the outbound guard, when a provider connects', () => {
  it('refuses a local peer unless its network is allowed', async () => {
    const server = await peer();
    const err = await failure(slack(`${server.url}/hook`, delivery({ allowedNetworks: [] })));
    expect(err).toMatchObject({ permanent: true, kind: 'refused', message: REFUSED_DESTINATION });
    expect(server.requests).toHaveLength(0);
    await slack(`${server.url}/hook`, delivery());
    expect(server.requests).toHaveLength(1);
  });

  it.each([
    ['127.1'],
    ['2130706433'],
    ['0x7f000001'],
    ['0177.0.0.1'],
    ['[::1]'],
    ['[::ffff:127.0.0.1]'],
    ['[::127.0.0.1]'],
    ['[64:ff9b::7f00:1]'],
    ['169.254.169.254'],
    ['10.0.0.1'],
    ['172.16.0.1'],
    ['192.168.0.1'],
    ['100.64.0.1'],
    ['[fc00::1]'],
    ['[fe80::1]'],
    ['0.0.0.0'],
    ['224.0.0.1'],
    ['240.0.0.1'],
    ['localhost'],
    ['hooks.localhost'],
  ])('refuses http://%s/ without connecting', async (host) => {
    const err = await failure(slack(`http://${host}:9/hook`, delivery({ allowedNetworks: [] })));
    expect(err).toMatchObject({ permanent: true, kind: 'refused', message: REFUSED_DESTINATION });
  });

  it('refuses a name that resolves to a refused address: loopback, link-local metadata, private, or any of several', async () => {
    const server = await peer();
    const port = new URL(server.url).port;
    const names = resolver({
      'rebind.example.test': '127.0.0.1',
      'metadata.example.test': '169.254.169.254',
      'intranet.example.test': '10.1.2.3',
      'mixed.example.test': ['93.184.216.34', '127.0.0.1'],
    });
    for (const name of ['rebind', 'metadata', 'intranet', 'mixed']) {
      const err = await failure(slack(`http://${name}.example.test:${port}/hook`, delivery({ allowedNetworks: [], resolve: names.resolve })));
      expect(err).toMatchObject({ permanent: true, kind: 'refused', message: REFUSED_DESTINATION });
    }
    expect(server.requests).toHaveLength(0);
  });

  it('gives the same reason whether the port is open, closed, or the name does not resolve', async () => {
    const open = await peer();
    const names = resolver({ 'open.example.test': '10.0.0.7', 'closed.example.test': '10.0.0.8' });
    const reasons = [];
    for (const url of [`http://open.example.test:${new URL(open.url).port}/`, 'http://closed.example.test:1/', 'http://nowhere.example.test/', `${open.url}/`]) {
      const err = await failure(slack(url, delivery({ allowedNetworks: [], resolve: names.resolve })));
      reasons.push([err.message, err.permanent, err.kind, err.raw]);
    }
    expect(new Set(reasons.map((r) => JSON.stringify(r))).size).toBe(1);
  });

  it('resolves a name once and connects to the address it checked, with the name as Host', async () => {
    const server = await peer();
    const port = new URL(server.url).port;
    // A name that would answer a refused address the second time it is asked (DNS rebinding).
    let asked = 0;
    const rebinding = async (): Promise<ResolvedAddress[]> => [{ address: asked++ === 0 ? '127.0.0.1' : '10.0.0.1', family: 4 }];
    await slack(`http://hooks.example.test:${port}/hook`, delivery({ resolve: rebinding }));
    expect(asked).toBe(1);
    expect(server.requests).toHaveLength(1);
    expect(server.requests[0].headers.host).toBe(`hooks.example.test:${port}`);
  });

  it('refuses schemes other than http and https, and URLs with a user name', async () => {
    for (const url of ['ftp://example.com/x', 'file:///etc/passwd', 'gopher://example.com/', 'http://user:pw@example.com/']) {
      expect(await failure(slack(url, delivery()))).toMatchObject({ kind: 'refused', permanent: true });
    }
  });

  it('does not follow a redirect, even to an allowed peer', async () => {
    const target = await peer();
    const server = await peer(() => ({ status: 302, headers: { Location: `${target.url}/elsewhere` } }));
    const err = await failure(slack(`${server.url}/hook`, delivery()));
    expect(err).toMatchObject({ permanent: true, kind: 'rejected' });
    expect(target.requests).toHaveLength(0);
  });

  it('refuses an SMTP host that is not public, and one whose name resolves to a private address', async () => {
    const smtp = await startSmtpPeer();
    closers.push(smtp.close);
    const names = resolver({ 'mail.example.test': '127.0.0.1' });
    for (const host of ['127.0.0.1', '2130706433', 'localhost', 'mail.example.test']) {
      const err = await failure(
        senders.email.smtp!.send({ to: 'a@b.co', subject: 's', html: 'h' }, { host, port: smtp.port, from: 'f@b.co' }, delivery({ allowedNetworks: [], resolve: names.resolve })),
      );
      expect(err).toMatchObject({ permanent: true, kind: 'refused', message: REFUSED_DESTINATION });
    }
    expect(smtp.mails).toHaveLength(0);
    await senders.email.smtp!.send({ to: 'a@b.co', subject: 's', html: 'h' }, { host: 'mail.example.test', port: smtp.port, from: 'f@b.co' }, delivery({ resolve: names.resolve }));
    expect(smtp.mails).toHaveLength(1);
  });
});

describe('timeouts', () => {
  /** Runs a send expected to time out: its error, and how long it took. */
  async function timedOut(send: () => Promise<unknown>) {
    const started = Date.now();
    const err = await failure(send());
    return { err, ms: Date.now() - started };
  }

  it('ends a send to a peer that never answers at the first-byte bound, as a retryable timeout', async () => {
    const url = await rawServer(() => undefined);
    const { err, ms } = await timedOut(() => slack(`${url}/hook`, delivery()));
    expect(err).toMatchObject({ permanent: false, kind: 'timeout', destinationFault: true });
    expect(err.message).toMatch(/did not answer within 0.3 s/);
    expect(ms).toBeLessThan(2_000);
  });

  it('ends a send to a peer that answers after the bound', async () => {
    const url = await rawServer((_req, res) => setTimeout(() => res.writeHead(200).end('late'), 1_500));
    const { err, ms } = await timedOut(() => slack(`${url}/hook`, delivery()));
    expect(err).toMatchObject({ permanent: false, kind: 'timeout' });
    expect(ms).toBeLessThan(1_500);
  });

  it('ends a send to a peer that drips its answer at the whole-send bound', async () => {
    const url = await rawServer((_req, res) => {
      res.writeHead(200, { 'Content-Type': 'text/plain' });
      const drip = setInterval(() => res.write('.'), 50);
      res.on('close', () => clearInterval(drip));
    });
    const { err, ms } = await timedOut(() => slack(`${url}/hook`, delivery()));
    expect(err).toMatchObject({ permanent: false, kind: 'timeout' });
    expect(err.message).toMatch(/did not complete the exchange within 0.8 s/);
    expect(ms).toBeLessThan(2_000);
  });

  it('ends a send whose name takes too long to resolve at the connect bound', async () => {
    const never = () => new Promise<ResolvedAddress[]>(() => undefined);
    const { err, ms } = await timedOut(() => slack('http://slow-dns.example.test/hook', delivery({ resolve: never })));
    expect(err).toMatchObject({ permanent: false, kind: 'timeout' });
    expect(err.message).toMatch(/did not accept a connection within 0.3 s/);
    expect(ms).toBeLessThan(2_000);
  });

  it('ends a send to an SMTP server that accepts and never greets', async () => {
    const sockets: net.Socket[] = [];
    const silent = net.createServer((socket) => sockets.push(socket));
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    closers.push(() => {
      for (const socket of sockets) socket.destroy();
      return new Promise<void>((resolve) => silent.close(() => resolve()));
    });
    const port = (silent.address() as AddressInfo).port;
    const { err, ms } = await timedOut(() =>
      senders.email.smtp!.send({ to: 'a@b.co', subject: 's', html: 'h' }, { host: '127.0.0.1', port, from: 'f@b.co' }, delivery()),
    );
    expect(err).toMatchObject({ permanent: false, kind: 'timeout' });
    expect(err.message).toMatch(/timed out|did not complete/);
    expect(ms).toBeLessThan(2_000);
  });

  it("gives an SMTP server's greeting the first-byte bound, not what is left of the connect bound", async () => {
    // Postfix's postscreen, for one, waits some seconds before it greets.
    const slowGreeter = await startSmtpPeer({ greetAfterMs: 500 });
    closers.push(slowGreeter.close);
    const timeouts = { connectMs: 200, firstByteMs: 1_000, sendMs: 3_000 };
    await senders.email.smtp!.send({ to: 'a@b.co', subject: 'after a pause', html: 'h' }, { host: '127.0.0.1', port: slowGreeter.port, from: 'f@b.co' }, delivery({ timeouts }));
    expect(slowGreeter.mails.map((mail) => mail.subject)).toEqual(['after a pause']);
  });

  it('reads 429 as rate-limited with its Retry-After, and 5xx as a destination fault', async () => {
    const limited = await peer(() => ({ status: 429, headers: { 'Retry-After': '7' }, body: 'slow down' }));
    expect(await failure(slack(`${limited.url}/hook`, delivery()))).toMatchObject({ permanent: false, kind: 'rate-limited', retryAfterMs: 7_000, destinationFault: false });
    const broken = await peer(() => ({ status: 503, body: 'down' }));
    expect(await failure(slack(`${broken.url}/hook`, delivery()))).toMatchObject({ permanent: false, kind: 'http-5xx', raw: '503 down', destinationFault: true });
  });
});

describe('a request Node cannot make', () => {
  it('fails the send for good, connecting nowhere, instead of throwing past it', async () => {
    const server = await peer();
    // A key stored before keys were checked for what a header may hold.
    const err = await failure(
      senders.email.sendgrid!.send({ to: 'a@b.co', subject: 's', html: 'h' }, { apiKey: 'abc\r\nX-Injected: 1', from: 'f@b.co', baseUrl: server.url }, delivery()),
    );
    expect(err).toMatchObject({ kind: 'rejected', permanent: true });
    expect(err.message).toMatch(/^The request to 127\.0\.0\.1:\d+ could not be made: .*header/);
    expect(server.requests).toHaveLength(0);
  });
});

describe('answers', () => {
  /** A peer that answers `status` with up to 256 MiB, written as fast as the reader takes it, counting what it wrote. */
  async function hugeAnswer(status: number) {
    const TOTAL = 256 * 1024 * 1024;
    const chunk = Buffer.alloc(64 * 1024, 'a');
    const state = { written: 0, stopped: false };
    const url = await rawServer((_req, res) => {
      res.writeHead(status, { 'Content-Type': 'text/plain', 'Content-Length': String(TOTAL) });
      const pump = () => {
        while (state.written < TOTAL && !res.destroyed) {
          state.written += chunk.length;
          if (!res.write(chunk)) return void res.once('drain', pump);
        }
        res.end();
      };
      res.on('close', () => (state.stopped = true));
      pump();
    });
    return { url, state };
  }

  it('stops reading a huge answer at the bound and keeps a short excerpt', async () => {
    const { url, state } = await hugeAnswer(200);
    const before = process.memoryUsage().rss;
    const sent = await slack(`${url}/hook`, delivery({ timeouts: { connectMs: 2_000, firstByteMs: 2_000, sendMs: 10_000 } }));
    expect(sent.raw!.length).toBeLessThanOrEqual(RAW_EXCERPT_CHARS);
    expect(sent.raw!.startsWith('200 aaaa')).toBe(true);
    await expect.poll(() => state.stopped).toBe(true);
    // The peer could write only what the socket buffers took before the reader hung up.
    expect(state.written).toBeLessThan(32 * 1024 * 1024);
    expect(process.memoryUsage().rss - before).toBeLessThan(64 * 1024 * 1024);
  });

  it('keeps a short excerpt of a huge error answer too', async () => {
    const { url } = await hugeAnswer(500);
    const err = await failure(slack(`${url}/hook`, delivery({ timeouts: { connectMs: 2_000, firstByteMs: 2_000, sendMs: 10_000 } })));
    expect(err).toMatchObject({ kind: 'http-5xx', permanent: false });
    expect(err.raw!.length).toBeLessThanOrEqual(RAW_EXCERPT_CHARS);
    expect(ANSWER_LIMIT_BYTES).toBe(64 * 1024);
  });
});

describe('expo (push) with many devices', () => {
  const tokens = Array.from({ length: 12 }, (_, i) => `ExponentPushToken[device-${String(i).padStart(2, '0')}]`);
  const ticketsFor = (refused: Set<number>) =>
    JSON.stringify({
      data: tokens.map((_, i) =>
        refused.has(i)
          ? { status: 'error', message: `"${tokens[i]}" is not a registered push notification recipient`, details: { error: 'DeviceNotRegistered' } }
          : { status: 'ok', id: `0f3e6c1a-9b4d-4e7a-8c2f-${String(i).padStart(12, '0')}` },
      ),
    });

  it('sends once and records one outcome per device token, however long the answer', async () => {
    const answer = ticketsFor(new Set([3, 7]));
    expect(answer.length).toBeGreaterThan(RAW_EXCERPT_CHARS);
    const server = await peer(() => ({ status: 200, body: answer }));
    const sent = await senders.push.expo!.send({ deviceTokens: tokens, title: 'T', content: 'C', subscriberId: 'ada' }, { baseUrl: server.url }, delivery());
    expect(server.requests).toHaveLength(1);
    expect(sent.outcomes).toHaveLength(12);
    expect(sent.outcomes!.filter((o) => o.status === 'ok')).toHaveLength(10);
    expect(sent.outcomes![3]).toEqual({ to: tokens[3], status: 'error', error: 'DeviceNotRegistered' });
    // Every token's outcome, each token by its position and its tail (a token may be 4 KiB long).
    expect(sent.raw).toMatch(/^200 10 of 12 tickets ok\./);
    expect(sent.raw!.split('; ')).toHaveLength(12);
    expect(sent.raw).toContain(`#8 …${tokens[7].slice(-12)}: DeviceNotRegistered`);
    expect(sent.raw).toContain(`#12 …${tokens[11].slice(-12)}: ok`);
  });

  it('fails for good, with every outcome, when every device is refused; retries when Expo asks to slow down', async () => {
    const dead = await peer(() => ({ status: 200, body: ticketsFor(new Set(tokens.map((_, i) => i))) }));
    const err = await failure(senders.push.expo!.send({ deviceTokens: tokens, title: 'T', content: 'C', subscriberId: 'ada' }, { baseUrl: dead.url }, delivery()));
    expect(err).toMatchObject({ permanent: true, kind: 'rejected', message: 'Expo refused every device: DeviceNotRegistered' });
    expect(err.outcomes).toHaveLength(12);
    const busy = await peer(() => ({ status: 200, body: JSON.stringify({ data: tokens.map(() => ({ status: 'error', details: { error: 'MessageRateExceeded' } })) }) }));
    expect(await failure(senders.push.expo!.send({ deviceTokens: tokens, title: 'T', content: 'C', subscriberId: 'ada' }, { baseUrl: busy.url }, delivery()))).toMatchObject({
      permanent: false,
      kind: 'rate-limited',
    });
  });
});
