// A list's page of large stored values reserves its bytes before it is read and holds them until
// its answer ends (src/answer-memory.ts): another large page waits for them, and past the wait is
// refused with a 503; small pages never wait. Served on 127.0.0.1, so that a client can hold an
// answer by not reading it.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import http from 'node:http';
import { unreadAnswer } from '../helpers/requests.js';
import type { AddressInfo } from 'node:net';
import { useTestApp } from '../helpers/app.js';
import { createServer, type HeraldServer } from '../../src/http/server.js';
import { insertSubscriber } from '../../src/db/repos/subscribers.js';
import { LARGE_PAGE_BYTES } from '../../src/answer-memory.js';
import { JobRunner } from '../../src/engine/runner.js';
import { createIntegration, createSubscriber, createWorkflow, step } from '../helpers/factories.js';

const MiB = 1024 * 1024;
const t = useTestApp({ config: { largeAnswers: { bytes: 12 * MiB, waitMs: 400 } } });

let served: HeraldServer;
let base: string;
beforeAll(async () => {
  served = createServer(t.app);
  await new Promise<void>((resolve) => served.server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(served.server.address() as AddressInfo).port}`;
});
afterAll(async () => served?.drain(0));

const headers = () => ({ Authorization: `Bearer ${t.a.key}` });

/** Asks for `path` and reads none of the answer: it stays under way until `stop` closes the connection. */
const unread = (path: string, asked: Record<string, string> = headers()) => unreadAnswer(`${base}${path}`, asked);

describe('large pages and the memory they hold', () => {
  it('makes a second large page wait for the first to end, refuses it with a 503 past the wait, and never holds back a small one', async () => {
    // Nine subscribers of 1 MiB of data: a page of all of them is 9 MiB, past LARGE_PAGE_BYTES, and
    // two such pages do not fit in the 12 MiB this app allows.
    for (let i = 0; i < 9; i++) await insertSubscriber(t.db, t.environments.a, { subscriberId: `large-${i}`, data: { blob: 'x'.repeat(MiB) } }, t.clock.now());
    expect(9 * MiB).toBeGreaterThan(LARGE_PAGE_BYTES);
    // And nine small ones after them: the second page of nine is small.
    t.clock.advance(1000);
    for (let i = 0; i < 9; i++) await insertSubscriber(t.db, t.environments.a, { subscriberId: `small-${i}` }, t.clock.now());

    const first = await unread('/v1/subscribers?limit=100');
    expect(first.status).toBe(200);
    const refused = await fetch(`${base}/v1/subscribers?limit=100`, { headers: headers() });
    expect(refused.status).toBe(503);
    expect(refused.headers.get('retry-after')).toBe('5');
    expect(await refused.json()).toMatchObject({ statusCode: 503, error: 'Service Unavailable', path: '/v1/subscribers' });
    // Five of them (5 MiB) are no large page: answered while the first still holds its memory.
    const small = await fetch(`${base}/v1/subscribers?limit=5`, { headers: headers() });
    expect(small.status).toBe(200);
    expect((await small.json()).data).toHaveLength(5);
    const second = await fetch(`${base}/v1/subscribers?limit=9&page=1`, { headers: headers() });
    expect(second.status).toBe(200);
    expect((await second.json()).data.map((s: { subscriberId: string }) => s.subscriberId)).toEqual(Array.from({ length: 9 }, (_, i) => `small-${i}`));

    // Waiting, a page is answered as soon as the first answer ends (its client gone).
    const waiting = fetch(`${base}/v1/subscribers?limit=100`, { headers: headers() });
    await new Promise((resolve) => setTimeout(resolve, 100));
    first.stop();
    const answered = await waiting;
    expect(answered.status).toBe(200);
    expect((await answered.json()).data.map((s: { subscriberId: string }) => s.subscriberId)).toHaveLength(18);
  });

  it('gives the memory back whenever the client leaves: before the operation starts, or while its page waits', async () => {
    for (let i = 0; i < 9; i++) await insertSubscriber(t.db, t.environments.a, { subscriberId: `gone-${i}`, data: { blob: 'x'.repeat(MiB) } }, t.clock.now());
    // A server that hands each request over 50 ms late (as a slow key lookup would): the client
    // leaves before the operation has started, so before anything could listen for its leaving.
    const late = http.createServer((req, res) => setTimeout(() => t.app(req, res), 50));
    await new Promise<void>((resolve) => late.listen(0, '127.0.0.1', resolve));
    const lateUrl = `http://127.0.0.1:${(late.address() as AddressInfo).port}`;
    for (let i = 0; i < 4; i++) {
      const req = http.get(`${lateUrl}/v1/subscribers?limit=100`, { headers: headers() });
      req.on('error', () => undefined);
      setTimeout(() => req.destroy(), 10);
    }
    // And one that leaves while its page waits behind another's.
    const first = await unread('/v1/subscribers?limit=100');
    const waiter = http.get(`${base}/v1/subscribers?limit=100`, { headers: headers() });
    waiter.on('error', () => undefined);
    await new Promise((resolve) => setTimeout(resolve, 100));
    waiter.destroy();
    first.stop();
    await new Promise((resolve) => setTimeout(resolve, 300));
    late.close();
    // Nothing is held now: two large pages fit, one after the other, at once.
    for (let i = 0; i < 2; i++) {
      const page = await fetch(`${base}/v1/subscribers?limit=100`, { headers: headers() });
      expect(page.status).toBe(200);
      expect((await page.json()).data).toHaveLength(9);
    }
    const second = await unread('/v1/subscribers?limit=100');
    expect(second.status).toBe(200);
    second.stop();
  });

  it("counts a subscribers page's channel credentials with its data", async () => {
    // Nine subscribers with little data, each with three push channels of 100 device tokens of
    // 4,000 characters: 1.2 MB a subscriber, about 10.8 MB a page.
    const integrations = [];
    for (let i = 0; i < 3; i++) integrations.push(await createIntegration(t.a, { providerId: 'expo', name: `Expo ${i}`, identifier: `expo-${i}` }));
    for (let i = 0; i < 9; i++) {
      await createSubscriber(t.a, { subscriberId: `devices-${i}` });
      for (const { identifier } of integrations) {
        const deviceTokens = Array.from({ length: 100 }, (_, j) => `${identifier}-${i}-${j}-${'x'.repeat(4_000)}`);
        await t.a.put(`/v1/subscribers/devices-${i}/credentials`, { providerId: 'expo', integrationIdentifier: identifier, credentials: { deviceTokens } }).expect(200);
      }
    }
    const first = await unread('/v1/subscribers?limit=100');
    expect(first.status).toBe(200);
    expect((await fetch(`${base}/v1/subscribers?limit=100`, { headers: headers() })).status).toBe(503);
    first.stop();
    await new Promise((resolve) => setTimeout(resolve, 50));
    const answered = await fetch(`${base}/v1/subscribers?limit=100`, { headers: headers() });
    expect(answered.status).toBe(200);
    const { data } = await answered.json();
    expect(data.map((s: { channels: unknown[] }) => s.channels.length)).toEqual(Array(9).fill(3));
  });

  it("holds a workflows page's steps the same way", async () => {
    // Nine workflows of four email steps whose bodies are 250,000 characters: about 9 MB a page.
    const body = `<p>${'x'.repeat(250_000)}</p>`;
    for (let i = 0; i < 9; i++) await createWorkflow(t.a, { name: `Long ${i}`, steps: Array.from({ length: 4 }, () => step.email({ content: body })) });
    const first = await unread('/v1/workflows?limit=100');
    expect(first.status).toBe(200);
    expect((await fetch(`${base}/v1/workflows?limit=100`, { headers: headers() })).status).toBe(503);
    first.stop();
    await new Promise((resolve) => setTimeout(resolve, 50));
    const answered = await fetch(`${base}/v1/workflows?limit=100`, { headers: headers() });
    expect(answered.status).toBe(200);
    expect((await answered.json()).data).toHaveLength(9);
  });

  it("holds a notifications page's payloads, a feed's and an inbox page's messages the same way", async () => {
    // Seventeen notifications of one subscriber, each with its in-app message: payloads of about
    // 1 MB, messages of about 1 MB (four fields of 250,000 characters), of which the feed shows two
    // (8.5 MB a page).
    await createSubscriber(t.a, { subscriberId: 'reader' });
    const text = 'x'.repeat(250_000);
    const { workflowId } = await createWorkflow(t.a, { name: 'Heavy', steps: [{ type: 'in_app', template: { subject: '{{payload.text}}', content: '{{payload.text}}', data: { a: '{{payload.text}}', b: '{{payload.text}}' } } }] });
    for (let i = 0; i < 17; i++) await t.a.post('/v1/events/trigger', { name: workflowId, to: 'reader', payload: { text, more: 'y'.repeat(750_000) } }).expect(201);
    await new JobRunner(t.deps).runUntilIdle();
    const token = (await t.a.post('/v1/subscribers/reader/inbox-tokens', {}).expect(201)).body.data.token;
    const pages: Array<[string, Record<string, string>]> = [
      ['/v1/notifications?limit=100', headers()],
      ['/v1/subscribers/reader/messages?limit=100', headers()],
      ['/v1/inbox/messages?limit=100', { Authorization: `Bearer ${token}` }],
    ];
    for (const [path, asked] of pages) {
      const first = await unread(path, asked);
      expect(first.status, path).toBe(200);
      const refused = await fetch(`${base}${path}`, { headers: asked });
      expect(refused.status, path).toBe(503);
      await refused.arrayBuffer();
      first.stop();
      await new Promise((resolve) => setTimeout(resolve, 50));
      const answered = await fetch(`${base}${path}`, { headers: asked });
      expect(answered.status, path).toBe(200);
      expect((await answered.json()).data, path).toHaveLength(17);
    }
  });
});
