// The continuous runner against real webhooks on 127.0.0.1 that hang, answer late, fail or pace
// us: in-app work never waits for a send, slow destinations hold only their share of the slots, a
// failing destination is deferred by its breaker, a 429 spends no attempt, and stopping drains.
import { afterEach, describe, expect, it, vi } from 'vitest';
import { useTestApp, type Client } from '../helpers/app.js';
import { createIntegration, createSubscriber, createWorkflow, integrationBodies, step } from '../helpers/factories.js';
import { startHttpPeer } from '../helpers/peers.js';
import { startHangingWebhook } from '../helpers/webhook.js';
import { runWithTimersStopped } from '../helpers/runner.js';
import { JobRunner, type RunnerOptions } from '../../src/engine/runner.js';
import { systemClock } from '../../src/clock.js';

const t = useTestApp();
// A test's unfinished sends (to peers it closed) would be claimed by the next test's runner: end them.
afterEach(async () => {
  await t.db('jobs').whereIn('status', ['pending', 'queued', 'delayed', 'running']).update({ status: 'canceled', lease_owner: null, lease_expires_at: null });
});

/** A runner on real time (triggers still stamp jobs with the test's clock, which is in the past: they are due). */
function liveRunner(options: RunnerOptions = {}) {
  return new JobRunner({ ...t.deps, clock: systemClock }, { random: () => 0.5, ...options });
}

/** Subscribers whose Slack webhook is `url`/<their id>, in an environment with a Slack integration and a chat workflow. */
async function chatAudience(client: Client, workflowId: string, url: string, ids: string[]) {
  const integrations = (await client.get('/v1/integrations').expect(200)).body.data as unknown[];
  // These tests are about slots and breakers, not Slack's pace: no send limits.
  if (integrations.length === 0) await createIntegration(client, { ...integrationBodies.slack, sendLimits: { perDestination: [] } });
  if ((await client.get(`/v1/workflows/${workflowId}`)).status === 404) await createWorkflow(client, { workflowId, steps: [step.chat({ content: workflowId })] });
  for (const subscriberId of ids) {
    await createSubscriber(client, { subscriberId });
    await client.put(`/v1/subscribers/${subscriberId}/credentials`, { providerId: 'slack', credentials: { webhookUrl: `${url}/${subscriberId}` } }).expect(200);
  }
}

const range = (prefix: string, n: number) => Array.from({ length: n }, (_, i) => `${prefix}-${i}`);

async function chatJobs(environmentId: string) {
  return (await t.db('jobs').where({ type: 'chat', environment_id: environmentId }).select('id', 'status', 'attempts')) as Array<{ id: string; status: string; attempts: number }>;
}

