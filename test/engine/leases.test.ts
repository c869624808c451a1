import { beforeEach, describe, expect, it, vi } from 'vitest';
import { useTestApp } from '../helpers/app.js';
import { JobRunner } from '../../src/engine/runner.js';
import { cancelableJobs, claimDueJobs, closeSendGates, finishInAppJobs, heldJobIds, passSendGate, recordOutcome, renewLeases, updateClaimedJob, type JobRecord } from '../../src/db/repos/jobs.js';
import type { Gate, Verdict } from '../../src/engine/destinations.js';
import { executeJob } from '../../src/engine/execute.js';
import { executeInAppBatch } from '../../src/engine/in-app-batch.js';
import { cancelEvent } from '../../src/engine/cancel.js';
import { writersWaiting } from '../../src/db/group-commit.js';
import type { Transaction } from '../../src/db/knex.js';
import { findEvent } from '../../src/db/repos/events.js';
import { closeHeldDigest, markRiders } from '../../src/engine/digests.js';
import { startHttpPeer } from '../helpers/peers.js';
import { testDatabaseUrl } from '../helpers/db.js';

const t = useTestApp();
// Made again before each test, in its fresh organizations.
beforeEach(async () => {
  await t.a.post('/v1/subscribers', { subscriberId: 'ada' }).expect(201);
  await t.a.post('/v1/workflows', { name: 'Note', steps: [{ type: 'sms', template: { content: 'x' } }] }).expect(201);
});

