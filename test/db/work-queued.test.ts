// The job runner hears of work queued in this process once it is committed (db/work-queued.ts):
// never before the commit (its claim would not see it), never for a rollback, and once for a
// transaction, with every kind of work it queued.
import { describe, expect, it } from 'vitest';
import { useTestApp } from '../helpers/app.js';
import { createSubscriber, createTopic, createWorkflow, step } from '../helpers/factories.js';
import { writeTransaction } from '../../src/db/group-commit.js';
import { listenWorkQueued, tellWorkQueued, type QueuedWork } from '../../src/db/work-queued.js';

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
