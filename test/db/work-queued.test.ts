// The job runner hears of work queued in this process once it is committed (db/work-queued.ts):
// never before the commit (its claim would not see it), never for a rollback, and once for a
// transaction, with every kind of work it queued.
import { describe, expect, it } from 'vitest';
import { useTestApp } from '../helpers/app.js';
import { createSubscriber, createTopic, createWorkflow, step } from '../helpers/factories.js';
import { writeTransaction } from '../../src/db/group-commit.js';
import { listenWorkQueued, NOTIFY_GAP_MS, shareQueuedWork, tellWorkQueued, type QueuedWork } from '../../src/db/work-queued.js';
import { createDb } from '../../src/db/knex.js';
import { createTestDb, testDatabaseUrl } from '../helpers/db.js';

const t = useTestApp();

const settled = () => new Promise((resolve) => setTimeout(resolve, 20));

describe('the work-queued signal', () => {
  it('tells after the commit, once a transaction with all it queued, never for a rollback, and at once outside a transaction', async () => {
    const heard: QueuedWork[][] = [];
    const stop = listenWorkQueued(t.db, (work) => heard.push([...work].sort()));
    try {
      let heardInside = -1;
      await writeTransaction(t.db, async (trx) => {
        tellWorkQueued(trx, 'in_app');
        await trx.transaction(async (nested) => tellWorkQueued(nested, 'webhooks'));
        tellWorkQueued(trx, 'in_app');
        heardInside = heard.length;
      });
      await settled();
      expect(heardInside).toBe(0);
      expect(heard).toEqual([['in_app', 'webhooks']]);

      await expect(
        writeTransaction(t.db, async (trx) => {
          tellWorkQueued(trx, 'send');
          throw new Error('rolled back');
        }),
      ).rejects.toThrow('rolled back');
      await settled();
      expect(heard).toHaveLength(1);

      tellWorkQueued(t.db, 'control');
      expect(heard).toEqual([['in_app', 'webhooks'], ['control']]);
    } finally {
      stop();
    }
    tellWorkQueued(t.db, 'send');
    expect(heard).toHaveLength(2);
  });

  it('is heard only through the database handle that committed it: two apps in one process wake only their own runners', async () => {
    const other = await createTestDb();
    const heardHere: QueuedWork[][] = [];
    const heardThere: QueuedWork[][] = [];
    const stopHere = listenWorkQueued(t.db, (work) => heardHere.push([...work]));
    const stopThere = listenWorkQueued(other.db, (work) => heardThere.push([...work]));
    try {
      await writeTransaction(other.db, async (trx) => tellWorkQueued(trx, 'send'));
      await writeTransaction(t.db, async (trx) => tellWorkQueued(trx, 'in_app'));
      await settled();
      expect(heardHere).toEqual([['in_app']]);
      expect(heardThere).toEqual([['send']]);
    } finally {
      stopHere();
      stopThere();
      await other.close();
    }
  });

  it('says what a trigger queued for now, each lane alone: the loops that have nothing to claim are not woken', async () => {
    await createSubscriber(t.a, { subscriberId: 'ada' });
    await createWorkflow(t.a, { workflowId: 'feed', steps: [step.inApp()] });
    await createWorkflow(t.a, { workflowId: 'mail', steps: [step.email()] });
    await createWorkflow(t.a, { workflowId: 'later', steps: [step.delay(1), step.inApp()] });
    await createTopic(t.a, { topicKey: 'everyone' }, ['ada']);
    const heard: QueuedWork[][] = [];
    const stop = listenWorkQueued(t.db, (work) => heard.push([...work].sort()));
    try {
      for (const name of ['feed', 'mail', 'later']) {
        await t.a.post('/v1/events/trigger', { name, to: 'ada' }).expect(201);
        await settled();
      }
      await t.a.post('/v1/events/trigger', { name: 'feed', to: { type: 'Topic', topicKey: 'everyone' } }).expect(201);
      await settled();
    } finally {
      stop();
    }
    // The delayed step is due in a minute: its loop finds it by then, unwoken. The topic's fan-out is a control step.
    expect(heard).toEqual([['in_app'], ['send'], ['control']]);
  });
});

describe.runIf(testDatabaseUrl())('between processes on PostgreSQL', () => {
  it('an API-only process announces what it queued once committed, at most once a gap, and a runner process hears it', async () => {
    // Another process: a database handle of its own, with a runner's listener on it.
    const other = createDb(t.testDb.url, { schema: t.testDb.schema });
    const heard: QueuedWork[][] = [];
    const errors: unknown[] = [];
    const stop = listenWorkQueued(other, (work) => heard.push([...work].sort()));
    const hearing = shareQueuedWork(other, 'hear', (err) => errors.push(err));
    const announcing = shareQueuedWork(t.db, 'announce', (err) => errors.push(err));
    const heardAll = (kinds: QueuedWork[]) => heard.some((work) => kinds.every((kind) => work.includes(kind)));
    try {
      // Once it listens, every loop is woken: whatever was queued before is to be looked for.
      await expect.poll(() => heardAll(['control', 'in_app', 'send', 'webhooks']), { timeout: 5000 }).toBe(true);
      heard.length = 0;
      await writeTransaction(t.db, async (trx) => {
        tellWorkQueued(trx, 'send');
        tellWorkQueued(trx, 'control');
      });
      await expect.poll(() => heardAll(['control', 'send']), { timeout: 5000 }).toBe(true);

      // A burst of commits: announced together, one NOTIFY a gap at most.
      await settled();
      heard.length = 0;
      const started = Date.now();
      for (let i = 0; i < 40; i++) await writeTransaction(t.db, async (trx) => tellWorkQueued(trx, 'webhooks'));
      const elapsed = Date.now() - started;
      await expect.poll(() => heardAll(['webhooks']), { timeout: 5000 }).toBe(true);
      await new Promise((resolve) => setTimeout(resolve, 2 * NOTIFY_GAP_MS));
      expect(heard.filter((work) => work.includes('webhooks')).length).toBeLessThanOrEqual(Math.floor(elapsed / NOTIFY_GAP_MS) + 2);
      expect(errors).toEqual([]);
    } finally {
      stop();
      await announcing.close();
      await hearing.close();
      await other.destroy();
    }
  });
});