describe('leases', () => {
  it('hand a job whose worker went quiet to another worker, and ignore the first worker afterwards', async () => {
    await t.a.post('/v1/events/trigger', { name: 'note', to: 'ada' }).expect(201);
    const [claimed] = await claimDueJobs(t.db, { owner: 'worker-a', now: t.clock.now(), leaseMs: 30_000, limit: 10 });
    expect(claimed).toMatchObject({ status: 'running', attempts: 1 });
    // Before the lease ends nobody else gets it.
    expect(await claimDueJobs(t.db, { owner: 'worker-b', now: t.clock.now(), leaseMs: 30_000, limit: 10 })).toEqual([]);
    t.clock.advance(31_000);
    const [taken] = await claimDueJobs(t.db, { owner: 'worker-b', now: t.clock.now(), leaseMs: 30_000, limit: 10 });
    expect(taken).toMatchObject({ id: claimed.id, attempts: 2 });
    // worker-a comes back and tries to record its outcome: nothing changes.
    expect(await updateClaimedJob(t.db, claimed.id, 'worker-a', { status: 'completed' }, t.clock.now())).toBe(false);
    await executeJob({ deps: t.deps, owner: 'worker-b', random: () => 0.5 }, taken);
    const job = await t.db('jobs').where({ id: claimed.id }).first();
    expect(job).toMatchObject({ status: 'failed', lease_owner: null }); // no SMS integration: a permanent failure
  });

  it("record a job's outcome and its execution detail, and read whether its event is canceled, only for the worker that holds it", async () => {
    await t.a.post('/v1/events/trigger', { name: 'note', to: 'ada' }).expect(201);
    const [claimed] = await claimDueJobs(t.db, { owner: 'worker-a', now: t.clock.now(), leaseMs: 30_000, limit: 10 });
    const detail = { status: 'failed' as const, detail: 'refused', providerId: 'twilio', raw: '{"code":21211}', isRetry: false };
    const details = () => t.db('execution_details').where({ job_id: claimed.id }).select('status', 'detail', 'provider_id', 'raw', 'is_retry');
    const record = (owner: string) => t.db.transaction((trx) => recordOutcome(trx, claimed, owner, { status: 'failed', providerId: 'twilio' }, detail, t.clock.now()));

    expect(await record('worker-b')).toBeUndefined();
    expect(await details()).toEqual([]);
    expect(await t.db('jobs').where({ id: claimed.id }).first()).toMatchObject({ status: 'running', lease_owner: 'worker-a' });

    // A cancel that came while the job ran is what the outcome reads.
    const canceledAt = t.clock.now().toISOString();
    await t.db('events').where({ id: claimed.eventId }).update({ canceled_at: canceledAt });
    expect(await record('worker-a')).toEqual({ canceledAt });
    expect((await details()).map((row) => ({ ...row, is_retry: Boolean(row.is_retry) }))).toEqual([
      { status: 'failed', detail: 'refused', provider_id: 'twilio', raw: '{"code":21211}', is_retry: false },
    ]);
    expect(await t.db('jobs').where({ id: claimed.id }).first()).toMatchObject({ status: 'failed', lease_owner: null, provider_id: 'twilio' });
    // Recorded once: the job is no longer held.
    expect(await record('worker-a')).toBeUndefined();
    expect(await details()).toHaveLength(1);
  });

  it('stay with a worker at work however long its batch takes: no job is sent twice', async () => {
    // Three slow sends, one at a time, under a lease shorter than the batch (600 ms against 900):
    // the first worker's last job waits past the lease it claimed it with.
    const hook = await startHttpPeer(() => new Promise((resolve) => setTimeout(() => resolve({ status: 200, body: '{"ok":true}' }), 300)));
    try {
      await t.a.post('/v1/integrations', { providerId: 'slack' }).expect(201);
      await t.a.post('/v1/workflows', { name: 'Slow chat', steps: [{ type: 'chat', template: { content: 'x' } }] }).expect(201);
      const ids = ['slow-1', 'slow-2', 'slow-3'];
      for (const subscriberId of ids) {
        await t.a.post('/v1/subscribers', { subscriberId }).expect(201);
        await t.a.put(`/v1/subscribers/${subscriberId}/credentials`, { providerId: 'slack', credentials: { webhookUrl: `${hook.url}/${subscriberId}` } }).expect(200);
      }
      await t.a.post('/v1/events/trigger', { name: 'slow-chat', to: ids }).expect(201);
      const first = new JobRunner(t.deps, { concurrency: 1, leaseMs: 600 });
      const second = new JobRunner(t.deps, { leaseMs: 600 });
      const working = first.runBatch();
      let done = false;
      void working.then(() => (done = true));
      // The test's clock keeps pace with real time, and a second worker looks for work every 50 ms.
      let taken = 0;
      while (!done) {
        await new Promise((resolve) => setTimeout(resolve, 50));
        t.clock.advance(50);
        taken += await second.runBatch();
      }
      expect(taken).toBe(0);
      expect(await working).toBe(3);
      expect(hook.requests.map((request) => request.path).sort()).toEqual(['/slow-1', '/slow-2', '/slow-3']);
      expect(await t.db('jobs').where({ type: 'chat' }).select('status', 'attempts')).toEqual(ids.map(() => ({ status: 'completed', attempts: 1 })));
    } finally {
      await hook.close();
    }
  });

  it('renew only the jobs of the batch at work: one left running by a failure is taken over when its lease ends', async () => {
    await t.a.post('/v1/events/trigger', { name: 'note', to: 'ada' }).expect(201);
    const [orphan] = await claimDueJobs(t.db, { owner: 'renewing-worker', now: t.clock.now(), leaseMs: 30_000, limit: 1 });
    const until = new Date(t.clock.now().getTime() + 3_600_000);
    expect(await renewLeases(t.db, 'renewing-worker', ['some-other-job'], until)).toBe(0);
    expect(await renewLeases(t.db, 'another-worker', [orphan.id], until)).toBe(0);
    t.clock.advance(31_000);
    const [taken] = await claimDueJobs(t.db, { owner: 'worker-b', now: t.clock.now(), leaseMs: 30_000, limit: 10 });
    expect(taken).toMatchObject({ id: orphan.id, attempts: 2 });
    expect(await renewLeases(t.db, 'worker-b', [orphan.id], until)).toBe(1);
    await executeJob({ deps: t.deps, owner: 'worker-b', random: () => 0.5 }, taken);
  });

  it('give back the jobs a stopping runner claimed but had not started', async () => {
    await t.a.post('/v1/events/trigger/bulk', { events: Array.from({ length: 5 }, () => ({ name: 'note', to: 'ada' })) }).expect(201);
    const runner = new JobRunner(t.deps, { concurrency: 1, batchSize: 5 });
    const stopping = runner.runBatch();
    await runner.stop(); // asks it to stop while the batch is under way
    await stopping;
    const statuses = (await t.db('jobs').where({ type: 'sms' }).whereNot('status', 'failed').select('status', 'lease_owner')) as Array<{ status: string; lease_owner: string | null }>;
    expect(statuses.every((job) => job.status === 'queued' && job.lease_owner === null)).toBe(true);
    await new JobRunner(t.deps).runUntilIdle();
    expect(await t.db('jobs').where({ type: 'sms' }).whereNot('status', 'failed').count({ n: '*' }).first()).toMatchObject({ n: 0 });
  });
});

