import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { useTestApp } from '../helpers/app.js';
import { startWebhookReceiver } from '../helpers/webhook.js';
import { JobRunner } from '../../src/engine/runner.js';
import { DISABLE_AFTER_MS, RETRY_SCHEDULE_MS } from '../../src/engine/webhook-sender.js';
import { takeEndpointTurn } from '../../src/engine/pacing.js';
import { destinationOf } from '../../src/engine/destinations.js';
import { REFUSED_DESTINATION } from '../../src/outbound-guard.js';
import { forgetSubscriptions, subscriptionsFor } from '../../src/db/webhook-subscriptions.js';
import { claimDueDeliveries, deferEndpointDeliveries, deliveriesDue, finishSucceeded, insertDeliveries } from '../../src/db/repos/webhook-deliveries.js';
import { createIntegration, createSubscriber, createWorkflow, step } from '../helpers/factories.js';
import { recordQueries } from '../helpers/queries.js';
import { runWithTimersStopped } from '../helpers/runner.js';
import { testDatabaseUrl } from '../helpers/db.js';
import { createDb } from '../../src/db/knex.js';

// How the job runner delivers webhooks, on a clock the tests move by hand: Svix's retry schedule,
// Retry-After, 410 Gone, five days of failures, a destination the guard refuses, and the
// endpoint's rate. Jitter is fixed at its middle (random 0.5), so each wait is the schedule's own.
const t = useTestApp();
let worker: JobRunner;
beforeEach(() => {
  worker = new JobRunner(t.deps, { random: () => 0.5 });
});

let peers: Array<{ close(): Promise<void> }> = [];
afterEach(async () => {
  await Promise.all(peers.map((peer) => peer.close()));
  peers = [];
});

async function receiver(respond?: Parameters<typeof startWebhookReceiver>[0]) {
  const peer = await startWebhookReceiver(respond);
  peers.push(peer);
  return peer;
}

async function endpointAt(url: string, body: Record<string, unknown> = {}) {
  return (await t.a.post('/v1/webhook-endpoints', { url, ...body }).expect(201)).body.data as { endpointId: string; secret: string };
}

async function deliveryRow(endpointId: string) {
  const [row] = await t.db('webhook_deliveries').where({ endpoint_id: endpointId }).select('id', 'status', 'attempts', 'run_at');
  return row as { id: string; status: string; attempts: number; run_at: string };
}

describe('the retry schedule', () => {
  it("tries at once, then after 5 s, 5 min, 30 min, 2 h, 5 h, 10 h and 10 h, with one webhook-id, then fails", async () => {
    const failing = await receiver(() => ({ status: 500, body: 'x'.repeat(3000) }));
    const endpoint = await endpointAt(`${failing.url}/h`);
    await t.a.post(`/v1/webhook-endpoints/${endpoint.endpointId}/test`).expect(200);
    const waits: number[] = [];
    for (let attempt = 1; attempt <= 8; attempt++) {
      await worker.runUntilIdle();
      expect(failing.requests).toHaveLength(attempt);
      const row = await deliveryRow(endpoint.endpointId);
      if (row.status === 'failed') break;
      const wait = Date.parse(row.run_at) - t.clock.now().getTime();
      waits.push(wait);
      t.clock.advance(wait - 1);
      await worker.runUntilIdle();
      expect(failing.requests).toHaveLength(attempt); // not due a millisecond early
      t.clock.advance(1);
    }
    expect(waits).toEqual(RETRY_SCHEDULE_MS);
    expect((await deliveryRow(endpoint.endpointId)).status).toBe('failed');
    expect(new Set(failing.requests.map((r) => r.headers['webhook-id'])).size).toBe(1);
    const [delivery] = (await t.a.get(`/v1/webhook-endpoints/${endpoint.endpointId}/deliveries`).expect(200)).body.data;
    expect(delivery.attempts).toHaveLength(8);
    expect(delivery.attempts[0].response).toHaveLength(1024);
  });

  it('spreads each wait by ±20 %', async () => {
    const failing = await receiver(() => ({ status: 500 }));
    const endpoint = await endpointAt(`${failing.url}/h`);
    for (const [random, factor] of [
      [0, 0.8],
      [1, 1.2],
    ] as const) {
      await t.db('webhook_deliveries').where({ endpoint_id: endpoint.endpointId }).delete();
      await t.a.post(`/v1/webhook-endpoints/${endpoint.endpointId}/test`).expect(200);
      await new JobRunner(t.deps, { random: () => random }).runUntilIdle();
      expect(Date.parse((await deliveryRow(endpoint.endpointId)).run_at) - t.clock.now().getTime()).toBe(RETRY_SCHEDULE_MS[0] * factor);
    }
  });

  it("waits as long as a 429's or 503's Retry-After asks when it is longer than the schedule", async () => {
    const busy = await receiver(() => ({ status: 429, headers: { 'Retry-After': '120' } }));
    const endpoint = await endpointAt(`${busy.url}/h`);
    await t.a.post(`/v1/webhook-endpoints/${endpoint.endpointId}/test`).expect(200);
    await worker.runUntilIdle();
    expect(Date.parse((await deliveryRow(endpoint.endpointId)).run_at) - t.clock.now().getTime()).toBe(120_000);
  });

  it('does not follow a redirect: it is a failed try', async () => {
    const elsewhere = await receiver();
    const redirecting = await receiver(() => ({ status: 307, headers: { Location: `${elsewhere.url}/x` } }));
    const endpoint = await endpointAt(`${redirecting.url}/h`);
    await t.a.post(`/v1/webhook-endpoints/${endpoint.endpointId}/test`).expect(200);
    await worker.runUntilIdle();
    expect(elsewhere.requests).toHaveLength(0);
    expect(await deliveryRow(endpoint.endpointId)).toMatchObject({ status: 'pending', attempts: 1 });
  });
});

