// A fan-out's batches and its claim. Run from a runner's control loop (`loop` in its context), a
// fan-out with no other control step due goes on from batch to batch without being claimed again;
// with one due, or its runner stopping, it hands its job back after the batch under way, and
// whoever takes it next goes on from there. In-app work due does not stop it: another loop takes that.
import { afterEach, describe, expect, it, vi } from 'vitest';
import { useTestApp } from '../helpers/app.js';
import { createWorkflow, step } from '../helpers/factories.js';
import { insertSubscriber } from '../../src/db/repos/subscribers.js';
import { claimDueJobs, releaseJobs, type JobRecord } from '../../src/db/repos/jobs.js';
import { FANOUT_BATCH_SIZE, fanoutSliceSize } from '../../src/db/repos/topics.js';
import { writeTransaction } from '../../src/db/group-commit.js';
import { fanoutShards } from '../../src/db/fanout-shards.js';
import { executeJob } from '../../src/engine/execute.js';
import { cancelEvent } from '../../src/engine/cancel.js';
import type { Knex } from 'knex';
import { JobRunner } from '../../src/engine/runner.js';
import type { WorkerContext } from '../../src/engine/worker-context.js';
import { systemClock } from '../../src/clock.js';
import { testDatabaseUrl } from '../helpers/db.js';
import { countTurns } from '../helpers/turns.js';
import { findEventByTransaction } from '../../src/db/repos/events.js';
import { startWithInApp } from '../../src/engine/in-app-batch.js';

const t = useTestApp();
const OWNER = 'fan-out-worker';
// Claims are not scoped to an environment: a job a test leaves due would be claimed by the next.
afterEach(async () => {
  await t.db('jobs').whereIn('status', ['pending', 'queued', 'delayed', 'running']).update({ status: 'canceled', lease_owner: null, lease_expires_at: null });
});

/** A topic whose fan-out takes `batches` batches a job (on PostgreSQL, a job a shard), an in-app workflow, and the fan-out triggered. */
async function fanout(batches = 3): Promise<{ members: number; transactionId: string }> {
  const members = batches * FANOUT_BATCH_SIZE * fanoutShards(t.db).length;
  const now = t.clock.now();
  const ids = Array.from({ length: members }, (_, i) => `member-${String(i).padStart(5, '0')}`);
  for (const subscriberId of ids) await insertSubscriber(t.db, t.environments.a, { subscriberId }, now);
  await t.a.post('/v1/topics', { topicKey: 'everyone', name: 'Everyone' }).expect(201);
  for (let i = 0; i < ids.length; i += 1000) await t.a.post('/v1/topics/everyone/subscribers', { subscribers: ids.slice(i, i + 1000) }).expect(200);
  await createWorkflow(t.a, { workflowId: 'broadcast', steps: [step.inApp({ content: 'hello' })] });
  const transactionId = (await t.a.post('/v1/events/trigger', { name: 'broadcast', to: [{ type: 'Topic', topicKey: 'everyone' }] }).expect(201)).body.data
    .transactionId as string;
  return { members, transactionId };
}

/** The same, its jobs claimed by OWNER. */
async function claimedFanout(): Promise<{ members: number; transactionId: string; jobs: JobRecord[] }> {
  const triggered = await fanout();
  const jobs = await claimDueJobs(t.db, { owner: OWNER, now: t.clock.now(), leaseMs: 60_000, limit: 10 });
  expect(jobs.map((job) => job.kind)).toEqual(fanoutShards(t.db).map(() => 'fanout'));
  return { ...triggered, jobs };
}

async function triggerTo(subscriberId: string, workflowId: string): Promise<void> {
  await t.a.post('/v1/subscribers', { subscriberId }).expect(201);
  await t.a.post('/v1/events/trigger', { name: workflowId, to: subscriberId }).expect(201);
}

function loopContext(taking: () => boolean): WorkerContext {
  return { deps: t.deps, owner: OWNER, random: () => 0.5, loop: { leaseMs: 60_000, taking } };
}