describe('digest under concurrent triggers', () => {
  it('opens exactly one digest for a key, whatever the race', async () => {
    await t.a.post('/v1/subscribers', { subscriberId: 'busy' }).expect(201);
    await t.a
      .post('/v1/workflows', {
        name: 'Burst',
        steps: [{ type: 'digest', amount: 5, unit: 'minutes' }, { type: 'in_app', template: { content: '{{step.total_count}}' } }],
      })
      .expect(201);
    const results = await Promise.all(Array.from({ length: 20 }, () => t.a.post('/v1/events/trigger', { name: 'burst', to: 'busy' })));
    expect(results.map((r) => r.status)).toEqual(Array(20).fill(201));
    const digests = await t.db('jobs').where({ type: 'digest' }).select('status', 'digest_key');
    expect(digests.filter((job: { status: string }) => job.status === 'delayed')).toHaveLength(1);
    expect(digests.filter((job: { status: string }) => job.status === 'merged')).toHaveLength(19);
    t.clock.advance(5 * 60_000);
    await new JobRunner(t.deps).runUntilIdle();
    const feed = (await t.a.get('/v1/subscribers/busy/messages').expect(200)).body;
    expect(feed.data.map((m: { content: string }) => m.content)).toEqual(['20']);
  });

  it('put a job whose run failed unexpectedly back in the queue after its backoff, not at the end of its lease', async () => {
    await t.a.post('/v1/events/trigger', { name: 'note', to: 'ada', transactionId: 'unexpected' }).expect(201);
    const { id: eventId } = await t.db('events').where({ transaction_id: 'unexpected' }).first('id');
    const ours = () => t.db('jobs').where({ event_id: eventId });
    // A step the workflow does not have: the run throws something no provider said (a bug of ours).
    await ours().update({ step_index: 7 });
    const runner = new JobRunner(t.deps, { leaseMs: 600_000, random: () => 0.5 });
    await runner.runBatch();
    const job = await ours().first('status', 'lease_owner', 'run_at', 'attempts');
    expect(job).toMatchObject({ status: 'queued', lease_owner: null, attempts: 1 });
    // The first retry's backoff (about 2 s), far short of the lease.
    const waitMs = Date.parse(job.run_at) - t.clock.now().getTime();
    expect(waitMs).toBeGreaterThan(0);
    expect(waitMs).toBeLessThan(5_000);
    await runner.runBatch();
    expect(await ours().first('attempts')).toEqual({ attempts: 1 });
    t.clock.advance(waitMs);
    await runner.runBatch();
    expect(await ours().first('attempts')).toEqual({ attempts: 2 });
  });
});

describe('waking', () => {
  it('a trigger wakes an idle runner of the same process, long before its next poll', async () => {
    await t.a.post('/v1/workflows', { name: 'Feed note', steps: [{ type: 'in_app', template: { content: 'woken' } }] }).expect(201);
    const runner = new JobRunner(t.deps, { maxIdleMs: 120_000 });
    runner.start();
    try {
      // Its idle waits double from 10 ms: after 3 s it is 0.45 s into a wait of 2.56 s, longer than
      // the assertion below waits.
      await new Promise((resolve) => setTimeout(resolve, 3000));
      await t.a.post('/v1/events/trigger', { name: 'feed-note', to: 'ada' }).expect(201);
      await vi.waitFor(async () => expect(await t.db('messages').where({ content: 'woken' }).first()).toBeDefined(), { timeout: 1500, interval: 20 });
    } finally {
      await runner.stop();
    }
  });
});

