// Events share one stored copy of each version of their workflow (migration 20261208_01): a trigger
// stores it once, later triggers name it, an edit makes another, events written before keep their
// own copy, and retention removes a copy only once no event uses it and no trigger has for long.
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.js';
import { createSubscriber, createWorkflow, step } from '../helpers/factories.js';
import { JobRunner } from '../../src/engine/runner.js';
import { sweepExpired } from '../../src/engine/retention.js';
import { findEvent, findEventByTransaction } from '../../src/db/repos/events.js';
import { deleteUnusedSnapshots, storeWorkflowSnapshot } from '../../src/db/repos/workflow-snapshots.js';
import { testDatabaseUrl } from '../helpers/db.js';
import { insertRows } from '../../src/db/insert-rows.js';
import { newId } from '../../src/ids.js';
import * as workflowSnapshotsMigration from '../../src/db/migrations/20261208_01_workflow_snapshots.js';

const HOUR = 3_600_000;
const DAY = 24 * HOUR;

let t: TestApp;
let worker: JobRunner;
beforeAll(async () => {
  t = await startTestApp({ config: { retentionDays: 30 } });
  worker = new JobRunner(t.deps, { random: () => 0.5 });
});
beforeEach(async () => {
  await t.renew();
  await createSubscriber(t.a, { subscriberId: 'ada' });
});
afterEach(async () => t.assertContract());
afterAll(async () => t?.close());

const snapshots = () => t.db('workflow_snapshots').where({ environment_id: t.environments.a }).orderBy('used_at');
const trigger = async (name: string, body: Record<string, unknown> = {}) =>
  (await t.a.post('/v1/events/trigger', { name, to: 'ada', ...body }).expect(201)).body.data.transactionId as string;
const eventOf = async (transactionId: string) => (await findEventByTransaction(t.db, t.environments.a, transactionId))!;
const feed = async () => (await t.a.get('/v1/subscribers/ada/messages?limit=100').expect(200)).body.data as Array<{ content: string }>;

describe('workflow snapshots', () => {
  it('stores a workflow once for the events that trigger it, and again after an edit; each event runs the steps it was triggered with', async () => {
    const { workflowId, _id } = await createWorkflow(t.a, { steps: [step.inApp({ content: 'first' })] });
    const before = [await trigger(workflowId), await trigger(workflowId, { to: [{ subscriberId: 'ada' }] })];
    expect(await snapshots()).toHaveLength(1);
    await t.a.put(`/v1/workflows/${_id}`, { steps: [step.inApp({ content: 'second' })] }).expect(200);
    const after = await trigger(workflowId);
    expect(await snapshots()).toHaveLength(2);

    const rows = await t.db('events').where({ environment_id: t.environments.a }).select('transaction_id', 'workflow', 'workflow_snapshot');
    expect(rows.map((row) => row.workflow)).toEqual(['', '', '']);
    const named = new Map(rows.map((row) => [row.transaction_id, row.workflow_snapshot]));
    expect(named.get(before[0])).toBe(named.get(before[1]));
    expect(named.get(after)).not.toBe(named.get(before[0]));
    expect((await eventOf(before[0])).workflow.steps).toMatchObject([{ type: 'in_app', template: { content: 'first' } }]);
    expect((await eventOf(after)).workflow).toMatchObject({ workflowId, steps: [{ template: { content: 'second' } }] });

    await worker.runUntilIdle();
    expect((await feed()).map((item) => item.content).sort()).toEqual(['first', 'first', 'second']);
  });

  it('reads an event written before snapshots, with its own copy, as before', async () => {
    const { workflowId } = await createWorkflow(t.a, { steps: [step.inApp({ content: 'kept' })] });
    const transactionId = await trigger(workflowId);
    const event = await eventOf(transactionId);
    // The row as it was written before: the workflow in the event itself, no snapshot named.
    const id = newId();
    await insertRows(t.db, 'events', [
      { id, environment_id: t.environments.a, transaction_id: 'written-before', workflow_key: workflowId, workflow: JSON.stringify(event.workflow), payload: '{}', overrides: '{}', created_at: event.createdAt },
    ]);
    expect((await findEvent(t.db, id))!.workflow).toEqual(event.workflow);
    expect((await eventOf('written-before')).workflow).toEqual(event.workflow);
  });

  it('writes a snapshot again only after an hour, moving when it was last used', async () => {
    const { workflowId } = await createWorkflow(t.a, { steps: [step.inApp({ content: 'hi' })] });
    const start = t.clock.now().toISOString();
    await trigger(workflowId);
    t.clock.advance(HOUR / 2);
    await trigger(workflowId);
    expect((await snapshots()).map((row) => row.used_at)).toEqual([start]);
    t.clock.advance(HOUR / 2 + 1);
    await trigger(workflowId);
    expect((await snapshots()).map((row) => row.used_at)).toEqual([t.clock.now().toISOString()]);
  });

  it('does not take a snapshot written in a transaction that rolled back for stored', async () => {
    const body = JSON.stringify({ id: 'w', workflowId: 'rolled-back', name: 'Rolled back', critical: false, preferenceSettings: {}, steps: [] });
    const now = t.clock.now();
    await t.db
      .transaction(async (trx) => {
        await storeWorkflowSnapshot(trx, t.environments.a, 'rolled-back', body, now);
        throw new Error('roll back');
      })
      .catch(() => undefined);
    expect(await snapshots()).toHaveLength(0);
    await storeWorkflowSnapshot(t.db, t.environments.a, 'rolled-back', body, now);
    expect(await snapshots()).toHaveLength(1);
  });

  it('is removed by retention once no event uses it and no trigger has for a day past the retention; not while a kept event uses it', async () => {
    const { workflowId: unused } = await createWorkflow(t.a, { steps: [step.inApp({ content: 'gone' })] });
    const { workflowId: waiting } = await createWorkflow(t.a, { steps: [step.delay(90, 'days'), step.inApp({ content: 'later' })] });
    await trigger(unused);
    await trigger(waiting);
    await worker.runUntilIdle();
    expect(await snapshots()).toHaveLength(2);

    // Past the retention, but not a day past it: the events go, both copies stay.
    t.clock.advance(30 * DAY + HOUR);
    expect(await sweepExpired(t.deps)).toMatchObject({ failed: [] });
    expect(await t.db('events').where({ environment_id: t.environments.a })).toHaveLength(1);
    expect(await snapshots()).toHaveLength(2);

    // A day later the unused copy goes; the one the pending delay's event names stays.
    t.clock.advance(DAY);
    // (The other tests' environments, swept too, have theirs removed as well.)
    expect(await sweepExpired(t.deps)).toMatchObject({ workflowSnapshots: expect.any(Number), failed: [] });
    const left = await snapshots();
    expect(left).toHaveLength(1);
    expect(JSON.parse(left[0].body)).toMatchObject({ workflowId: waiting });
    // And the delay, when it ends, still runs its event's workflow.
    t.clock.advance(60 * DAY);
    await worker.runUntilIdle();
    expect((await feed()).map((item) => item.content)).toEqual(['later']);
  });
});