describe('disabling', () => {
  it('disables an endpoint that answers 410 at once, and tells the other endpoints with webhook_endpoint.disabled', async () => {
    const gone = await receiver(() => ({ status: 410 }));
    const other = await receiver();
    const goneEndpoint = await endpointAt(`${gone.url}/h`);
    const otherEndpoint = await endpointAt(`${other.url}/h`, { eventTypes: ['webhook_endpoint.disabled'] });
    await t.a.post(`/v1/webhook-endpoints/${goneEndpoint.endpointId}/test`).expect(200);
    await worker.runUntilIdle();
    const after = (await t.a.get(`/v1/webhook-endpoints/${goneEndpoint.endpointId}`).expect(200)).body.data;
    expect(after).toMatchObject({ disabled: true, disabledReason: 'The endpoint answered 410 Gone' });
    expect((await deliveryRow(goneEndpoint.endpointId)).status).toBe('failed');
    expect(other.types()).toEqual(['webhook_endpoint.disabled']);
    expect(otherEndpoint.secret).toMatch(/^whsec_/);
    expect(other.requests[0].json()).toMatchObject({ data: { endpointId: goneEndpoint.endpointId, reason: 'The endpoint answered 410 Gone' } });
    expect(gone.requests).toHaveLength(1);
  });

  it('disables an endpoint whose deliveries all failed for five days, and enabling it starts the count again', async () => {
    const failing = await receiver(() => ({ status: 500 }));
    const endpoint = await endpointAt(`${failing.url}/h`);
    await t.a.post(`/v1/webhook-endpoints/${endpoint.endpointId}/test`).expect(200);
    await worker.runUntilIdle();
    const since = (await t.a.get(`/v1/webhook-endpoints/${endpoint.endpointId}`).expect(200)).body.data.failingSince;
    expect(since).toBe(t.clock.now().toISOString());
    t.clock.advance(DISABLE_AFTER_MS - 1);
    await t.a.post(`/v1/webhook-endpoints/${endpoint.endpointId}/test`).expect(200);
    await worker.runUntilIdle();
    expect((await t.a.get(`/v1/webhook-endpoints/${endpoint.endpointId}`).expect(200)).body.data.disabled).toBe(false);
    t.clock.advance(1);
    await t.a.post(`/v1/webhook-endpoints/${endpoint.endpointId}/test`).expect(200);
    await worker.runUntilIdle();
    const disabled = (await t.a.get(`/v1/webhook-endpoints/${endpoint.endpointId}`).expect(200)).body.data;
    expect(disabled).toMatchObject({ disabled: true, disabledReason: expect.stringContaining('5 days') });
    const enabled = (await t.a.patch(`/v1/webhook-endpoints/${endpoint.endpointId}`, { disabled: false }).expect(200)).body.data;
    expect(enabled.disabledReason).toBeUndefined();
    expect(enabled.failingSince).toBeUndefined();
  });

  it('a success clears the failing days', async () => {
    let fail = true;
    const flaky = await receiver(() => ({ status: fail ? 500 : 200 }));
    const endpoint = await endpointAt(`${flaky.url}/h`);
    await t.a.post(`/v1/webhook-endpoints/${endpoint.endpointId}/test`).expect(200);
    await worker.runUntilIdle();
    fail = false;
    t.clock.advance(RETRY_SCHEDULE_MS[0]);
    await worker.runUntilIdle();
    expect((await t.a.get(`/v1/webhook-endpoints/${endpoint.endpointId}`).expect(200)).body.data.failingSince).toBeUndefined();
  });
});