describe('the continuous runner', () => {
  it("delivers another tenant's in-app notification within 2 s while 20 chat webhooks hang and one answers after 30 s", async () => {
    const hanging = await startHangingWebhook();
    const late = await startHangingWebhook({ delayMs: 30_000 });
    const runner = liveRunner();
    try {
      const ids = range('hang', 20);
      await chatAudience(t.a, 'stuck-chat', hanging.url, ids);
      await chatAudience(t.a, 'stuck-chat', late.url, ['late-one']);
      await createSubscriber(t.b, { subscriberId: 'reader' });
      await createWorkflow(t.b, { workflowId: 'feed', steps: [step.inApp({ content: 'not stalled' })] });
      runner.start();
      await t.a.post('/v1/events/trigger', { name: 'stuck-chat', to: [...ids, 'late-one'] }).expect(201);
      // The slow sends are out and waiting on their peers: a quarter of a destination's 16 places
      // while it has not answered (the rest wait a second in their slots, then go back to the queue).
      await vi.waitFor(() => expect([hanging.open(), late.open()]).toEqual([4, 1]), { timeout: 5000, interval: 20 });

      await t.b.post('/v1/events/trigger', { name: 'feed', to: 'reader' }).expect(201);
      await vi.waitFor(async () => expect(await t.db('messages').where({ content: 'not stalled' }).first()).toBeDefined(), { timeout: 2000, interval: 10 });
      expect([hanging.open(), late.open()]).toEqual([4, 1]);
    } finally {
      await Promise.all([hanging.close(), late.close()]);
      await runner.stop();
    }
  });

  it('keeps healthy webhooks flowing while the slow ones hang, each destination holding only its share of the slots', async () => {
    const hanging = await startHangingWebhook();
    const healthy = await startHttpPeer();
    const runner = liveRunner({ perDestination: 4 });
    try {
      const slow = range('slow', 20);
      const fine = range('fine', 20);
      await chatAudience(t.a, 'mixed-chat', hanging.url, slow);
      await chatAudience(t.a, 'mixed-chat', healthy.url, fine);
      runner.start();
      // The slow ones first: they are claimed first, and still must not hold the healthy ones back.
      await t.a.post('/v1/events/trigger', { name: 'mixed-chat', to: slow }).expect(201);
      await t.a.post('/v1/events/trigger', { name: 'mixed-chat', to: fine }).expect(201);
      await vi.waitFor(() => expect(healthy.requests).toHaveLength(20), { timeout: 5000, interval: 20 });
      // A quarter of its 4 places: it has never answered.
      expect(hanging.peak()).toBe(1);
      // The others wait their turn back in the queue (the destination is slow), their attempts given back.
      await vi.waitFor(async () => expect((await chatJobs(t.environments.a)).filter((job) => job.status === 'queued').length).toBeGreaterThan(0), {
        timeout: 5000,
        interval: 20,
      });
      const waiting = (await chatJobs(t.environments.a)).filter((job) => job.status === 'queued');
      expect(waiting.every((job) => job.attempts === 0)).toBe(true);
    } finally {
      await Promise.all([hanging.close(), healthy.close()]);
      await runner.stop();
    }
  });

  it("shares the slots between organizations: one tenant's hanging sends, in all its environments, cannot take them all", async () => {
    const hanging = await startHangingWebhook();
    const healthy = await startHttpPeer();
    // Four slots, two per organization at most: one organization's slow sends, in both its
    // environments, leave the other organization two.
    const runner = liveRunner({ slots: 4, slotsPerOrganization: 2, perDestination: 8 });
    try {
      await chatAudience(t.a, 'greedy-chat', hanging.url, range('greedy', 10));
      await chatAudience(t.aProduction, 'greedy-chat', hanging.url, range('greedy', 10));
      await chatAudience(t.b, 'modest-chat', healthy.url, range('modest', 5));
      runner.start();
      await t.a.post('/v1/events/trigger', { name: 'greedy-chat', to: range('greedy', 10) }).expect(201);
      await t.aProduction.post('/v1/events/trigger', { name: 'greedy-chat', to: range('greedy', 10) }).expect(201);
      await vi.waitFor(() => expect(hanging.open()).toBe(2), { timeout: 5000, interval: 20 });
      await t.b.post('/v1/events/trigger', { name: 'modest-chat', to: range('modest', 5) }).expect(201);
      await vi.waitFor(async () => expect((await chatJobs(t.environments.b)).map((job) => job.status)).toEqual(Array(5).fill('completed')), {
        timeout: 5000,
        interval: 20,
      });
      expect(hanging.peak()).toBe(2);
    } finally {
      await Promise.all([hanging.close(), healthy.close()]);
      await runner.stop();
    }
  });

  it('keeps an organization to its share when reading which organization an environment is of failed once', async () => {
    const hanging = await startHangingWebhook();
    await chatAudience(t.a, 'greedy-chat', hanging.url, range('greedy', 10));
    await t.a.post('/v1/events/trigger', { name: 'greedy-chat', to: range('greedy', 10) }).expect(201);
    // The first read of environments' organizations fails, as a database error would make it.
    let failures = 1;
    const failOnce = (query: { sql: string }) => {
      if (failures > 0 && /from [`"]environments[`"] where [`"]id[`"] in/i.test(query.sql)) {
        failures -= 1;
        throw new Error('the read of organizations failed');
      }
    };
    t.db.client.on('query', failOnce);
    const runner = liveRunner({ slots: 8, slotsPerOrganization: 2, perDestination: 16 });
    try {
      runner.start();
      await vi.waitFor(() => expect(hanging.open()).toBe(2), { timeout: 5000, interval: 20 });
      // Claims go on meanwhile; before, the sends counted by their environment were never left out.
      await new Promise((resolve) => setTimeout(resolve, 1_000));
      expect(failures).toBe(0);
      expect(hanging.peak()).toBe(2);
    } finally {
      t.db.client.off('query', failOnce);
      await hanging.close();
      await runner.stop();
    }
  });

  it('opens a breaker after failures in a row, defers its jobs without spending attempts, then probes and closes it', async () => {
    let failing = true;
    const peer = await startHttpPeer(() => (failing ? { status: 503, body: 'down' } : { status: 200, body: 'ok' }));
    const runner = liveRunner({ perDestination: 1, breakerFailures: 3, breakerCooldownMs: 1500 });
    try {
      await chatAudience(t.a, 'flaky-chat', peer.url, ['flaky']);
      runner.start();
      for (let i = 0; i < 3; i++) await t.a.post('/v1/events/trigger', { name: 'flaky-chat', to: 'flaky' }).expect(201);
      await vi.waitFor(() => expect(peer.requests).toHaveLength(3), { timeout: 5000, interval: 10 });
      // Open now: two more jobs are deferred, not sent.
      await t.a.post('/v1/events/trigger', { name: 'flaky-chat', to: 'flaky' }).expect(201);
      await t.a.post('/v1/events/trigger', { name: 'flaky-chat', to: 'flaky' }).expect(201);
      const deferred = async () =>
        (await t
          .db('execution_details as d')
          .join('jobs as j', 'j.id', 'd.job_id')
          .where('j.environment_id', t.environments.a)
          .where('d.detail', 'like', 'Deferred:%')
          .select('d.job_id', 'd.status', 'd.detail')) as Array<{ job_id: string; status: string; detail: string }>;
      await vi.waitFor(async () => expect(new Set((await deferred()).map((d) => d.job_id)).size).toBeGreaterThanOrEqual(2), { timeout: 1000, interval: 10 });
      expect(peer.requests).toHaveLength(3);
      const [first] = await deferred();
      expect(first.status).toBe('warning');
      expect(first.detail).toMatch(/failed 3 times in a row; its sends wait until .* \(no attempt spent\)$/);
      const job = await t.db('jobs').where({ id: first.job_id }).first('status', 'attempts');
      expect(job).toMatchObject({ status: 'queued', attempts: 0 });

      // The destination recovers: after the cooldown one probe goes, then everything.
      failing = false;
      await vi.waitFor(async () => expect((await chatJobs(t.environments.a)).map((j) => j.status)).toEqual(Array(5).fill('completed')), { timeout: 10_000, interval: 50 });
      // Three failures, then each of the five sent once: nothing was sent while the breaker was open.
      expect(peer.requests).toHaveLength(8);
      expect(await t.db('jobs').where({ id: first.job_id }).first('attempts')).toMatchObject({ attempts: 1 });
    } finally {
      await peer.close();
      await runner.stop();
    }
  });

  it('retries when the backoff says, whatever else is still in flight', async () => {
    const hanging = await startHangingWebhook();
    const times: number[] = [];
    const flaky = await startHttpPeer((_request, index) => {
      times.push(Date.now());
      return index === 0 ? { status: 503, body: 'down' } : { status: 200, body: 'ok' };
    });
    const runner = liveRunner();
    try {
      await chatAudience(t.a, 'retry-chat', hanging.url, ['stuck']);
      await chatAudience(t.a, 'retry-chat', flaky.url, ['flaky-once']);
      runner.start();
      await t.a.post('/v1/events/trigger', { name: 'retry-chat', to: ['stuck', 'flaky-once'] }).expect(201);
      // The retry is due 1.5 s after the failure (random 0.5): it goes then, while the other send still hangs.
      await vi.waitFor(() => expect(times).toHaveLength(2), { timeout: 4000, interval: 20 });
      expect(times[1] - times[0]).toBeGreaterThanOrEqual(1400);
      expect(hanging.open()).toBe(1);
    } finally {
      await Promise.all([hanging.close(), flaky.close()]);
      await runner.stop();
    }
  });

  it('runs two workers against one slow destination without sending anything twice', async () => {
    // Sends slower than the lease: only its renewal keeps the other worker off a job in flight.
    const slow = await startHangingWebhook({ delayMs: 1000 });
    const healthy = await startHttpPeer();
    const runners = [liveRunner({ leaseMs: 600 }), liveRunner({ leaseMs: 600 })];
    try {
      await chatAudience(t.a, 'shared-chat', slow.url, range('shared-slow', 12));
      await chatAudience(t.a, 'shared-chat', healthy.url, range('shared-fine', 12));
      for (const runner of runners) runner.start();
      await t.a.post('/v1/events/trigger', { name: 'shared-chat', to: [...range('shared-slow', 12), ...range('shared-fine', 12)] }).expect(201);
      await vi.waitFor(async () => expect((await chatJobs(t.environments.a)).filter((job) => job.status === 'completed')).toHaveLength(24), {
        timeout: 15_000,
        interval: 50,
      });
      expect(new Set(slow.deliveries).size).toBe(12);
      expect(slow.deliveries).toHaveLength(12);
      expect(healthy.requests).toHaveLength(12);
      expect((await chatJobs(t.environments.a)).every((job) => job.attempts === 1)).toBe(true);
    } finally {
      await Promise.all([slow.close(), healthy.close()]);
      await Promise.all(runners.map((runner) => runner.stop()));
    }
  });

  it('shows a notification as processing while its send is under way, and completed once it is recorded', async () => {
    const slow = await startHangingWebhook({ delayMs: 1_000 });
    const runner = liveRunner();
    try {
      await chatAudience(t.a, 'watched-chat', slow.url, ['watched']);
      const { transactionId } = (await t.a.post('/v1/events/trigger', { name: 'watched-chat', to: 'watched' }).expect(201)).body.data;
      const status = async () => (await t.db('notifications').where({ transaction_id: transactionId }).first('status')).status;
      expect(await status()).toBe('pending');
      runner.start();
      await vi.waitFor(() => expect(slow.open()).toBe(1), { timeout: 5000, interval: 10 });
      expect(await status()).toBe('processing');
      await vi.waitFor(async () => expect(await status()).toBe('completed'), { timeout: 5000, interval: 20 });
    } finally {
      await slow.close();
      await runner.stop();
    }
  });

  it('runs the step after a send as soon as the send is recorded, not at the next look of its loop', async () => {
    const peer = await startHttpPeer();
    // With timers stopped, an in-app loop that found nothing at its first look sleeps for good,
    // unless the send's outcome, which queues the in-app step, wakes it when it commits.
    try {
      await createWorkflow(t.a, { workflowId: 'chat-then-feed', steps: [step.chat({ content: 'first' }), step.inApp({ content: 'then this' })] });
      await chatAudience(t.a, 'chat-then-feed', peer.url, ['ada']);
      await t.a.post('/v1/events/trigger', { name: 'chat-then-feed', to: 'ada' }).expect(201);
      const delivered = async () => (await t.db('messages').where({ content: 'then this' }).first()) !== undefined;
      await runWithTimersStopped(new JobRunner(t.deps, { coalesceMs: 0, random: () => 0.5 }), delivered);
      expect(peer.requests).toHaveLength(1);
      expect(await delivered()).toBe(true);
    } finally {
      await peer.close();
    }
  });

  it('drains on stop: the sends under way finish and are recorded, and nothing new is claimed', async () => {
    const slow = await startHangingWebhook({ delayMs: 400 });
    const runner = liveRunner();
    try {
      await chatAudience(t.a, 'draining-chat', slow.url, range('drain', 5));
      runner.start();
      await t.a.post('/v1/events/trigger', { name: 'draining-chat', to: range('drain', 5) }).expect(201);
      // Four under way (a quarter of the destination's places until it answers), the fifth waiting for a place.
      await vi.waitFor(() => expect(slow.open()).toBe(4), { timeout: 5000, interval: 10 });
      await runner.stop();
      expect((await chatJobs(t.environments.a)).map((job) => job.status)).toEqual(Array(5).fill('completed'));
      expect(await t.db('jobs').where({ environment_id: t.environments.a, status: 'running' }).first()).toBeUndefined();

      await t.a.post('/v1/events/trigger', { name: 'draining-chat', to: 'drain-0' }).expect(201);
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect((await chatJobs(t.environments.a)).filter((job) => job.status === 'pending')).toHaveLength(1);
    } finally {
      await slow.close();
      await runner.stop();
    }
  });
});

describe("a provider's 429", () => {
  it('reschedules the job at its Retry-After without spending an attempt', async () => {
    const peer = await startHttpPeer((_request, index) => (index === 0 ? { status: 429, body: 'slow down', headers: { 'Retry-After': '7' } } : { status: 200, body: 'ok' }));
    try {
      await chatAudience(t.a, 'paced-chat', peer.url, ['paced']);
      await t.a.post('/v1/events/trigger', { name: 'paced-chat', to: 'paced' }).expect(201);
      await new JobRunner(t.deps).runUntilIdle();
      const job = await t.db('jobs').where({ type: 'chat', environment_id: t.environments.a }).first();
      expect(job).toMatchObject({ status: 'queued', attempts: 0 });
      expect(new Date(job.run_at).getTime() - t.clock.now().getTime()).toBe(7000);
      const [detail] = await t.db('execution_details').where({ job_id: job.id });
      expect(detail).toMatchObject({ status: 'warning' });
      expect(detail.detail).toMatch(/answered 429: rate limited; trying again at .* \(no attempt spent\)$/);

      t.clock.advance(7000);
      await new JobRunner(t.deps).runUntilIdle();
      expect(await t.db('jobs').where({ id: job.id }).first('status', 'attempts')).toMatchObject({ status: 'completed', attempts: 1 });
      expect(peer.requests).toHaveLength(2);
    } finally {
      await peer.close();
    }
  });
});

describe("a provider's 429 that says to come back at once, or what is no time", () => {
  it('comes back a second later at least, and after a backoff of its own when its Retry-After is no time', async () => {
    for (const [retryAfter, least, most] of [
      ['0', 1_000, 1_000],
      ['-5', 1_000, 2_000],
      ['1.5', 1_500, 1_500],
    ] as const) {
      const peer = await startHttpPeer(() => ({ status: 429, body: 'slow down', headers: { 'Retry-After': retryAfter } }));
      try {
        const name = `paced-${least}-${most}`;
        await chatAudience(t.a, name, peer.url, [name]);
        await t.a.post('/v1/events/trigger', { name, to: name }).expect(201);
        await new JobRunner(t.deps).runUntilIdle();
        const job = await t.db('jobs').where({ type: 'chat', environment_id: t.environments.a, status: 'queued' }).orderBy('created_at', 'desc').first();
        const waits = new Date(job.run_at).getTime() - t.clock.now().getTime();
        expect(waits, retryAfter).toBeGreaterThanOrEqual(least);
        expect(waits, retryAfter).toBeLessThanOrEqual(most);
        expect(peer.requests, retryAfter).toHaveLength(1);
        await t.db('jobs').where({ id: job.id }).update({ status: 'canceled' });
      } finally {
        await peer.close();
      }
    }
  });
});

describe('a failed send', () => {
  it('is recorded with the provider it went through, on its job and on each attempt', async () => {
    const peer = await startHttpPeer((_request, index) => (index === 0 ? { status: 503, body: 'down' } : { status: 400, body: 'bad request' }));
    try {
      await chatAudience(t.a, 'failing-chat', peer.url, ['unlucky']);
      await t.a.post('/v1/events/trigger', { name: 'failing-chat', to: 'unlucky' }).expect(201);
      await new JobRunner(t.deps).runUntilIdle();
      t.clock.advance(60_000);
      await new JobRunner(t.deps).runUntilIdle();
      expect(peer.requests).toHaveLength(2);

      const job = await t.db('jobs').where({ type: 'chat', environment_id: t.environments.a }).first();
      expect(job).toMatchObject({ status: 'failed', provider_id: 'slack' });
      const details = await t.db('execution_details').where({ job_id: job.id }).orderBy('created_at');
      expect(details.map((d) => [d.status, d.provider_id])).toEqual([['failed', 'slack'], ['failed', 'slack']]);

      const shown = (await t.a.get(`/v1/notifications/${job.notification_id}`).expect(200)).body.data;
      expect(shown.jobs).toEqual([expect.objectContaining({ status: 'failed', providerId: 'slack' })]);
    } finally {
      await peer.close();
    }
  });
});
