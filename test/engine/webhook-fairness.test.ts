import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { useTestApp } from '../helpers/app.js';
import { startHttpPeer } from '../helpers/peers.js';
import { JobRunner } from '../../src/engine/runner.js';
import { sendTest } from '../../src/engine/webhooks.js';
import { deferEndpointDeliveries, insertDeliveries, type NewDelivery } from '../../src/db/repos/webhook-deliveries.js';
import { EndpointWaits } from '../../src/engine/webhook-sender.js';
import { systemClock } from '../../src/clock.js';

// Slow destinations kept apart, for outbound webhooks: one environment's endpoints share its slots,
// and a backlog queued for endpoints that hang or fail must not hold up a healthy endpoint's
// deliveries beyond its fair share, nor a test event someone is waiting for in the dashboard.
// Real receivers on 127.0.0.1 and the real clock: the runner puts back and defers by it.
const t = useTestApp();

let closers: Array<() => Promise<void>> = [];
afterEach(async () => {
  await Promise.all(closers.map((close) => close()));
  closers = [];
});

/** A receiver that reads each request and never answers (until the test ends). */
async function hangingReceiver() {
  let received = 0;
  const server = http.createServer((req) => {
    received++;
    req.resume();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  closers.push(() => {
    server.closeAllConnections();
    return new Promise<void>((resolve) => server.close(() => resolve()));
  });
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, received: () => received };
}

async function receiver(status = 200) {
  const peer = await startHttpPeer(() => ({ status, body: status === 200 ? 'ok' : 'no' }));
  closers.push(peer.close);
  return peer;
}

async function endpointAt(url: string): Promise<string> {
  return ((await t.a.post('/v1/webhook-endpoints', { url }).expect(201)).body.data as { endpointId: string }).endpointId;
}

/** `events` events queued for each endpoint, as a fan-out queues them: each event one row per endpoint. */
async function backlog(endpointIds: string[], events: number): Promise<void> {
  const rows: NewDelivery[] = [];
  for (let i = 0; i < events; i++) {
    for (const endpointId of endpointIds) {
      rows.push({ environmentId: t.environments.a, endpointId, eventId: `evt_backlog_${i}`, eventType: 'message.sent', payload: `{"type":"message.sent","n":${i}}` });
    }
  }
  for (let i = 0; i < rows.length; i += 500) await insertDeliveries(t.db, rows.slice(i, i + 500), systemClock.now());
}

function runner() {
  const worker = new JobRunner({ ...t.deps, clock: systemClock }, { random: () => 0.5 });
  closers.unshift(() => worker.stop());
  return worker;
}

describe("a backlog for an environment's hanging and failing endpoints", () => {
  it("leaves a test event to its healthy endpoint to be sent at once, not after the backlog", async () => {
    const hanging = await Promise.all([hangingReceiver(), hangingReceiver(), hangingReceiver()]);
    const failing = await receiver(500);
    const busy = await receiver();
    const quiet = await receiver();
    const backlogged = [...(await Promise.all(hanging.map((peer) => endpointAt(`${peer.url}/h`)))), await endpointAt(`${failing.url}/f`), await endpointAt(`${busy.url}/b`)];
    const tested = await endpointAt(`${quiet.url}/q`);
    // 10,000 rows: first in, first out, the test event waited about 4 s behind them here.
    await backlog(backlogged, 2_000);
    const worker = runner();
    worker.start();
    // The backlog is under way: the hanging endpoints hold their places, the failing one fails.
    await vi.waitFor(() => expect(hanging.every((peer) => peer.received() > 0) && busy.requests.length > 0).toBe(true), { timeout: 5000, interval: 10 });
    const started = Date.now();
    await sendTest({ ...t.deps, clock: systemClock }, t.environments.a, tested);
    await vi.waitFor(() => expect(quiet.requests).toHaveLength(1), { timeout: 10_000, interval: 10 });
    expect(Date.now() - started).toBeLessThan(1_000);
  }, 30_000);

  it("puts a hanging endpoint's backlog back in a few writes, not a claim and a write each ahead of a healthy endpoint's new deliveries", async () => {
    const hanging = await Promise.all([hangingReceiver(), hangingReceiver(), hangingReceiver(), hangingReceiver()]);
    const healthy = await receiver();
    const slow = await Promise.all(hanging.map((peer) => endpointAt(`${peer.url}/h`)));
    const fine = await endpointAt(`${healthy.url}/ok`);
    await backlog(slow, 1500);
    const worker = runner();
    worker.start();
    // Past the hanging endpoints' first second: they are known slow, and their deliveries go back to the queue.
    await new Promise((resolve) => setTimeout(resolve, 1500));
    await backlog([fine], 20);
    await vi.waitFor(() => expect(healthy.requests).toHaveLength(20), { timeout: 15_000, interval: 10 });
    // Each write that put back some of the hanging endpoints' deliveries left its own updated_at
    // on them: one a delivery, claimed and put back in turn, or one per deferral of a backlog.
    const [{ writes }] = await t
      .db('webhook_deliveries')
      .whereIn('endpoint_id', slow)
      .where('status', 'pending')
      .whereRaw('updated_at > created_at')
      .countDistinct({ writes: 'updated_at' });
    // Claimed and put back one at a time, it took about 400 writes here.
    expect(Number(writes)).toBeLessThan(100);
  }, 30_000);
});

describe("an endpoint's backlog sent back", () => {
  it('goes back to one time a turn, its rows moved once; a retry due later stays where it is', async () => {
    const endpoints = await Promise.all([endpointAt('http://127.0.0.1:9/deferred'), endpointAt('http://127.0.0.1:9/other')]);
    await backlog(endpoints, 10);
    const now = new Date(systemClock.now().getTime() + 1_000);
    const later = (ms: number) => new Date(now.getTime() + ms);
    // One of its deliveries is a retry due after the turn's time: it is not pulled earlier.
    const retry = (await t.db('webhook_deliveries').where({ endpoint_id: endpoints[0] }).orderBy('id').first('id')).id as string;
    await t.db('webhook_deliveries').where({ id: retry }).update({ run_at: later(60_000).toISOString() });
    const waits = new EndpointWaits();
    const first = waits.settle(endpoints[0], later(500), now.getTime());
    expect(first).toEqual(later(500));
    expect(await t.db.transaction((trx) => deferEndpointDeliveries(trx, endpoints[0], first, now))).toBe(9);
    // Another delivery of that claim, turned away with a later time of its own, goes back to the
    // same time, and moves none of those moved already.
    const second = waits.settle(endpoints[0], later(900), now.getTime() + 10);
    expect(second).toEqual(first);
    expect(await t.db.transaction((trx) => deferEndpointDeliveries(trx, endpoints[0], second, now))).toBe(0);
    const runAts = await t.db('webhook_deliveries').where({ endpoint_id: endpoints[0] }).orderBy('run_at').distinct('run_at');
    expect(runAts.map((row: { run_at: string | Date }) => new Date(row.run_at).getTime())).toEqual([later(500).getTime(), later(60_000).getTime()]);
    // The other endpoint's are still due.
    const [{ n }] = await t.db('webhook_deliveries').where({ endpoint_id: endpoints[1] }).where('run_at', '<=', now.toISOString()).count({ n: '*' });
    expect(Number(n)).toBe(10);
    // Once that time has come, a turn-away sets the next.
    expect(waits.settle(endpoints[0], later(4_000), later(600).getTime())).toEqual(later(4_000));
    // A send admitted to the endpoint (its hang over) forgets it.
    waits.forget(endpoints[0]);
    expect(waits.settle(endpoints[0], later(2_500), later(700).getTime())).toEqual(later(2_500));
  });

  it("sends a test event to a rate-limited endpoint with a backlog at once, outside its rate", async () => {
    const peer = await receiver();
    const limited = ((await t.a.post('/v1/webhook-endpoints', { url: `${peer.url}/limited`, rateLimitPerSecond: 2 }).expect(201)).body.data as { endpointId: string }).endpointId;
    await backlog([limited], 300);
    const worker = runner();
    worker.start();
    await vi.waitFor(() => expect(peer.requests.length).toBeGreaterThan(0), { timeout: 5000, interval: 10 });
    const started = Date.now();
    await sendTest({ ...t.deps, clock: systemClock }, t.environments.a, limited);
    await vi.waitFor(() => expect(peer.requests.some((request) => request.body.includes('webhook.test'))).toBe(true), { timeout: 10_000, interval: 10 });
    expect(Date.now() - started).toBeLessThan(1_000);
    // The backlog kept to its rate: a burst of 2, then about 2 a second.
    const seconds = (Date.now() - started) / 1000 + 1;
    expect(peer.requests.filter((request) => !request.body.includes('webhook.test')).length).toBeLessThanOrEqual(2 + Math.ceil(2 * seconds) + 1);
  }, 20_000);
});