async function messagesOf(transactionId: string): Promise<number> {
  const row = await t.db('messages').where({ transaction_id: transactionId }).countDistinct({ n: 'subscriber_id' }).first();
  return Number(row!.n);
}

/** Gives back the claims of the jobs a test did not run (on PostgreSQL, the other shard's), then runs everything due. */
async function runTheRest(jobs: JobRecord[]): Promise<void> {
  await releaseJobs(t.db, jobs.slice(1).map((job) => job.id), OWNER, t.clock.now());
  await new JobRunner(t.deps, { random: () => 0.5 }).runUntilIdle();
}

async function jobOf(id: string): Promise<{ status: string; attempts: number; lease_owner: string | null }> {
  return t.db('jobs').where({ id }).first('status', 'attempts', 'lease_owner');
}

describe('a fan-out and its claim', () => {
  it.each([
    { why: 'nothing else is due', meanwhile: async () => undefined },
    { why: 'only in-app work is due', meanwhile: () => triggerTo('someone-else', 'broadcast') },
  ])('goes on from batch to batch under one claim when $why', async ({ meanwhile }) => {
    const { members, transactionId, jobs } = await claimedFanout();
    await meanwhile();
    for (const job of jobs) await executeJob(loopContext(() => true), job);
    expect(await messagesOf(transactionId)).toBe(members);
    for (const job of jobs) expect(await jobOf(job.id)).toEqual({ status: 'completed', attempts: 1, lease_owner: null });
  });

  it('runs one batch a claim without the loop (runBatch, tools)', async () => {
    const { transactionId, jobs } = await claimedFanout();
    await executeJob({ deps: t.deps, owner: OWNER, random: () => 0.5 }, jobs[0]);
    expect(await messagesOf(transactionId)).toBe(FANOUT_BATCH_SIZE);
    expect(await jobOf(jobs[0].id)).toMatchObject({ status: 'pending', lease_owner: null });
  });

  it('ends its batch after the slice under way when another writer waits, whose write commits next', async () => {
    const { transactionId, jobs } = await claimedFanout();
    // Another request's write, queued as the batch's transaction begins: it waits for the connection.
    let written: Promise<unknown> | undefined;
    const db = new Proxy(t.db, {
      get(target, prop, receiver) {
        if (prop !== 'transaction') return Reflect.get(target, prop, receiver);
        return (work: (trx: Knex.Transaction) => Promise<unknown>) =>
          target.transaction((trx) => {
            written ??= writeTransaction(target, (other) => other('subscribers').where({ subscriber_id: 'member-00000' }).update({ first_name: 'Ada' }));
            return work(trx);
          });
      },
    });
    await executeJob({ deps: { ...t.deps, db }, owner: OWNER, random: () => 0.5 }, jobs[0]);
    await written;
    // SQLite gives the loop back between slices of a batch and ends it there; PostgreSQL's batch is one slice.
    expect(await messagesOf(transactionId)).toBe(fanoutSliceSize(t.db));
    expect(await jobOf(jobs[0].id)).toMatchObject({ status: 'pending', lease_owner: null });
    expect(await t.db('subscribers').where({ subscriber_id: 'member-00000' }).first('first_name')).toEqual({ first_name: 'Ada' });
    await runTheRest(jobs);
    expect(await messagesOf(transactionId)).toBe(FANOUT_BATCH_SIZE * 3 * fanoutShards(t.db).length);
  });

  it.each([
    {
      why: 'another control step is due',
      taking: () => true,
      meanwhile: async () => {
        await createWorkflow(t.a, { workflowId: 'later', steps: [step.delay(1, 'seconds'), step.inApp({ content: 'later' })] });
        await triggerTo('someone-else', 'later');
        t.clock.advance(2_000);
      },
    },
    { why: 'its loop takes no more work', taking: () => false, meanwhile: async () => undefined },
  ])('hands its job back after its batch when $why, and the next claim goes on from there', async ({ taking, meanwhile }) => {
    const { members, transactionId, jobs } = await claimedFanout();
    await meanwhile();
    await executeJob(loopContext(taking), jobs[0]);
    expect(await messagesOf(transactionId)).toBe(FANOUT_BATCH_SIZE);
    expect(await jobOf(jobs[0].id)).toEqual({ status: 'pending', attempts: 1, lease_owner: null });
    await runTheRest(jobs);
    expect(await messagesOf(transactionId)).toBe(members);
  });

  it('hands its job back after its batch when other work came due while that batch ran', async () => {
    const { transactionId, jobs } = await claimedFanout();
    const batchStart = t.clock.now();
    await createWorkflow(t.a, { workflowId: 'later', steps: [step.delay(1, 'seconds'), step.inApp({ content: 'later' })] });
    await triggerTo('someone-else', 'later');
    t.clock.advance(2_000);
    // The batch starts before that delay is due and ends after.
    let reads = 0;
    const clock = { now: () => (reads++ === 0 ? batchStart : t.clock.now()) };
    await executeJob({ ...loopContext(() => true), deps: { ...t.deps, clock } }, jobs[0]);
    expect(await messagesOf(transactionId)).toBe(FANOUT_BATCH_SIZE);
    expect(await jobOf(jobs[0].id)).toEqual({ status: 'pending', attempts: 1, lease_owner: null });
  });

  it('ends without a batch when its event is canceled while its job is taken, and says so', async () => {
    const { transactionId, jobs } = await claimedFanout();
    // The job is running: the cancel leaves it to its worker, and answers that it will stop.
    expect((await t.a.delete(`/v1/events/trigger/${transactionId}`).expect(200)).body).toEqual({ data: true });
    await executeJob(loopContext(() => true), jobs[0]);
    expect(await messagesOf(transactionId)).toBe(0);
    expect(await jobOf(jobs[0].id)).toEqual({ status: 'canceled', attempts: 1, lease_owner: null });
    expect(await t.db('execution_details').where({ job_id: jobs[0].id }).select('status', 'detail')).toEqual([
      { status: 'warning', detail: `Canceled with event ${transactionId}` },
    ]);
  });

  it('stops at the batch after its event is canceled while it keeps its claim, and says so', async () => {
    const { transactionId, jobs } = await claimedFanout();
    // The cancel starts during the first batch (when the fan-out asks its loop whether to go on) and
    // the next batch's transaction waits for it: the cancel lands between two batches of one claim.
    let canceled: Promise<boolean> | undefined;
    const taking = () => {
      canceled ??= cancelEvent(t.deps, t.environments.a, transactionId);
      return true;
    };
    const db = new Proxy(t.db, {
      get(target, prop, receiver) {
        if (prop !== 'transaction') return Reflect.get(target, prop, receiver);
        return async (work: (trx: Knex.Transaction) => Promise<unknown>) => {
          if (canceled) await canceled;
          return target.transaction(work);
        };
      },
    });
    await executeJob({ ...loopContext(taking), deps: { ...t.deps, db } }, jobs[0]);
    // The job was running: the cancel left it to its worker and answered that it would stop.
    expect(await canceled).toBe(true);
    expect(await messagesOf(transactionId)).toBe(FANOUT_BATCH_SIZE);
    expect(await jobOf(jobs[0].id)).toEqual({ status: 'canceled', attempts: 1, lease_owner: null });
    expect(await t.db('execution_details').where({ job_id: jobs[0].id }).select('status', 'detail')).toEqual([
      { status: 'warning', detail: `Canceled with event ${transactionId}` },
    ]);
    await runTheRest(jobs);
    expect(await messagesOf(transactionId)).toBe(FANOUT_BATCH_SIZE);
    const fanouts = await t.db('jobs').where({ kind: 'fanout', environment_id: t.environments.a }).pluck('status');
    expect(fanouts).toEqual(fanouts.map(() => 'canceled'));
  });

  // PostgreSQL only: on SQLite a batch that waits for a lock holds the one writer everyone needs.
  it.runIf(testDatabaseUrl())('does not hold up in-app work: a runner delivers it while a fan-out batch waits', async () => {
    const { members, transactionId } = await fanout(1);
    await t.a.post('/v1/subscribers', { subscriberId: 'someone-else' }).expect(201);
    // Another connection holds the fan-out's event: each batch waits at its first statement.
    const held = await t.db.transaction();
    await held('events').where({ transaction_id: transactionId }).forUpdate().first('id');
    const runner = new JobRunner({ ...t.deps, clock: systemClock }, { random: () => 0.5 });
    runner.start();
    try {
      try {
        const shards = fanoutShards(t.db).length;
        await vi.waitFor(async () => expect(await t.db('jobs').where({ kind: 'fanout', status: 'running' }).pluck('id')).toHaveLength(shards), { timeout: 5_000, interval: 5 });
        const other = (await t.a.post('/v1/events/trigger', { name: 'broadcast', to: 'someone-else' }).expect(201)).body.data.transactionId as string;
        await vi.waitFor(async () => expect(await messagesOf(other)).toBe(1), { timeout: 5_000, interval: 5 });
        expect(await messagesOf(transactionId)).toBe(0);
      } finally {
        await held.rollback();
      }
      await vi.waitFor(async () => expect(await messagesOf(transactionId)).toBe(members), { timeout: 10_000, interval: 10 });
    } finally {
      await runner.stop();
    }
  });

  it('is handed back by a runner that stops midway, and another worker finishes it, no member twice', async () => {
    const { members, transactionId } = await fanout(6);
    // On real time: the test's clock stamped the jobs in the past, so they are due.
    const runner = new JobRunner({ ...t.deps, clock: systemClock }, { random: () => 0.5 });
    runner.start();
    await vi.waitFor(async () => expect(await messagesOf(transactionId)).toBeGreaterThan(0), { timeout: 10_000, interval: 5 });
    await runner.stop();
    const fanouts = await t.db('jobs').where({ kind: 'fanout', environment_id: t.environments.a }).select('status', 'lease_owner');
    expect(fanouts.map((job) => job.lease_owner)).toEqual(fanouts.map(() => null));
    expect(fanouts.some((job) => job.status === 'pending')).toBe(true);
    expect(await messagesOf(transactionId)).toBeLessThan(members);
    await new JobRunner({ ...t.deps, clock: systemClock }, { random: () => 0.5 }).runUntilIdle();
    expect(await messagesOf(transactionId)).toBe(members);
    const total = await t.db('messages').where({ transaction_id: transactionId }).count({ n: '*' }).first();
    expect(Number(total!.n)).toBe(members);
  });
});