describe('the outbound guard', () => {
  it('refuses to send to an address that is not allowed, without retrying', async () => {
    const peer = await receiver();
    const endpoint = await endpointAt(`${peer.url}/h`);
    const allowed = t.deps.config.outbound;
    t.deps.config.outbound = { ...allowed, allowedNetworks: [] };
    try {
      await t.a.post(`/v1/webhook-endpoints/${endpoint.endpointId}/test`).expect(200);
      await worker.runUntilIdle();
    } finally {
      t.deps.config.outbound = allowed;
    }
    expect(peer.requests).toHaveLength(0);
    const [delivery] = (await t.a.get(`/v1/webhook-endpoints/${endpoint.endpointId}/deliveries`).expect(200)).body.data;
    expect(delivery).toMatchObject({ status: 'failed', attempts: [expect.objectContaining({ error: REFUSED_DESTINATION })] });
  });
});

describe('rateLimitPerSecond', () => {
  it('sends at most that many a second to the endpoint; the rest wait for their turns without spending a try', async () => {
    const peer = await receiver();
    const endpoint = await endpointAt(`${peer.url}/h`, { rateLimitPerSecond: 2 });
    const rows = Array.from({ length: 5 }, (_, i) => ({ environmentId: t.environments.a, endpointId: endpoint.endpointId, eventId: `evt_paced_${i}`, eventType: 'message.sent', payload: `{"type":"message.sent","n":${i}}` }));
    await insertDeliveries(t.db, rows, t.clock.now());
    await worker.runUntilIdle();
    expect(peer.requests).toHaveLength(2);
    const waiting = await t.db('webhook_deliveries').where({ endpoint_id: endpoint.endpointId, status: 'pending' }).select('attempts');
    expect(waiting.map((row: { attempts: number }) => Number(row.attempts))).toEqual([0, 0, 0]);
    // Back at their turns, half a second apart, each going without taking another: by 1.5 s all.
    t.clock.advance(1499);
    await worker.runUntilIdle();
    expect(peer.requests).toHaveLength(4);
    t.clock.advance(1);
    await worker.runUntilIdle();
    expect(peer.requests).toHaveLength(5);
    expect((await t.db('webhook_deliveries').where({ endpoint_id: endpoint.endpointId }).select('status', 'attempts')).map((row: { status: string; attempts: number }) => [row.status, Number(row.attempts)])).toEqual(
      Array(5).fill(['succeeded', 1]),
    );
    // A test event, someone waiting for it, goes outside the rate.
    await t.a.post(`/v1/webhook-endpoints/${endpoint.endpointId}/test`).expect(200);
    await worker.runUntilIdle();
    expect(peer.requests).toHaveLength(6);
    expect(peer.requests[5].body).toContain('webhook.test');
  });
});

// SQLite: a commit is a sync to disk, on the event loop; PostgreSQL commits each put-back alone, off it.
describe.skipIf(testDatabaseUrl())('rateLimitPerSecond over a backlog', () => {
  it("puts back a claim's deliveries its rate turns away in shared commits, not a commit each", async () => {
    const peer = await receiver();
    const endpoint = await endpointAt(`${peer.url}/h`, { rateLimitPerSecond: 1 });
    const backlog = 20;
    const rows = Array.from({ length: backlog + 1 }, (_, i) => ({ environmentId: t.environments.a, endpointId: endpoint.endpointId, eventId: `evt_backlog_${i}`, eventType: 'message.sent', payload: `{"n":${i}}` }));
    await insertDeliveries(t.db, rows, t.clock.now());
    // Commits: each COMMIT, and each write knex runs outside a transaction (SQLite commits it alone).
    let commits = 0;
    const count = (query: { sql: string; __knexTxId?: string }) => {
      const sql = query.sql.trim();
      if (/^commit/i.test(sql) || (query.__knexTxId === undefined && /^(update|insert|delete)/i.test(sql))) commits++;
    };
    t.db.on('query', count);
    await worker.runUntilIdle();
    t.db.off('query', count);
    expect(peer.requests).toHaveLength(1);
    const waiting = await t.db('webhook_deliveries').where({ endpoint_id: endpoint.endpointId, status: 'pending' }).select('attempts', 'run_at');
    expect(waiting.map((row: { attempts: number }) => Number(row.attempts))).toEqual(Array(backlog).fill(0));
    expect(new Set(waiting.map((row: { run_at: string }) => row.run_at)).size).toBe(backlog);
    expect(commits).toBeLessThan(backlog);
  });
});

