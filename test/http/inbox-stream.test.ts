import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.js';
import { listen } from '../helpers/browser.js';
import { openSse, rawConnection, streamRequest, type SseStream } from '../helpers/sse.js';
import { createApp } from '../../src/app.js';
import { JobRunner } from '../../src/engine/runner.js';
import { pruneEvents } from '../../src/db/repos/inbox.js';
import type { InboxHub } from '../../src/engine/inbox-hub.js';
import { EncodedEvents, MAX_STREAM_BACKLOG_BYTES, backlogBound } from '../../src/http/inbox-stream.js';
import { addSigningSecret, retireSigningSecret, signingSecrets } from '../../src/engine/inbox-tokens.js';

// The stream over a real HTTP connection, as a browser holds it: an app of its own on the test's
// database (short pings; a catch-up so slow that only the wake after commit can deliver in time).
let t: TestApp;
let server: { url: string; close(): Promise<void> };
let hub: InboxHub;
const open: SseStream[] = [];

beforeAll(async () => {
  t = await startTestApp();
  const app = await createApp(t.deps, { inbox: { pingMs: 100, catchUpMs: 3_600_000, credentialCheckMs: 50 } });
  hub = app.locals.inboxHub as InboxHub;
  server = await listen(app);
});
afterEach(async () => {
  for (const stream of open.splice(0)) stream.close();
  await t.assertContract();
});
afterAll(async () => {
  await hub?.close();
  await server?.close();
  await t?.close();
});

let token: string;
beforeEach(async () => {
  await t.renew();
  await t.a.post('/v1/subscribers', { subscriberId: 'ada' }).expect(201);
  await t.a.post('/v1/workflows', { name: 'Comment added', steps: [{ type: 'in_app', template: { content: 'Hello #{{payload.n}}' } }] }).expect(201);
  token = (await t.a.post('/v1/subscribers/ada/inbox-tokens', {}).expect(201)).body.data.token;
});

async function stream(headers: Record<string, string> = {}, query = ''): Promise<SseStream> {
  const opened = await openSse(`${server.url}/v1/inbox/events${query}`, query ? headers : { Authorization: `Bearer ${token}`, ...headers });
  open.push(opened);
  return opened;
}

async function deliver(n: number): Promise<void> {
  t.clock.advance(1000);
  await t.a.post('/v1/events/trigger', { name: 'comment-added', to: 'ada', payload: { n } }).expect(201);
  await new JobRunner(t.deps).runUntilIdle();
}

const inbox = (path: string) => t.http.get(path).set('Authorization', `Bearer ${token}`);

/** An in-app message to ada of 40 KB: each change to it sends a stream the whole item. */
async function bigMessage(): Promise<{ messageId: string }> {
  await t.a.post('/v1/workflows', { workflowId: 'big', name: 'Big', steps: [{ type: 'in_app', template: { content: '{{payload.text}}' } }] }).expect(201);
  await t.a.post('/v1/events/trigger', { name: 'big', to: 'ada', payload: { text: 'x'.repeat(40_000) } }).expect(201);
  await new JobRunner(t.deps).runUntilIdle();
  return (await inbox('/v1/inbox/messages').expect(200)).body.data[0];
}
const patch = (path: string, body: object) => t.http.patch(path).set('Authorization', `Bearer ${token}`).send(body);