describe('a slice of a fan-out that starts in-app', () => {
  // On SQLite a slice's statements run on the event loop, so the slice would hold it from its
  // first read to its last write; PostgreSQL's wait for their answers, and the loop turns anyway.
  it.skipIf(testDatabaseUrl())('lets the event loop turn between deciding its members and writing their notifications', async () => {
    const now = t.clock.now();
    for (const subscriberId of ['ada', 'bob']) await insertSubscriber(t.db, t.environments.a, { subscriberId }, now);
    await t.a.post('/v1/topics', { topicKey: 'pair', name: 'Pair' }).expect(201);
    await t.a.post('/v1/topics/pair/subscribers', { subscribers: ['ada', 'bob'] }).expect(200);
    await createWorkflow(t.a, { workflowId: 'note', steps: [step.inApp({ content: 'Hello {{subscriber.subscriberId}}' })] });
    const transactionId = (await t.a.post('/v1/events/trigger', { name: 'note', to: [{ type: 'Topic', topicKey: 'pair' }] }).expect(201)).body.data.transactionId as string;
    const event = (await findEventByTransaction(t.db, t.environments.a, transactionId))!;
    const slice = await t.db('subscribers').where({ environment_id: t.environments.a }).orderBy('subscriber_id').select('id as key', 'subscriber_id as subscriberId');
    let turns = 0;
    await t.db.transaction(async (trx) => {
      const counting = countTurns();
      expect(await startWithInApp(trx, event, slice, now)).toMatchObject({ taken: 2 });
      turns = counting.stop();
    });
    expect(turns).toBeGreaterThanOrEqual(1);
    expect(await messagesOf(transactionId)).toBe(2);
  });
});