describe('an endpoint without rateLimitPerSecond', () => {
  it('takes no turn: its deliveries cost no write to the shared windows', async () => {
    const peer = await receiver();
    const endpoint = await endpointAt(`${peer.url}/h`);
    const rows = Array.from({ length: 3 }, (_, i) => ({ environmentId: t.environments.a, endpointId: endpoint.endpointId, eventId: `evt_unpaced_${i}`, eventType: 'message.sent', payload: `{"n":${i}}` }));
    const windows = async () => Number((await t.db('send_turns').count({ n: '*' }))[0].n);
    const before = await windows();
    await insertDeliveries(t.db, rows, t.clock.now());
    await worker.runUntilIdle();
    expect(peer.requests).toHaveLength(3);
    expect(await windows()).toBe(before);
  });
});

describe('rateLimitPerSecond changed', () => {
  it('takes effect on the deliveries waiting for turns given at the old rate', async () => {
    const peer = await receiver();
    const endpoint = await endpointAt(`${peer.url}/h`, { rateLimitPerSecond: 2 });
    const rows = Array.from({ length: 4 }, (_, i) => ({ environmentId: t.environments.a, endpointId: endpoint.endpointId, eventId: `evt_rechanged_${i}`, eventType: 'message.sent', payload: `{"n":${i}}` }));
    await insertDeliveries(t.db, rows, t.clock.now());
    await worker.runUntilIdle();
    expect(peer.requests).toHaveLength(2);
    // Turns at 0.5 and 1 s were given at 2 a second; at 1 a second, the second of them waits a second more.
    await t.a.patch(`/v1/webhook-endpoints/${endpoint.endpointId}`, { rateLimitPerSecond: 1 }).expect(200);
    t.clock.advance(1000);
    await worker.runUntilIdle();
    expect(peer.requests).toHaveLength(3);
    t.clock.advance(999);
    await worker.runUntilIdle();
    expect(peer.requests).toHaveLength(3);
    t.clock.advance(1);
    await worker.runUntilIdle();
    expect(peer.requests).toHaveLength(4);
  });
});

describe('rateLimitPerSecond and a backlog sent back', () => {
  it('paces again the deliveries whose turns a deferral passed over, rather than sending them together', async () => {
    const peer = await receiver();
    const endpoint = await endpointAt(`${peer.url}/h`, { rateLimitPerSecond: 2 });
    const rows = Array.from({ length: 6 }, (_, i) => ({ environmentId: t.environments.a, endpointId: endpoint.endpointId, eventId: `evt_deferred_${i}`, eventType: 'message.sent', payload: `{"n":${i}}` }));
    await insertDeliveries(t.db, rows, t.clock.now());
    await worker.runUntilIdle();
    expect(peer.requests).toHaveLength(2);
    // Its breaker opened, say: the backlog, turns taken, waits 10 s together.
    const until = new Date(t.clock.now().getTime() + 10_000);
    await t.db.transaction((trx) => deferEndpointDeliveries(trx, endpoint.endpointId, until, t.clock.now()));
    t.clock.advance(10_000);
    await worker.runUntilIdle();
    // A burst of two, then one every half second: not all four at once.
    expect(peer.requests).toHaveLength(4);
    t.clock.advance(1_000);
    await worker.runUntilIdle();
    expect(peer.requests).toHaveLength(6);
  });
});