describe('a cancel racing a worker', () => {
  it('stops a send its worker took, when the event is canceled after the job started and before it sends', async () => {
    const hook = await startHttpPeer();
    try {
      await t.a.post('/v1/integrations', { providerId: 'slack' }).expect(201);
      await t.a.post('/v1/workflows', { name: 'Chat note', steps: [{ type: 'chat', template: { content: 'x' } }] }).expect(201);
      await t.a.put('/v1/subscribers/ada/credentials', { providerId: 'slack', credentials: { webhookUrl: `${hook.url}/ada` } }).expect(200);
      const { transactionId } = (await t.a.post('/v1/events/trigger', { name: 'chat-note', to: 'ada' }).expect(201)).body.data;
      const [claimed] = await claimDueJobs(t.db, { owner: 'worker-a', now: t.clock.now(), leaseMs: 30_000, limit: 10 });
      // The cancel lands while the worker is on its way: it has read the event and decided, and its destination admits it.
      let answer: unknown;
      const released: Verdict[] = [];
      const gate: Gate = {
        async admit() {
          answer = (await t.a.delete(`/v1/events/trigger/${transactionId}`).expect(200)).body;
          return { go: true, started: Date.now() };
        },
        finished: (_destination, verdict) => released.push(verdict),
      };
      await executeJob({ deps: t.deps, owner: 'worker-a', random: () => 0.5, gate }, claimed);
      expect(answer).toEqual({ data: true });
      expect(hook.requests).toEqual([]);
      expect(released).toEqual(['neutral']);
      const notification = (await t.a.get(`/v1/notifications?transactionId=${transactionId}`).expect(200)).body.data[0];
      expect(notification.status).toBe('canceled');
      const [job] = (await t.a.get(`/v1/notifications/${notification.notificationId}`).expect(200)).body.data.jobs;
      expect(job).toMatchObject({ type: 'chat', status: 'canceled', executionDetails: [{ status: 'warning', detail: 'Canceled with its event before it ran' }] });
    } finally {
      await hook.close();
    }
  });

  /**
   * Runs a workflow of `steps`, a chat send first, to ada, whose Slack webhook cancels the event
   * while it takes the message: past the send's gate. Answers the cancel's answer, how many
   * messages the webhook took, and the event's transactionId.
   */
  async function cancelWhileSending(name: string, steps: object[]) {
    let transactionId = '';
    let answer: unknown;
    const hook = await startHttpPeer(async () => {
      answer = (await t.a.delete(`/v1/events/trigger/${transactionId}`).expect(200)).body;
      return { status: 200, body: 'ok' };
    });
    try {
      await t.a.post('/v1/integrations', { providerId: 'slack' }).expect(201);
      const { workflowId } = (await t.a.post('/v1/workflows', { name, steps }).expect(201)).body.data;
      await t.a.put('/v1/subscribers/ada/credentials', { providerId: 'slack', credentials: { webhookUrl: `${hook.url}/ada` } }).expect(200);
      transactionId = (await t.a.post('/v1/events/trigger', { name: workflowId, to: 'ada' }).expect(201)).body.data.transactionId;
      await new JobRunner(t.deps, { random: () => 0.5 }).runUntilIdle();
      return { answer, sent: hook.requests.length, transactionId };
    } finally {
      await hook.close();
    }
  }
  const notificationOf = async (transactionId: string) => (await t.a.get(`/v1/notifications?transactionId=${transactionId}`).expect(200)).body.data[0];

  it('records the steps after a send as canceled when the cancel lands while the send is going out', async () => {
    const { answer, sent, transactionId } = await cancelWhileSending('Chat then inbox', [{ type: 'chat', template: { content: 'x' } }, { type: 'in_app', template: { content: 'y' } }]);
    // The send goes out; the step after it is stopped.
    expect(answer).toEqual({ data: true });
    expect(sent).toBe(1);
    const notification = await notificationOf(transactionId);
    expect(notification.status).toBe('completed');
    const { jobs } = (await t.a.get(`/v1/notifications/${notification.notificationId}`).expect(200)).body.data;
    expect(jobs.map((job: { type: string; status: string }) => [job.type, job.status])).toEqual([['chat', 'completed'], ['in_app', 'canceled']]);
    expect(jobs[1].executionDetails).toEqual([expect.objectContaining({ status: 'warning', detail: `Canceled with event ${transactionId} while step ${jobs[0].stepId} ran; not run` })]);
    expect(await t.db('messages').where({ transaction_id: transactionId }).first()).toBeUndefined();
  });

  it('answers false when all that is left is a send already going out, and records the send as it went', async () => {
    const { answer, sent, transactionId } = await cancelWhileSending('Chat only', [{ type: 'chat', template: { content: 'x' } }]);
    expect(answer).toEqual({ data: false });
    expect(sent).toBe(1);
    expect((await notificationOf(transactionId)).status).toBe('completed');
    expect((await t.db('events').where({ transaction_id: transactionId }).first('canceled_at')).canceled_at).toBeNull();
    // A second cancel, once it is all over, has nothing to stop either.
    expect((await t.a.delete(`/v1/events/trigger/${transactionId}`).expect(200)).body).toEqual({ data: false });
  });

  it('answers false when the send going out is followed only by inactive steps', async () => {
    const { answer, transactionId } = await cancelWhileSending('Chat, then off', [{ type: 'chat', template: { content: 'x' } }, { type: 'email', active: false, template: { subject: 's', content: 'x' } }]);
    expect(answer).toEqual({ data: false });
    expect((await notificationOf(transactionId)).status).toBe('completed');
  });

  it('sends nothing from a worker whose lease another worker took over while it was on its way', async () => {
    const hook = await startHttpPeer();
    try {
      // No send limits: the send goes straight to its destination.
      await t.a.post('/v1/integrations', { providerId: 'slack', sendLimits: { perDestination: [] } }).expect(201);
      await t.a.post('/v1/workflows', { name: 'Chat note', steps: [{ type: 'chat', template: { content: 'x' } }] }).expect(201);
      await t.a.put('/v1/subscribers/ada/credentials', { providerId: 'slack', credentials: { webhookUrl: `${hook.url}/ada` } }).expect(200);
      await t.a.post('/v1/events/trigger', { name: 'chat-note', to: 'ada' }).expect(201);
      const [claimed] = await claimDueJobs(t.db, { owner: 'worker-a', now: t.clock.now(), leaseMs: 1_000, limit: 10 });
      // Worker a stalls at its destination past its lease; worker b claims the job meanwhile.
      let takenOver: string[] = [];
      const gate: Gate = {
        async admit() {
          t.clock.advance(5_000);
          takenOver = (await claimDueJobs(t.db, { owner: 'worker-b', now: t.clock.now(), leaseMs: 30_000, limit: 100 })).map((job) => job.id);
          return { go: true, started: Date.now() };
        },
        finished: () => undefined,
      };
      await executeJob({ deps: t.deps, owner: 'worker-a', random: () => 0.5, gate }, claimed);
      expect(takenOver).toContain(claimed.id);
      expect(hook.requests).toEqual([]);
      expect(await t.db('jobs').where({ id: claimed.id }).first('status', 'lease_owner', 'attempts')).toEqual({ status: 'running', lease_owner: 'worker-b', attempts: 2 });
      // Worker b's send goes: its attempt is a new one.
      await executeJob({ deps: t.deps, owner: 'worker-b', random: () => 0.5 }, { ...claimed, attempts: 2 });
      expect(hook.requests).toHaveLength(1);
      expect(await t.db('jobs').where({ id: claimed.id }).first('status')).toEqual({ status: 'completed' });
    } finally {
      await hook.close();
    }
  });

  /**
   * Resolves once another transaction waits for `trx`: on PostgreSQL one its locks block, on
   * SQLite one waiting for the writing connection it holds.
   */
  async function blockedBy(trx: Transaction): Promise<void> {
    if (testDatabaseUrl() === undefined) return expect.poll(() => writersWaiting(t.db), { timeout: 10_000 }).toBe(true);
    const { rows } = await trx.raw('SELECT pg_backend_pid() AS pid');
    const waiting = async () => (await t.db.raw('SELECT COUNT(*)::int AS n FROM pg_stat_activity WHERE ? = ANY(pg_blocking_pids(pid))', [rows[0].pid])).rows[0].n;
    await expect.poll(waiting, { timeout: 10_000 }).toBeGreaterThan(0);
  }

  /**
   * Cancels the event of `transactionId` while worker-a's in-app batch of `claimed` runs: the batch
   * reads the event before the cancel commits, and its transaction waits for the cancel's. Answers
   * the cancel's answer.
   */
  async function cancelDuringInAppBatch(transactionId: string, claimed: JobRecord[]): Promise<boolean> {
    let batch: Promise<void> | undefined;
    const answer = await t.db.transaction(async (trx) => {
      const canceled = await cancelEvent({ ...t.deps, db: trx }, t.environments.a, transactionId);
      batch = executeInAppBatch({ deps: t.deps, owner: 'worker-a', random: () => 0.5 }, claimed);
      await blockedBy(trx);
      return canceled;
    });
    await batch;
    return answer;
  }

  it('stops an in-app job a worker took before its batch wrote it: the cancel answers true and nothing is delivered', async () => {
    await t.a.post('/v1/workflows', { name: 'Inbox note', steps: [{ type: 'in_app', template: { content: 'x' } }] }).expect(201);
    const { transactionId } = (await t.a.post('/v1/events/trigger', { name: 'inbox-note', to: 'ada' }).expect(201)).body.data;
    const claimed = await claimDueJobs(t.db, { owner: 'worker-a', now: t.clock.now(), leaseMs: 30_000, limit: 10 });
    expect(claimed.map((job) => job.type)).toEqual(['in_app']);
    expect(await cancelDuringInAppBatch(transactionId, claimed)).toBe(true);
    expect(await t.db('messages').where({ transaction_id: transactionId }).first()).toBeUndefined();
    const notification = await notificationOf(transactionId);
    expect(notification.status).toBe('canceled');
    const [job] = (await t.a.get(`/v1/notifications/${notification.notificationId}`).expect(200)).body.data.jobs;
    expect(job).toMatchObject({ type: 'in_app', status: 'canceled', executionDetails: [{ status: 'warning', detail: 'Canceled with its event before it ran' }] });
  });

  /** A workflow that gathers a second's events and lists their `n` in one in-app message. */
  const digestNote = () =>
    t.a
      .post('/v1/workflows', {
        name: 'Digest note',
        steps: [
          { type: 'digest', amount: 1, unit: 'seconds' },
          { type: 'in_app', template: { content: '{{#each step.events}}{{this.n}},{{/each}}' } },
        ],
      })
      .expect(201);

  it("hands a closed digest's in-app send under way to the digest's other event when the event that opened it is canceled", async () => {
    await digestNote();
    const first = (await t.a.post('/v1/events/trigger', { name: 'digest-note', to: 'ada', payload: { n: 0 } }).expect(201)).body.data.transactionId;
    const second = (await t.a.post('/v1/events/trigger', { name: 'digest-note', to: 'ada', payload: { n: 1 } }).expect(201)).body.data.transactionId;
    t.clock.advance(1_000);
    const runner = new JobRunner(t.deps, { random: () => 0.5 });
    // The digest closes and queues its in-app send, which a worker takes.
    await runner.runBatch();
    const claimed = await claimDueJobs(t.db, { owner: 'worker-a', now: t.clock.now(), leaseMs: 30_000, limit: 10 });
    expect(claimed.map((job) => job.type)).toEqual(['in_app']);
    expect(await cancelDuringInAppBatch(first, claimed)).toBe(true);
    await runner.runUntilIdle();
    // Sent once, for the other event only.
    const sent = await t.db('messages').whereIn('transaction_id', [first, second]).select('content', 'transaction_id');
    expect(sent).toEqual([{ content: '1,', transaction_id: second }]);
    expect((await notificationOf(first)).status).toBe('canceled');
    expect((await notificationOf(second)).status).toBe('completed');
  });

  it("sends a closed digest for its other events when the worker that closed it died before recording it and the opener's event was canceled", async () => {
    await digestNote();
    const ids: string[] = [];
    for (let n = 0; n < 3; n++) ids.push((await t.a.post('/v1/events/trigger', { name: 'digest-note', to: 'ada', payload: { n } }).expect(201)).body.data.transactionId);
    t.clock.advance(1_000);
    // worker-a closes the digest and marks its riders, then dies before recording it.
    const [leader] = await claimDueJobs(t.db, { owner: 'worker-a', now: t.clock.now(), leaseMs: 30_000, limit: 10 });
    expect(leader.type).toBe('digest');
    const event = (await findEvent(t.db, leader.eventId))!;
    const closed = (await closeHeldDigest(t.db, leader, 'worker-a', event.payload))!;
    await markRiders(t.db, closed.riders, t.clock.now());
    expect(await cancelEvent(t.deps, t.environments.a, ids[0])).toBe(true);
    t.clock.advance(31_000);
    const runner = new JobRunner(t.deps, { random: () => 0.5 });
    await runner.runUntilIdle();
    // The send goes out once, for the two other events, and every notification ends.
    const sent = await t.db('messages').whereIn('transaction_id', ids).select('content', 'transaction_id');
    expect(sent).toEqual([{ content: '1,2,', transaction_id: expect.any(String) }]);
    expect((await notificationOf(ids[0])).status).toBe('canceled');
    expect([(await notificationOf(ids[1])).status, (await notificationOf(ids[2])).status]).toEqual(['completed', 'completed']);
  });

  it('cancels, as any job of a canceled event, a digest step waiting to be skipped for its unmet condition: it opened no digest', async () => {
    await t.a.post('/v1/workflows', {
      name: 'Conditional digest',
      steps: [
        { type: 'digest', amount: 1, unit: 'seconds', conditions: [{ field: 'payload.x', operator: 'eq', value: 1 }] },
        { type: 'in_app', template: { content: 'x' } },
      ],
    }).expect(201);
    const { transactionId } = (await t.a.post('/v1/events/trigger', { name: 'conditional-digest', to: 'ada', payload: { x: 2 } }).expect(201)).body.data;
    // A worker has taken the job when the cancel comes: the cancel leaves it to the worker.
    const [claimed] = await claimDueJobs(t.db, { owner: 'worker-a', now: t.clock.now(), leaseMs: 30_000, limit: 10 });
    expect(claimed).toMatchObject({ type: 'digest', digestKey: null });
    expect(await cancelEvent(t.deps, t.environments.a, transactionId)).toBe(true);
    await executeJob({ deps: t.deps, owner: 'worker-a', random: () => 0.5 }, claimed);
    await new JobRunner(t.deps, { random: () => 0.5 }).runUntilIdle();
    const notification = await notificationOf(transactionId);
    expect(notification.status).toBe('canceled');
    const jobs = (await t.a.get(`/v1/notifications/${notification.notificationId}`).expect(200)).body.data.jobs;
    expect(jobs).toMatchObject([{ type: 'digest', status: 'canceled' }]);
    expect(await t.db('messages').where({ transaction_id: transactionId }).first()).toBeUndefined();
  });

  // A batch holds its in-app jobs, then their event, until it commits; a cancel that comes meanwhile waits, and finds them done.
  it.runIf(testDatabaseUrl() !== undefined)('answers false for an in-app job whose batch held its event first, once the batch has delivered it', async () => {
    await t.a.post('/v1/workflows', { name: 'Inbox note', steps: [{ type: 'in_app', template: { content: 'x' } }] }).expect(201);
    const { transactionId } = (await t.a.post('/v1/events/trigger', { name: 'inbox-note', to: 'ada' }).expect(201)).body.data;
    const [claimed] = await claimDueJobs(t.db, { owner: 'worker-a', now: t.clock.now(), leaseMs: 30_000, limit: 10 });
    let cancel: Promise<unknown> | undefined;
    // The batch's statements in its order (executeInAppBatch), the cancel arriving after the event is held.
    await t.db.transaction(async (trx) => {
      expect(await heldJobIds(trx, [claimed.id], 'worker-a')).toEqual(new Set([claimed.id]));
      expect((await findEvent(trx, claimed.eventId, true))?.canceledAt).toBeNull();
      cancel = t.a.delete(`/v1/events/trigger/${transactionId}`).then((res) => res.body);
      await blockedBy(trx);
      await finishInAppJobs(trx, [claimed.id], 'completed', t.clock.now());
    });
    expect(await cancel).toEqual({ data: false });
    expect((await t.db('events').where({ transaction_id: transactionId }).first('canceled_at')).canceled_at).toBeNull();
  });

  // A cancel waits for an event another batch holds; an in-app batch of the event takes its job
  // meanwhile, and holds the event too (a share lock, as the first holder's): it goes ahead.
  it.runIf(testDatabaseUrl() !== undefined)('lets an in-app batch that began while a cancel waited for its event deliver, and the cancel then answer false, without a deadlock', async () => {
    await t.a.post('/v1/workflows', { name: 'Inbox note', steps: [{ type: 'in_app', template: { content: 'x' } }] }).expect(201);
    const { transactionId } = (await t.a.post('/v1/events/trigger', { name: 'inbox-note', to: 'ada' }).expect(201)).body.data;
    const event = await t.db('events').where({ transaction_id: transactionId }).first('id');
    let cancel: Promise<unknown> | undefined;
    await t.db.transaction(async (trx) => {
      await findEvent(trx, event.id, true);
      cancel = t.a.delete(`/v1/events/trigger/${transactionId}`).then((res) => [res.status, res.body]);
      await blockedBy(trx);
      const claimed = await claimDueJobs(t.db, { owner: 'worker-a', now: t.clock.now(), leaseMs: 30_000, limit: 10 });
      await executeInAppBatch({ deps: t.deps, owner: 'worker-a', random: () => 0.5 }, claimed);
    });
    expect(await cancel).toEqual([200, { data: false }]);
    expect(await t.db('messages').where({ transaction_id: transactionId }).first()).toBeDefined();
    expect((await notificationOf(transactionId)).status).toBe('completed');
  });

  // PostgreSQL runs a cancel and a worker's last look side by side; SQLite writes one transaction at a time.
  it.runIf(testDatabaseUrl() !== undefined)("lets exactly one of a cancel and a send's last look pass the send gate, whichever locks the job first", async () => {
    await t.a.post('/v1/integrations', { providerId: 'slack' }).expect(201);
    await t.a.post('/v1/workflows', { name: 'Gate chat', steps: [{ type: 'chat', template: { content: 'x' } }] }).expect(201);
    await t.a.put('/v1/subscribers/ada/credentials', { providerId: 'slack', credentials: { webhookUrl: 'https://hooks.slack.com/services/T0/B0/X' } }).expect(200);
    for (const cancelFirst of [true, false]) {
      const { transactionId } = (await t.a.post('/v1/events/trigger', { name: 'gate-chat', to: 'ada' }).expect(201)).body.data;
      const event = await t.db('events').where({ transaction_id: transactionId }).first('id');
      const [claimed] = (await claimDueJobs(t.db, { owner: 'worker-a', now: t.clock.now(), leaseMs: 30_000, limit: 100 })).filter((job) => job.eventId === event.id);
      let settled = false;
      let passed: Promise<boolean> | undefined;
      const found = await t.db.transaction(async (trx) => {
        if (!cancelFirst) expect(await passSendGate(t.db, claimed.id, 'worker-a')).toBe(true);
        const result = await closeSendGates(trx, event.id);
        if (cancelFirst) {
          // The worker looks while the cancel holds the job: it waits for the cancel's commit.
          passed = passSendGate(t.db, claimed.id, 'worker-a').finally(() => (settled = true));
          await new Promise((resolve) => setTimeout(resolve, 200));
          expect(settled).toBe(false);
        }
        return result;
      });
      if (cancelFirst) {
        expect(found).toEqual({ sendsStopped: 1, sendingSteps: [] });
        expect(await passed).toBe(false);
      } else {
        expect(found).toEqual({ sendsStopped: 0, sendingSteps: [0] });
      }
    }
  });

  // A fan-out batch holds its event, then its job; a cancel locks sends only, and before the event.
  it.runIf(testDatabaseUrl() !== undefined)('cancels a topic event while a fan-out batch holds it, without a deadlock, answering true', async () => {
    await t.a.post('/v1/topics', { topicKey: 'everyone', name: 'Everyone' }).expect(201);
    await t.a.post('/v1/topics/everyone/subscribers', { subscribers: ['ada'] }).expect(200);
    const { transactionId } = (await t.a.post('/v1/events/trigger', { name: 'note', to: [{ type: 'Topic', topicKey: 'everyone' }] }).expect(201)).body.data;
    const event = await t.db('events').where({ transaction_id: transactionId }).first('id');
    const fanout = (await claimDueJobs(t.db, { owner: 'worker-a', now: t.clock.now(), leaseMs: 60_000, limit: 100 })).find((job) => job.eventId === event.id && job.kind === 'fanout')!;
    let cancel: Promise<unknown> | undefined;
    // A batch's first statement and its last, with the cancel arriving between them.
    await t.db.transaction(async (trx) => {
      await findEvent(trx, fanout.eventId, true);
      cancel = t.a.delete(`/v1/events/trigger/${transactionId}`).then((res) => [res.status, res.body]);
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect(await updateClaimedJob(trx, fanout.id, 'worker-a', { status: 'pending' }, t.clock.now())).toBe(true);
    });
    expect(await cancel).toEqual([200, { data: true }]);
  }, 20_000);

  // PostgreSQL runs a cancel and a claim side by side; SQLite writes one transaction at a time.
  it.runIf(testDatabaseUrl() !== undefined)('holds the jobs it cancels, so that a worker cannot claim one and send it after it was marked canceled', async () => {
    const { transactionId } = (await t.a.post('/v1/events/trigger', { name: 'note', to: 'ada' }).expect(201)).body.data;
    const event = await t.db('events').where({ transaction_id: transactionId }).first('id');
    await t.db.transaction(async (trx) => {
      expect(await cancelableJobs(trx, event.id)).toHaveLength(1);
      // Another worker claims while the cancel is under way: the job is the cancel's.
      expect(await claimDueJobs(t.db, { owner: 'worker-b', now: t.clock.now(), leaseMs: 30_000, limit: 10 })).toEqual([]);
    });
  });
});
