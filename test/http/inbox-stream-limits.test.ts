import http from 'node:http';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.js';
import { listen } from '../helpers/browser.js';
import { openSse, rawConnection, streamRequest, type SseStream } from '../helpers/sse.js';
import type { InboxHub } from '../../src/engine/inbox-hub.js';

// How many inbox streams one process holds, with the limits lowered: 3 in all, 2 for one
// organization's environments together. Over a real HTTP connection, through the contract recorder (t.app).
let t: TestApp;
let server: { url: string; close(): Promise<void> };
const open: SseStream[] = [];

beforeAll(async () => {
  t = await startTestApp({ config: { inboxStreams: { max: 3, perOrganization: 2 } } });
  server = await listen(t.app);
});
afterEach(async () => {
  for (const stream of open.splice(0)) stream.close();
  await expect.poll(() => (t.app.locals.inboxHub as InboxHub).size).toBe(0);
  await t.assertContract();
});
afterAll(async () => {
  await (t?.app.locals.inboxHub as InboxHub | undefined)?.close();
  await server?.close();
  await t?.close();
});

beforeEach(() => t.renew());

/** A token of a new subscriber of the environment `client` is a key of. */
async function tokenIn(client: TestApp['a'], subscriberId: string): Promise<string> {
  await client.post('/v1/subscribers', { subscriberId }).expect(201);
  return (await client.post(`/v1/subscribers/${subscriberId}/inbox-tokens`, {}).expect(201)).body.data.token;
}

async function stream(token: string): Promise<SseStream> {
  const opened = await openSse(`${server.url}/v1/inbox/events`, { Authorization: `Bearer ${token}` });
  open.push(opened);
  return opened;
}

describe('inbox streams a process holds', () => {
  it('lets one organization hold at most its share, whatever its environments and subscribers, while another still opens', async () => {
    // Organization A's two environments: one stream each fills its share.
    const [ada, grace] = [await tokenIn(t.a, 'ada'), await tokenIn(t.aProduction, 'grace')];
    expect((await stream(ada)).status).toBe(200);
    expect((await stream(grace)).status).toBe(200);
    for (const client of [t.a, t.aProduction]) {
      const refused = await stream(await tokenIn(client, 'linus'));
      expect(refused.status).toBe(429);
      expect(refused.headers.get('retry-after')).toBe('5');
      expect(refused.body).toMatchObject({ statusCode: 429, error: 'Too Many Requests', message: expect.stringContaining("This organization's environments have 2 inbox streams open") });
    }
    // Another organization's subscriber is not held back by this organization's streams.
    expect((await stream(await tokenIn(t.b, 'ada'))).status).toBe(200);
  });

  it('answers 503 with Retry-After when the process holds all it allows, and opens again once one closes', async () => {
    const first = await stream(await tokenIn(t.a, 'ada'));
    await stream(await tokenIn(t.aProduction, 'ada'));
    await stream(await tokenIn(t.b, 'ada'));
    const late = await tokenIn(t.b, 'grace');
    const refused = await stream(late);
    expect(refused.status).toBe(503);
    expect(refused.headers.get('retry-after')).toBe('5');
    expect(refused.body).toMatchObject({ statusCode: 503, error: 'Service Unavailable', message: expect.stringContaining('all the inbox streams it allows (3)'), path: '/v1/inbox/events' });
    first.close();
    await expect.poll(async () => {
      const again = await openSse(`${server.url}/v1/inbox/events`, { Authorization: `Bearer ${late}` });
      open.push(again);
      return again.status;
    }).toBe(200);
  });

  it('refuses an organization at its share with 429 even when the process is full too', async () => {
    await stream(await tokenIn(t.a, 'ada'));
    await stream(await tokenIn(t.a, 'grace'));
    await stream(await tokenIn(t.b, 'ada'));
    const refused = await stream(await tokenIn(t.a, 'linus'));
    expect(refused.status).toBe(429);
    expect(refused.body).toMatchObject({ message: expect.stringContaining("This organization's environments have 2 inbox streams open") });
  });

  it('counts streams asked for at once: one past the limit is refused, whichever it is', async () => {
    const tokens = [await tokenIn(t.a, 'ada'), await tokenIn(t.aProduction, 'ada'), await tokenIn(t.b, 'ada'), await tokenIn(t.b, 'grace')];
    const statuses = (await Promise.all(tokens.map((token) => stream(token)))).map((s) => s.status);
    expect(statuses.filter((status) => status === 200)).toHaveLength(3);
    expect(statuses.filter((status) => status === 503)).toHaveLength(1);
  });

  it('gives back the room of a stream that failed to open', async () => {
    const token = await tokenIn(t.a, 'ada');
    const hub = t.app.locals.inboxHub as InboxHub;
    // The stream's first read (the subscriber's counts) fails: its table is gone for a moment.
    await t.db.raw('ALTER TABLE inbox_counts RENAME TO inbox_counts_away');
    try {
      const failed = await stream(token);
      expect(failed.status).toBe(200);
      await expect.poll(() => hub.size).toBe(0);
    } finally {
      await t.db.raw('ALTER TABLE inbox_counts_away RENAME TO inbox_counts');
    }
    const streams = [await stream(token), await stream(token)];
    expect(streams.map((s) => s.status)).toEqual([200, 200]);
    expect(hub.size).toBe(2);
  });

  it('gives back the room of a stream whose client went away before it opened', async () => {
    const token = await tokenIn(t.a, 'ada');
    const { port } = new URL(server.url);
    // Each request is dropped as soon as it is sent: some while the server still looks the subscriber up.
    for (let i = 0; i < 30; i++) {
      await new Promise<void>((resolve) => {
        const req = http.get({ host: '127.0.0.1', port, path: '/v1/inbox/events', agent: false, headers: { Authorization: `Bearer ${token}`, Accept: 'text/event-stream' } });
        req.on('error', () => resolve());
        req.on('close', () => resolve());
        setImmediate(() => req.destroy());
      });
    }
    const hub = t.app.locals.inboxHub as InboxHub;
    await expect.poll(() => hub.size).toBe(0);
    expect((await stream(token)).status).toBe(200);
  });

  it('opens no stream for a request pipelined behind another on the same connection', async () => {
    const [first, behind] = [await tokenIn(t.b, 'ada'), await tokenIn(t.a, 'ada')];
    const hub = t.app.locals.inboxHub as InboxHub;
    const socket = await rawConnection(server.url);
    socket.write(streamRequest(first) + streamRequest(behind).repeat(3));
    let received = '';
    socket.on('data', (chunk: Buffer) => (received += chunk.toString()));
    await expect.poll(() => received).toContain('event: counts');
    // Only the first is a stream: the three behind it would never be answered, and are not counted.
    expect(hub.size).toBe(1);
    socket.destroy();
    await expect.poll(() => hub.size).toBe(0);
    expect((await Promise.all([stream(behind), stream(behind)])).map((s) => s.status)).toEqual([200, 200]);
  });
});