describe('rateLimitPerSecond across workers', () => {
  it('holds for the endpoint as a whole when two workers, each with its own connections, share its deliveries', async () => {
    const rate = 2;
    const sentAt: number[] = [];
    const peer = await receiver(() => {
      sentAt.push(t.clock.now().getTime());
      return { status: 200 };
    });
    const endpoint = await endpointAt(`${peer.url}/h`, { rateLimitPerSecond: rate });
    // The second worker opens the database itself, as another process does.
    const otherDb = createDb(t.testDb.url, t.testDb.schema ? { schema: t.testDb.schema } : {});
    const workers = [worker, new JobRunner({ ...t.deps, db: otherDb }, { random: () => 0.5 })];
    const t0 = t.clock.now().getTime();
    try {
      // Ten a second to send for 5 s, each tenth of a second taken first by one worker, then by the other.
      for (let step = 0; step < 50; step++) {
        const delivery = { environmentId: t.environments.a, endpointId: endpoint.endpointId, eventId: `evt_shared_${step}`, eventType: 'message.sent', payload: `{"n":${step}}` };
        await insertDeliveries(t.db, [delivery], t.clock.now());
        for (const each of step % 2 ? [...workers].reverse() : workers) await each.runUntilIdle();
        t.clock.advance(100);
      }
    } finally {
      await otherDb.destroy();
    }
    const bySecond = Array.from({ length: 5 }, (_, second) => sentAt.filter((at) => Math.floor((at - t0) / 1000) === second).length);
    // A burst of `rate`, then `rate` a second: 2 + 2 × 4.9 s in all (each worker's own pace sent 20).
    expect(sentAt.length, `sent by second: ${bySecond.join(', ')}`).toBeLessThanOrEqual(rate + Math.floor(rate * 4.9));
    // No second over its rate, but for the first's burst and one turn on a second's edge.
    expect(Math.max(...bySecond.slice(1)), `sent by second: ${bySecond.join(', ')}`).toBeLessThanOrEqual(rate + 1);
    // And the pace kept the endpoint busy: it did not hold back more than a window's edge.
    expect(sentAt.length).toBeGreaterThanOrEqual(rate * 5);
  });
});

describe('takeEndpointTurn', () => {
  /** The turn's time, from now (undefined: it goes now). */
  const turnIn = async (endpointId: string, perSecond: number, aheadMs = 300_000) => {
    const turn = await takeEndpointTurn(t.deps, endpointId, perSecond, aheadMs);
    return turn && { in: turn.at.getTime() - t.clock.now().getTime(), taken: turn.taken };
  };

  it('lets a burst take the bucket, then gives each try over the rate its own turn, 1/rate s after the one before', async () => {
    const turns = [];
    for (let i = 0; i < 6; i++) turns.push((await turnIn('ep_burst', 2))?.in);
    // Two go (the burst); the next come back when a try is there, one every half second.
    expect(turns).toEqual([undefined, undefined, 500, 1_000, 1_500, 2_000]);
    // A quiet endpoint's bucket fills up to its rate, no further.
    t.clock.advance(60_000);
    expect([(await turnIn('ep_burst', 2))?.in, (await turnIn('ep_burst', 2))?.in, (await turnIn('ep_burst', 2))?.in]).toEqual([undefined, undefined, 500]);
  });

  it('takes no turn further ahead than asked: a backlog past it asks again then', async () => {
    const turns = [];
    for (let i = 0; i < 7; i++) turns.push(await turnIn('ep_far', 2, 2_000));
    expect(turns.slice(2)).toEqual([
      { in: 500, taken: true },
      { in: 1_000, taken: true },
      { in: 1_500, taken: true },
      { in: 2_000, taken: true },
      { in: 2_000, taken: false },
    ]);
    // Not taken, it left the next turn where it was.
    expect(await turnIn('ep_far', 2, 3_000)).toEqual({ in: 2_500, taken: true });
  });

  it('starts a new rate afresh: turns given at the old one are not kept to', async () => {
    for (let i = 0; i < 10; i++) await turnIn('ep_changed', 2);
    expect(await turnIn('ep_changed', 10)).toBeUndefined();
  });
});

describe('an endpoint deleted by another process', () => {
  it('still lets the change commit, and its delivery is dropped when claimed', async () => {
    const peer = await receiver();
    const endpoint = await endpointAt(`${peer.url}/h`);
    await createSubscriber(t.a, { subscriberId: 'ada' });
    const workflow = await createWorkflow(t.a, { steps: [step.inApp()] });
    // This process remembers the endpoint; another deletes it behind its back.
    expect(await subscriptionsFor(t.db, t.environments.a)).toHaveLength(1);
    await t.db('webhook_endpoints').where({ id: endpoint.endpointId }).delete();
    const { transactionId } = (await t.a.post('/v1/events/trigger', { name: workflow.workflowId, to: 'ada' }).expect(201)).body.data;
    await worker.runUntilIdle();
    expect((await t.a.get(`/v1/notifications?transactionId=${transactionId}`).expect(200)).body.data[0].status).toBe('completed');
    expect(await t.db('webhook_deliveries').where({ endpoint_id: endpoint.endpointId })).toHaveLength(0);
    expect(peer.requests).toHaveLength(0);
  });
});