describe('GET /inbox/events (streamInboxEvents)', () => {
  it('lets a subscriber hold at most 10 streams open, answering 429 with the error body past them, until one closes', async () => {
    const streams = await Promise.all(Array.from({ length: 10 }, () => stream()));
    expect(streams.map((s) => s.status)).toEqual(Array(10).fill(200));
    const refused = await stream();
    expect(refused.status).toBe(429);
    expect(refused.headers.get('retry-after')).toBe('5');
    expect(refused.body).toMatchObject({ statusCode: 429, error: 'Too Many Requests', message: expect.stringContaining('10 inbox streams open') });
    // Another subscriber of the environment is not held back by ada's.
    await t.a.post('/v1/subscribers', { subscriberId: 'grace' }).expect(201);
    const graceToken = (await t.a.post('/v1/subscribers/grace/inbox-tokens', {}).expect(201)).body.data.token;
    expect((await stream({ Authorization: `Bearer ${graceToken}` })).status).toBe(200);
    streams[0].close();
    await expect.poll(async () => {
      const again = await stream();
      again.close();
      return again.status;
    }).toBe(200);
  });

  it('starts with the counts, then sends each new item and every change made elsewhere, numbered without a gap', async () => {
    await deliver(1);
    const s = await stream();
    expect(s.status).toBe(200);
    expect(s.headers.get('content-type')).toMatch(/^text\/event-stream/);
    expect(s.headers.get('x-accel-buffering')).toBe('no');
    const first = await s.next();
    expect(first).toEqual({ id: '1', event: 'counts', data: { type: 'counts', counts: { unread: 1, unseen: 1, total: 1, archived: 0 } } });

    await deliver(2);
    const created = await s.next((e) => e.event === 'notification.created');
    expect(created.id).toBe('2');
    expect(created.data).toMatchObject({ item: { body: 'Hello #2', readAt: null }, counts: { unread: 2, total: 2 } });

    const itemId = (created.data.item as { messageId: string }).messageId;
    await patch(`/v1/inbox/messages/${itemId}`, { read: true }).expect(200);
    const updated = await s.next((e) => e.event === 'notification.updated');
    expect(updated.id).toBe('3');
    expect(updated.data).toMatchObject({ item: { messageId: itemId, readAt: expect.any(String) }, counts: { unread: 1 } });

    await t.http.post('/v1/inbox/messages/bulk').set('Authorization', `Bearer ${token}`).send({ set: { read: true } }).expect(200);
    expect(await s.next((e) => e.event === 'counts')).toMatchObject({ id: '4', data: { counts: { unread: 0, unseen: 0, total: 2 } } });

    await t.http.delete(`/v1/inbox/messages/${itemId}`).set('Authorization', `Bearer ${token}`).expect(204);
    expect(await s.next((e) => e.event === 'notification.updated')).toMatchObject({ id: '5', data: { messageId: itemId, deleted: true, counts: { total: 1 } } });
    // A change from the secret-key API reaches the stream too.
    const [remaining] = (await t.a.get('/v1/subscribers/ada/messages').expect(200)).body.data;
    await t.a.patch(`/v1/subscribers/ada/messages/${remaining.messageId}`, { read: false }).expect(200);
    expect(await s.next((e) => e.event === 'notification.updated')).toMatchObject({ id: '6', data: { counts: { unread: 1 } } });
    expect(s.events.map((e) => Number(e.id))).toEqual([1, 2, 3, 4, 5, 6]);
  });

  it('replays what was missed after Last-Event-ID, and nothing twice', async () => {
    const s = await stream();
    expect((await s.next()).id).toBe('0');
    await deliver(1);
    await s.next((e) => e.event === 'notification.created');
    s.close();
    await deliver(2);
    await deliver(3);
    const resumed = await stream({ 'Last-Event-ID': '1' });
    const replayed = [await resumed.next(), await resumed.next()];
    expect(replayed.map((e) => [e.id, e.event, (e.data.item as { body: string }).body])).toEqual([
      ['2', 'notification.created', 'Hello #2'],
      ['3', 'notification.created', 'Hello #3'],
    ]);
    await deliver(4);
    expect((await resumed.next()).id).toBe('4');
    expect(resumed.events.map((e) => e.id)).toEqual(['2', '3', '4']);
  });

  it('sends reset when the events after Last-Event-ID are no longer kept, or the id was never reached or sent', async () => {
    await deliver(1);
    await deliver(2);
    await deliver(3);
    await pruneEvents(t.db, new Date(t.clock.now().getTime() + 1000), 1000);
    const gap = await stream({ 'Last-Event-ID': '1' });
    expect(await gap.next()).toEqual({ id: '3', event: 'reset', data: { type: 'reset' } });
    const future = await stream({ 'Last-Event-ID': '99' });
    expect(await future.next()).toMatchObject({ id: '3', event: 'reset' });
    // An id Herald never sends: the client holds events it cannot place, so it starts over.
    const unreadable = await stream({ 'Last-Event-ID': 'abc' });
    expect(await unreadable.next()).toMatchObject({ id: '3', event: 'reset' });
    const { ticket } = (await t.http.post('/v1/inbox/events/tickets').set('Authorization', `Bearer ${token}`).expect(201)).body.data;
    const unreadableInQuery = await stream({}, `?ticket=${ticket}&lastEventId=-1`);
    expect(await unreadableInQuery.next()).toMatchObject({ id: '3', event: 'reset' });
    await deliver(4);
    expect(await gap.next()).toMatchObject({ id: '4', event: 'notification.created' });
  });

  it('answers HEAD with what a stream would answer, and opens none', async () => {
    const res = await t.http.head('/v1/inbox/events').set('Authorization', `Bearer ${token}`).expect(200);
    expect(res.headers['content-type']).toBe('text/event-stream; charset=utf-8');
    expect(hub.size).toBe(0);
  });

  it('sends a ping comment to keep proxies from closing an idle stream', async () => {
    const s = await stream();
    expect(await s.comment()).toBe('ping');
  });

  it('opens with a single-use ticket for EventSource, and never with a token in the URL', async () => {
    const { ticket } = (await t.http.post('/v1/inbox/events/tickets').set('Authorization', `Bearer ${token}`).expect(201)).body.data;
    const s = await stream({}, `?ticket=${ticket}`);
    expect(s.status).toBe(200);
    expect((await s.next()).event).toBe('counts');
    const reused = await stream({}, `?ticket=${ticket}`);
    expect(reused.status).toBe(401);
    expect(reused.body).toMatchObject({ statusCode: 401, error: 'Unauthorized' });
    const inUrl = await stream({}, `?access_token=${token}`);
    expect(inUrl.status).toBe(401);
    // A new EventSource with a fresh ticket resumes from lastEventId.
    await deliver(7);
    const { ticket: again } = (await t.http.post('/v1/inbox/events/tickets').set('Authorization', `Bearer ${token}`).expect(201)).body.data;
    const resumed = await stream({}, `?ticket=${again}&lastEventId=0`);
    expect(await resumed.next()).toMatchObject({ id: '1', event: 'notification.created' });
    const late = (await t.http.post('/v1/inbox/events/tickets').set('Authorization', `Bearer ${token}`).expect(201)).body.data.ticket;
    t.clock.advance(61_000);
    expect((await stream({}, `?ticket=${late}`)).status).toBe(401);
  });

  it('ends a stream once its token expires, or its ticket’s token does: the client cannot reconnect with it', async () => {
    const shortLived = (await t.a.post('/v1/subscribers/ada/inbox-tokens', { expiresIn: 300 }).expect(201)).body.data.token;
    const withToken = await stream({ Authorization: `Bearer ${shortLived}` });
    const { ticket } = (await t.http.post('/v1/inbox/events/tickets').set('Authorization', `Bearer ${shortLived}`).expect(201)).body.data;
    const withTicket = await stream({}, `?ticket=${ticket}`);
    expect((await withTicket.next()).event).toBe('counts');
    // Another subscriber token, of the hour's default, is not touched.
    const other = await stream();
    t.clock.advance(299_000);
    expect(await withToken.endedWithin(300)).toBe(false);
    t.clock.advance(1_000);
    expect(await withToken.endedWithin(2_000)).toBe(true);
    expect(await withTicket.endedWithin(2_000)).toBe(true);
    expect(await other.endedWithin(300)).toBe(false);
    expect((await stream({ Authorization: `Bearer ${shortLived}` })).status).toBe(401);
  });

  it('ends the streams opened with a token, or its ticket, once the token’s signing secret is retired', async () => {
    const [old] = await signingSecrets(t.deps, t.environments.a);
    const withToken = await stream();
    const { ticket } = (await t.http.post('/v1/inbox/events/tickets').set('Authorization', `Bearer ${token}`).expect(201)).body.data;
    const withTicket = await stream({}, `?ticket=${ticket}`);
    await addSigningSecret(t.deps, t.environments.a);
    const fresh = (await t.a.post('/v1/subscribers/ada/inbox-tokens', {}).expect(201)).body.data.token;
    const withNewToken = await stream({ Authorization: `Bearer ${fresh}` });
    expect(await withToken.endedWithin(300)).toBe(false);
    expect(await retireSigningSecret(t.deps, t.environments.a, old.kid)).toBe(true);
    expect(await withToken.endedWithin(2_000)).toBe(true);
    expect(await withTicket.endedWithin(2_000)).toBe(true);
    // A message after that reaches the stream of the new secret's token only.
    await deliver(1);
    expect(await withNewToken.next((event) => event.event === 'notification.created')).toMatchObject({ event: 'notification.created' });
    expect(withToken.events.filter((event) => event.event === 'notification.created')).toEqual([]);
  });

  it('ends every stream of a subscriber once it is deleted, in every process, freeing their places; a reconnect is answered 404', async () => {
    const withToken = await stream();
    const { ticket } = (await t.http.post('/v1/inbox/events/tickets').set('Authorization', `Bearer ${token}`).expect(201)).body.data;
    const withTicket = await stream({}, `?ticket=${ticket}`);
    // Another app on the same database, as another API process would be: it hears of no deletion.
    const otherApp = await createApp(t.deps, { inbox: { credentialCheckMs: 50 } });
    const other = await listen(otherApp);
    const otherHub = otherApp.locals.inboxHub as InboxHub;
    try {
      const elsewhere = await openSse(`${other.url}/v1/inbox/events`, { Authorization: `Bearer ${token}` });
      open.push(elsewhere);
      // Another subscriber's stream goes on.
      await t.a.post('/v1/subscribers', { subscriberId: 'grace' }).expect(201);
      const grace = await stream({ Authorization: `Bearer ${(await t.a.post('/v1/subscribers/grace/inbox-tokens', {}).expect(201)).body.data.token}` });
      for (const s of [withToken, withTicket, elsewhere, grace]) expect((await s.next()).event).toBe('counts');
      expect([hub.size, otherHub.size]).toEqual([3, 1]);
      await t.a.delete('/v1/subscribers/ada').expect(200);
      for (const s of [withToken, withTicket, elsewhere]) expect(await s.endedWithin(2_000)).toBe(true);
      expect(await grace.endedWithin(300)).toBe(false);
      await expect.poll(() => [hub.size, otherHub.size]).toEqual([1, 0]);
      const again = await stream();
      expect(again.status).toBe(404);
      expect(again.body).toMatchObject({ statusCode: 404, message: 'Subscriber ada not found' });
    } finally {
      await otherHub.close();
      await other.close();
    }
  });

  it('keeps each subscriber’s stream to their own events', async () => {
    await t.a.post('/v1/subscribers', { subscriberId: 'grace' }).expect(201);
    const graceToken = (await t.a.post('/v1/subscribers/grace/inbox-tokens', {}).expect(201)).body.data.token;
    const grace = await stream({ Authorization: `Bearer ${graceToken}` });
    await grace.next();
    await deliver(1);
    expect((await inbox('/v1/inbox/counts').expect(200)).body.data.total).toBe(1);
    await expect(grace.next(undefined, 300)).rejects.toThrow(/No matching event/);
  });

  it('cuts a stream whose client stops reading once its backlog passes the bound, instead of buffering without end', async () => {
    const item = await bigMessage();
    // A client that asks for the stream and then never reads.
    const socket = await rawConnection(server.url);
    socket.pause();
    socket.write(streamRequest(token));
    await expect.poll(() => hub.size).toBe(1);
    // Each change sends the whole item (40 KB): far more than the socket's buffers and the bound.
    const sent = 12 * 2 ** 20 + MAX_STREAM_BACKLOG_BYTES;
    for (let i = 0; i * 40_000 < sent && hub.size > 0; i++) await patch(`/v1/inbox/messages/${item.messageId}`, { read: i % 2 === 0 }).expect(200);
    await expect.poll(() => hub.size).toBe(0);
    socket.destroy();
  });

  it('sends an event larger than its bound whole to a client that keeps reading, instead of cutting it', async () => {
    // Four fields of 250,000 control characters (each within a field's budget, a million characters
    // together), six bytes each in JSON: an event of 6 MB, past the 1 MiB bound of one stream and
    // more than the kernel takes at once on 127.0.0.1.
    const field = '{{#each payload.times}}{{../payload.text}}{{/each}}';
    const fields = { subject: field, content: field, data: { a: field, b: field } };
    await t.a.post('/v1/workflows', { workflowId: 'wide', name: 'Wide', steps: [{ type: 'in_app', template: fields }] }).expect(201);
    const s = await stream();
    expect((await s.next()).event).toBe('counts');
    const payload = { text: '\u0001'.repeat(1000), times: Array(250).fill(1) };
    const text = payload.text.repeat(250);
    await t.a.post('/v1/events/trigger', { name: 'wide', to: 'ada', payload }).expect(201);
    await new JobRunner(t.deps).runUntilIdle();
    const created = await s.next(undefined, 10_000);
    expect(created.event).toBe('notification.created');
    expect(Buffer.byteLength(JSON.stringify(created.data))).toBeGreaterThan(MAX_STREAM_BACKLOG_BYTES);
    expect(created.data.item).toMatchObject({ subject: text, body: text, data: { a: text, b: text } });
    // Each change sends the item again: more than the 64 MiB the streams share past their bounds,
    // which each event gives back once it is sent.
    for (let i = 0; i < 12; i++) {
      await patch(`/v1/inbox/messages/${(created.data.item as { messageId: string }).messageId}`, { read: i % 2 === 0 }).expect(200);
      expect(await s.next(undefined, 10_000)).toMatchObject({ event: 'notification.updated', data: { item: { readAt: i % 2 === 0 ? expect.any(String) : null } } });
    }
    // Two more in one batch, written to the stream one after the other: the second is not judged
    // by the first still waiting on the allowance.
    for (let i = 0; i < 2; i++) await t.a.post('/v1/events/trigger', { name: 'wide', to: 'ada', payload }).expect(201);
    await new JobRunner(t.deps).runUntilIdle();
    for (let i = 0; i < 2; i++) expect((await s.next(undefined, 10_000)).event).toBe('notification.created');
    expect(hub.size).toBe(1);
  });

  it('cuts a client that stops reading after taking large events on the shared allowance, rather than lending it all', async () => {
    const field = '{{#each payload.times}}{{../payload.text}}{{/each}}';
    await t.a.post('/v1/workflows', { workflowId: 'wide', name: 'Wide', steps: [{ type: 'in_app', template: { subject: field, content: field } }] }).expect(201);
    const socket = await rawConnection(server.url);
    socket.pause();
    socket.write(streamRequest(token));
    await expect.poll(() => hub.size).toBe(1);
    // Events of about 3 MB each, in turns of their own: once the socket takes nothing more of what
    // was lent, the next one cuts the stream, rather than taking 64 MiB of the shared allowance.
    const payload = { text: '\u0001'.repeat(1000), times: Array(250).fill(1) };
    for (let i = 0; i < 4 && hub.size > 0; i++) {
      await t.a.post('/v1/events/trigger', { name: 'wide', to: 'ada', payload }).expect(201);
      await new JobRunner(t.deps).runUntilIdle();
    }
    await expect.poll(() => hub.size).toBe(0);
    socket.destroy();
  });

  it("encodes an event once for all the streams it goes to in a turn, and again in a later turn", async () => {
    const encoded = new EncodedEvents();
    const payload = JSON.stringify({ type: 'notification.created', text: 'é'.repeat(1000) });
    const first = encoded.of(7, 'notification.created', payload);
    expect(first.toString()).toBe(`id: 7\nevent: notification.created\ndata: ${payload}\n\n`);
    expect(encoded.of(7, 'notification.created', payload)).toBe(first);
    expect(encoded.of(8, 'notification.created', payload)).not.toBe(first);
    await new Promise((resolve) => setImmediate(resolve));
    expect(encoded.of(7, 'notification.created', payload)).not.toBe(first);
  });

  it('shares a budget of 64 MiB between the streams open, from 1 MiB each down to 16 KiB each', () => {
    expect(backlogBound(1)).toBe(MAX_STREAM_BACKLOG_BYTES);
    expect(backlogBound(64)).toBe(1 << 20);
    expect(backlogBound(256)).toBe(256 << 10);
    expect(backlogBound(10_000)).toBe(16 << 10);
  });

  it('replays a backlog larger than that bound to a client that reads slowly, without cutting it', async () => {
    const item = await bigMessage();
    const changes = Math.ceil((8 * 2 ** 20 + MAX_STREAM_BACKLOG_BYTES) / 40_000);
    for (let i = 0; i < changes; i++) await patch(`/v1/inbox/messages/${item.messageId}`, { read: i % 2 === 0 }).expect(200);
    // Reconnects from event 1, then reads nothing for a while.
    const socket = await rawConnection(server.url);
    socket.pause();
    socket.write(streamRequest(token, { 'Last-Event-ID': '1' }));
    await new Promise((resolve) => setTimeout(resolve, 500));
    let received = '';
    socket.on('data', (chunk: Buffer) => (received += chunk.toString()));
    socket.resume();
    const ids = () => [...received.matchAll(/^id: (\d+)$/gm)].map((m) => Number(m[1]));
    await expect.poll(() => ids().length, { timeout: 10_000 }).toBe(changes);
    expect(ids()).toEqual(Array.from({ length: changes }, (_, i) => i + 2));
    expect(hub.size).toBe(1);
    socket.destroy();
  });

  it('ends the streams when the server stops, so the drain can finish', async () => {
    const app = await createApp(t.deps);
    const other = await listen(app);
    const otherHub = app.locals.inboxHub as InboxHub;
    const s = await openSse(`${other.url}/v1/inbox/events`, { Authorization: `Bearer ${token}` });
    await s.next();
    await otherHub.close();
    expect(otherHub.size).toBe(0);
    // Its count starts again from nothing: a new stream counts once, and not once closed.
    const again = await openSse(`${other.url}/v1/inbox/events`, { Authorization: `Bearer ${token}` });
    await again.next();
    expect(otherHub.size).toBe(1);
    again.close();
    await expect.poll(() => otherHub.size).toBe(0);
    await other.close();
  });
});