describe('workflow snapshots and Idempotency-Key', () => {
  it('does not take a snapshot stored by a keyed trigger that was rejected (its savepoint rolled back, the key\'s answer committed) for stored', async () => {
    const { workflowId: first } = await createWorkflow(t.a, { steps: [step.inApp({ content: 'first' })] });
    const { workflowId: second } = await createWorkflow(t.a, { steps: [step.inApp({ content: 'second' })] });
    await trigger(first, { transactionId: 'taken' });
    // Its transactionId is taken: a 409, recorded as the key's answer; the operation's writes, the snapshot among them, are undone.
    await t.a.post('/v1/events/trigger', { name: second, to: 'ada', transactionId: 'taken' }).set('Idempotency-Key', 'rejected-trigger').expect(409);
    const transactionId = await trigger(second);
    expect((await eventOf(transactionId)).workflow).toMatchObject({ workflowId: second });
    await worker.runUntilIdle();
    expect((await feed()).map((item) => item.content).sort()).toEqual(['first', 'second']);
  });
});

describe('workflow snapshots: retention against a trigger', () => {
  it.runIf(testDatabaseUrl())('keeps a snapshot whose used_at a trigger moves while retention deletes it (PostgreSQL: the DELETE waits for the row, then reads it again)', async () => {
    const body = JSON.stringify({ id: 'w', workflowId: 'raced', name: 'Raced', critical: false, preferenceSettings: {}, steps: [] });
    const old = new Date(t.clock.now().getTime() - 60 * DAY);
    await t.db('workflow_snapshots').insert({ environment_id: t.environments.a, digest: 'raced', body, used_at: old.toISOString() });
    let deleting: Promise<number> | undefined;
    await t.db.transaction(async (trx) => {
      // The trigger's write, not yet committed, holds the row; retention's DELETE starts meanwhile.
      await storeWorkflowSnapshot(trx, t.environments.a, 'raced', body, t.clock.now());
      deleting = deleteUnusedSnapshots(t.db, t.environments.a, new Date(t.clock.now().getTime() - 30 * DAY), 10);
      await new Promise((resolve) => setTimeout(resolve, 200));
    });
    expect(await deleting).toBe(0);
    expect(await t.db('workflow_snapshots').where({ environment_id: t.environments.a, digest: 'raced' })).toHaveLength(1);
  });
});

// Last in the file: it takes the table away and back.
describe('the migration', () => {
  it('migrating down gives each event its copy back', async () => {
    const { workflowId } = await createWorkflow(t.a, { steps: [step.inApp({ content: 'down' })] });
    const transactionId = await trigger(workflowId);
    await workflowSnapshotsMigration.down(t.db);
    const [row] = await t.db('events').where({ environment_id: t.environments.a, transaction_id: transactionId });
    expect(JSON.parse(row.workflow)).toMatchObject({ workflowId, steps: [{ template: { content: 'down' } }] });
    await workflowSnapshotsMigration.up(t.db);
    expect((await eventOf(transactionId)).workflow).toMatchObject({ workflowId });
  });
});