describe('what a process remembers of an environment\'s endpoints', () => {
  it('is not a read that raced a change of endpoints', async () => {
    const peer = await receiver();
    const endpoint = await endpointAt(`${peer.url}/h`);
    // The change lands between the read and its answer being taken: the answer is used, not kept.
    const reading = subscriptionsFor(t.db, t.environments.a);
    forgetSubscriptions(t.environments.a);
    expect(await reading).toHaveLength(1);
    const row = await t.db('webhook_endpoints').where({ id: endpoint.endpointId }).first();
    await t.db('webhook_endpoints').where({ id: endpoint.endpointId }).delete();
    expect(await subscriptionsFor(t.db, t.environments.a)).toHaveLength(0);
    // Without a change meanwhile, the answer is kept until it expires.
    await t.db('webhook_endpoints').insert(row);
    forgetSubscriptions(t.environments.a);
    expect(await subscriptionsFor(t.db, t.environments.a)).toHaveLength(1);
    await t.db('webhook_endpoints').where({ id: endpoint.endpointId }).delete();
    expect(await subscriptionsFor(t.db, t.environments.a)).toHaveLength(1);
  });
});

describe('successful tries, recorded together', () => {
  it('ends every delivery that succeeded at once, each with its one try, and clears the endpoint failing', async () => {
    const peer = await receiver();
    const endpoint = await endpointAt(`${peer.url}/h`);
    for (let i = 0; i < 5; i++) await t.a.post(`/v1/webhook-endpoints/${endpoint.endpointId}/test`).expect(200);
    await t.db('webhook_endpoints').where({ id: endpoint.endpointId }).update({ failing_since: t.clock.now().toISOString() });
    await worker.runUntilIdle();
    expect(peer.requests).toHaveLength(5);
    expect((await t.db('webhook_endpoints').where({ id: endpoint.endpointId }).first()).failing_since).toBeNull();
    const rows = await t.db('webhook_deliveries').where({ endpoint_id: endpoint.endpointId }).select('id', 'status', 'lease_owner');
    expect(rows.map((row) => [row.status, row.lease_owner])).toEqual(Array(5).fill(['succeeded', null]));
    const attempts = await t.db('webhook_attempts').whereIn('delivery_id', rows.map((row) => row.id)).select('delivery_id', 'attempt', 'status_code');
    expect(attempts.map((a) => [a.attempt, a.status_code])).toEqual(Array(5).fill([1, 200]));
    expect(new Set(attempts.map((a) => a.delivery_id)).size).toBe(5);
  });

  it('leaves alone a delivery whose lease another worker took over: it keeps no try of ours', async () => {
    await worker.runUntilIdle(); // nothing else due: the claim below takes only this test's deliveries
    const endpoint = await endpointAt('http://127.0.0.1:9/h');
    for (let i = 0; i < 2; i++) await t.a.post(`/v1/webhook-endpoints/${endpoint.endpointId}/test`).expect(200);
    const claimed = await claimDueDeliveries(t.db, { owner: 'a', now: t.clock.now(), leaseMs: 60_000, limit: 10 });
    expect(claimed).toHaveLength(2);
    const [kept, lost] = claimed;
    await t.db('webhook_deliveries').where({ id: lost.id }).update({ lease_owner: 'b' });
    const tries = claimed.map((delivery) => ({ deliveryId: delivery.id, attempt: 1, trigger: 'scheduled' as const, statusCode: 200, durationMs: 3 }));
    // The same delivery twice in one batch (tried again after its lease lapsed): it keeps one try.
    const ended = await t.db.transaction((trx) => finishSucceeded(trx, [...tries, { ...tries[0], attempt: 2 }], 'a', t.clock.now()));
    expect(ended).toEqual([kept.id]);
    const statusOf = async (id: string) => (await t.db('webhook_deliveries').where({ id }).first()).status;
    expect(await statusOf(kept.id)).toBe('succeeded');
    expect(await statusOf(lost.id)).toBe('running');
    const attempts = await t.db('webhook_attempts').whereIn('delivery_id', [kept.id, lost.id]).select('delivery_id', 'attempt');
    expect(attempts.map((row) => [row.delivery_id, row.attempt])).toEqual([[kept.id, 2]]);
  });
});

describe('looking before claiming', () => {
  it('says a delivery is due exactly when a claim would find one: pending and due, or its lease ran out', async () => {
    await worker.runUntilIdle();
    const now = t.clock.now();
    expect(await deliveriesDue(t.db, now)).toBe(false);
    const endpoint = await endpointAt('http://127.0.0.1:9/h');
    await t.a.post(`/v1/webhook-endpoints/${endpoint.endpointId}/test`).expect(200);
    expect(await deliveriesDue(t.db, now)).toBe(true);
    expect(await claimDueDeliveries(t.db, { owner: 'a', now, leaseMs: 60_000, limit: 10 })).toHaveLength(1);
    expect(await deliveriesDue(t.db, now)).toBe(false);
    expect(await deliveriesDue(t.db, new Date(now.getTime() + 61_000))).toBe(true);
  });
});

describe('an environment at its share of the send slots', () => {
  it('claims its next delivery as soon as one of its sends ends, without waiting out the empty-claim gap', async () => {
    const peer = await receiver();
    const endpoint = await endpointAt(`${peer.url}/h`);
    for (let i = 0; i < 3; i++) await t.a.post(`/v1/webhook-endpoints/${endpoint.endpointId}/test`).expect(200);
    // No coalescing wait: with timers stopped, a runner that sleeps between claims never wakes, and
    // only the end of a send can move it on.
    const runner = new JobRunner(t.deps, { slotsPerOrganization: 1, coalesceMs: 0, random: () => 0.5 });
    await runWithTimersStopped(runner, () => peer.requests.length >= 3);
    expect(peer.requests).toHaveLength(3);
  });
});

describe("an endpoint's destination", () => {
  it("is the endpoint's own: another tenant's failing endpoint on the same host opens no breaker of its", async () => {
    const peer = await receiver((request) => (request.path.startsWith('/down') ? { status: 500, body: 'no' } : { status: 200, body: 'ok' }));
    const down = await endpointAt(`${peer.url}/down`);
    const up = (await t.b.post('/v1/webhook-endpoints', { url: `${peer.url}/up` }).expect(201)).body.data as { endpointId: string };
    const runner = new JobRunner(t.deps, { breakerFailures: 2, random: () => 0.5 });
    const at = (path: string) => peer.requests.filter((request) => request.path.startsWith(path));
    runner.start();
    try {
      for (let i = 0; i < 2; i++) await t.a.post(`/v1/webhook-endpoints/${down.endpointId}/test`).expect(200);
      await vi.waitFor(() => expect(at('/down')).toHaveLength(2), { timeout: 5000, interval: 20 });
      await vi.waitFor(() => expect(runner.breakerOpen(destinationOf('webhook', down.endpointId, peer.url))).toBe(true), { timeout: 5000, interval: 20 });
      // The clock stands still: an open breaker would keep tenant b's test waiting.
      await t.b.post(`/v1/webhook-endpoints/${up.endpointId}/test`).expect(200);
      await vi.waitFor(() => expect(at('/up')).toHaveLength(1), { timeout: 5000, interval: 20 });
    } finally {
      await runner.stop();
    }
  });
});

describe('a delivery queued by the runner itself', () => {
  it("is claimed as soon as it is committed (an in-app step's message.delivered), not at the send loop's next look", async () => {
    const peer = await receiver();
    await endpointAt(`${peer.url}/h`, { eventTypes: ['message.delivered'] });
    await createSubscriber(t.a, { subscriberId: 'ada' });
    await createWorkflow(t.a, { name: 'Feed', steps: [step.inApp()] });
    await t.a.post('/v1/events/trigger', { name: 'feed', to: 'ada' }).expect(201);
    // With timers stopped, a send loop that found nothing at its first claim (the in-app loop had
    // not delivered yet) sleeps for good, unless the delivery's commit wakes it.
    await runWithTimersStopped(new JobRunner(t.deps, { coalesceMs: 0, random: () => 0.5 }), () => peer.requests.length >= 1);
    expect(peer.requests).toHaveLength(1);
  });
});

describe('claims the send loop leaves out', () => {
  // Each claim is a write (on SQLite, the file's write lock); a look is a read.
  const jobClaim = /^WITH due AS \(\s*SELECT id, run_at FROM jobs\b/;
  const deliveryClaim = /^WITH due AS \(\s*SELECT id, run_at FROM webhook_deliveries\b/;

  async function drain(runner: JobRunner, peer: { requests: unknown[] }, n: number) {
    runner.start();
    try {
      const deadline = Date.now() + 20_000;
      while (peer.requests.length < n && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 5));
      expect(peer.requests).toHaveLength(n);
    } finally {
      await runner.stop();
    }
  }

  it('claims no send jobs while only webhooks are due: it looks for them instead', async () => {
    await worker.runUntilIdle();
    const peer = await receiver();
    const endpoint = await endpointAt(`${peer.url}/h`);
    for (let i = 0; i < 30; i++) await t.a.post(`/v1/webhook-endpoints/${endpoint.endpointId}/test`).expect(200);
    const recording = recordQueries(t.db, /^WITH due AS/);
    // A slot for one delivery at a time, so that the loop claims again and again.
    await drain(new JobRunner(t.deps, { slots: 1, coalesceMs: 0, random: () => 0.5 }), peer, 30);
    const claims = recording.stop();
    expect(claims.filter((q) => deliveryClaim.test(q.sql.trim())).length).toBeGreaterThan(3);
    expect(claims.filter((q) => jobClaim.test(q.sql.trim()))).toEqual([]);
  });

  it('claims for the other environments, while one is at its share, at most once per empty-claim gap', async () => {
    await worker.runUntilIdle();
    const peer = await receiver();
    const endpoint = await endpointAt(`${peer.url}/h`);
    for (let i = 0; i < 30; i++) await t.a.post(`/v1/webhook-endpoints/${endpoint.endpointId}/test`).expect(200);
    const leftOutAt: number[] = [];
    const record = (query: { sql: string }) => {
      if (deliveryClaim.test(query.sql.trim()) && /NOT IN/.test(query.sql)) leftOutAt.push(Date.now());
    };
    t.db.on('query', record);
    try {
      // Its one environment is at its share after every claim: each claim after that leaves it
      // out and finds nothing, and so waits out the gap after the last.
      await drain(new JobRunner(t.deps, { slotsPerOrganization: 1, coalesceMs: 0, random: () => 0.5 }), peer, 30);
    } finally {
      t.db.off('query', record);
    }
    expect(leftOutAt.length).toBeGreaterThan(0);
    const gaps = leftOutAt.slice(1).map((at, i) => at - leftOutAt[i]);
    expect(gaps.filter((gap) => gap < 50)).toEqual([]);
  });
});

describe('a send claim that fails halfway', () => {
  /** Every claim of a webhook delivery fails (it updates the row), until the returned function is called. */
  async function failDeliveryClaims(): Promise<() => Promise<void>> {
    if (testDatabaseUrl() === undefined) {
      await t.db.raw("CREATE TRIGGER claims_fail BEFORE UPDATE ON webhook_deliveries BEGIN SELECT RAISE(ABORT, 'claims fail'); END");
      return async () => void (await t.db.raw('DROP TRIGGER claims_fail'));
    }
    await t.db.raw("CREATE OR REPLACE FUNCTION claims_fail() RETURNS trigger AS $$ BEGIN RAISE EXCEPTION 'claims fail'; END $$ LANGUAGE plpgsql");
    await t.db.raw('CREATE TRIGGER claims_fail BEFORE UPDATE ON webhook_deliveries FOR EACH ROW EXECUTE FUNCTION claims_fail()');
    return async () => {
      await t.db.raw('DROP TRIGGER claims_fail ON webhook_deliveries');
      await t.db.raw('DROP FUNCTION claims_fail()');
    };
  }

  it('starts the send jobs it had claimed when the claim of webhook deliveries after them fails, rather than leaving them to their lease', async () => {
    await worker.runUntilIdle();
    const chat = await receiver();
    await createIntegration(t.a, { providerId: 'slack' });
    await createWorkflow(t.a, { workflowId: 'half-claim', steps: [step.chat({ content: 'Hello' })] });
    await createSubscriber(t.a, { subscriberId: 'half-claim' });
    await t.a.put('/v1/subscribers/half-claim/credentials', { providerId: 'slack', credentials: { webhookUrl: `${chat.url}/chat` } }).expect(200);
    // A webhook delivery due, whose claims fail; then a send job due.
    const endpoint = await endpointAt(`${chat.url}/h`);
    await t.a.post(`/v1/webhook-endpoints/${endpoint.endpointId}/test`).expect(200);
    const restore = await failDeliveryClaims();
    const runner = new JobRunner(t.deps, { maxIdleMs: 20, random: () => 0.5 });
    try {
      await t.a.post('/v1/events/trigger', { name: 'half-claim', to: 'half-claim', payload: {} }).expect(201);
      runner.start();
      // The claims alternate which kind they take first: the second takes the job, then fails on
      // the delivery. Before, the job stayed claimed and unsent until its lease ended (never, on
      // this clock).
      await expect.poll(() => chat.requests.filter((request) => request.path === '/chat').length, { timeout: 10_000 }).toBe(1);
    } finally {
      await runner.stop();
      await restore();
    }
  });
});
