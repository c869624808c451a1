import { beforeEach, describe, expect, it } from 'vitest';
import { useTestApp } from '../helpers/app.js';
import { createWorkflow } from '../helpers/factories.js';
import { JobRunner } from '../../src/engine/runner.js';
import { testDatabaseUrl } from '../helpers/db.js';
import { countStatements, recordQueries } from '../helpers/queries.js';
import { insertNewEventAmongOthers } from '../../src/db/new-events.js';
import { isForeignKeyViolation } from '../../src/db/errors.js';
import { notificationRow } from '../../src/db/repos/notifications.js';
import type { WorkflowSnapshot } from '../../src/db/repos/events.js';
import { storedEventRow } from '../helpers/events.js';
import { jobRow } from '../../src/db/repos/jobs.js';
import { newId } from '../../src/ids.js';

const t = useTestApp();
// Made again before each test, in its fresh organizations.
beforeEach(async () => {
  await t.a.post('/v1/subscribers', { subscriberId: 'ada', firstName: 'Ada' }).expect(201);
  await t.a.post('/v1/topics', { topicKey: 'team', name: 'Team' }).expect(201);
  await t.a
    .post('/v1/workflows', {
      name: 'Welcome',
      steps: [{ type: 'in_app', template: { content: 'Hi {{actor.firstName}}' } }],
      payloadSchema: { type: 'object', required: ['plan'], properties: { plan: { enum: ['free', 'pro'] } } },
    })
    .expect(201);
});
beforeEach(() => t.clock.advance(1000));

const count = async (table: string) => Number((await t.db(table).count({ n: '*' }).first())!.n);

describe('POST /events/trigger (triggerEvent)', () => {
  it('accepts a trigger and commits its notification and first job before answering', async () => {
    const res = await t.a.post('/v1/events/trigger', { name: 'welcome', to: 'ada', payload: { plan: 'pro' } }).expect(201);
    expect(res.body.data).toEqual({ acknowledged: true, status: 'processed', transactionId: expect.stringMatching(/^[0-9a-f-]{36}$/) });
    const notifications = await t.db('notifications').where({ transaction_id: res.body.data.transactionId });
    expect(notifications).toHaveLength(1);
    expect(await t.db('jobs').where({ notification_id: notifications[0].id, status: 'pending' })).toHaveLength(1);
  });

  it('writes triggers that arrive together each with its rows, and takes a transactionId given twice once', async () => {
    // A bulk request's events reach their write together (handlers/events.ts checks 25 at once).
    const events = Array.from({ length: 30 }, (_, i) => ({ name: 'welcome', to: 'ada', payload: { plan: 'pro' }, transactionId: i < 3 ? 'together-shared' : `together-${i}` }));
    const recording = recordQueries(t.db, /INSERT INTO "events"/i);
    const res = await t.a.post('/v1/events/trigger/bulk', { events }).expect(201);
    const statements = recording.stop();
    expect(res.body.data.map((result: { status: string }) => result.status)).toEqual(events.map((_, i) => (i === 1 || i === 2 ? 'error' : 'processed')));
    expect(res.body.data[1].error).toEqual(['transactionId together-shared was already used in this environment']);
    for (const transactionId of new Set(events.map((event) => event.transactionId))) {
      expect(await t.db('events').where({ transaction_id: transactionId })).toHaveLength(1);
      const notifications = await t.db('notifications').where({ transaction_id: transactionId });
      expect(notifications).toHaveLength(1);
      expect(await t.db('jobs').where({ notification_id: notifications[0].id })).toHaveLength(1);
    }
    // PostgreSQL writes them in a few statements rather than one each (db/new-events.ts).
    if (testDatabaseUrl()) expect(statements.length).toBeGreaterThan(0);
    if (testDatabaseUrl()) expect(statements.length).toBeLessThanOrEqual(events.length / 3);
  });

  it.runIf(testDatabaseUrl())('writes each event on its own when their shared statement fails, so that only the one at fault fails', async () => {
    const now = new Date();
    const rowsOf = async (transactionId: string, environmentOfJob: string) => {
      const workflow = { id: 'w', workflowId: 'welcome', name: 'Welcome', critical: false, preferenceSettings: { in_app: true, email: true, sms: true, chat: true, push: true }, steps: [] } satisfies WorkflowSnapshot;
      const event = await storedEventRow(t.db, { id: newId(now.getTime()), environmentId: t.environments.a, transactionId, workflow, payload: {}, overrides: {}, createdAt: now.toISOString() });
      const eventId = event.id as string;
      const notification = notificationRow({ environmentId: t.environments.a, eventId, transactionId, workflowKey: 'welcome', subscriberKey: 'k', subscriberId: 'ada', channels: [] }, now);
      const job = jobRow({ environmentId: environmentOfJob, eventId, notificationId: notification.id as string, kind: 'step', type: 'in_app', status: 'pending', runAt: now }, now);
      return { event, notifications: [notification], jobs: [job] };
    };
    const rows = await Promise.all(['alone-1', 'alone-2', 'alone-3'].map((tx) => rowsOf(tx, tx === 'alone-2' ? 'no-such-environment' : t.environments.a)));
    // In one turn, so that they share a statement.
    const writes = rows.map((row) => insertNewEventAmongOthers(t.db, row));
    const outcomes = await Promise.allSettled(writes);
    expect(outcomes.map((outcome) => outcome.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
    expect(isForeignKeyViolation((outcomes[1] as PromiseRejectedResult).reason)).toBe(true);
    expect((await t.db('events').whereIn('transaction_id', ['alone-1', 'alone-2', 'alone-3']).orderBy('transaction_id')).map((row) => row.transaction_id)).toEqual(['alone-1', 'alone-3']);

    // An event written alone that fails is not sent a second time.
    const loneRows = await rowsOf('alone-4', 'no-such-environment');
    const recording = recordQueries(t.db, /INSERT INTO "events"/i);
    const lone = await insertNewEventAmongOthers(t.db, loneRows).catch((err: unknown) => err);
    expect(isForeignKeyViolation(lone)).toBe(true);
    expect(recording.stop()).toHaveLength(1);
  });

  it('generates time-ordered transaction ids (UUID version 7), each after the one before', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.push((await t.a.post('/v1/events/trigger', { name: 'welcome', to: 'ada', payload: { plan: 'pro' } }).expect(201)).body.data.transactionId);
    for (const id of ids) expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect([...ids].sort()).toEqual(ids);
    expect(new Set(ids).size).toBe(5);
  });

  it('keeps a given transactionId, and refuses it a second time with 409 storing nothing', async () => {
    await t.a.post('/v1/events/trigger', { name: 'welcome', to: 'ada', payload: { plan: 'pro' }, transactionId: 'tx-1' }).expect(201);
    const before = { notifications: await count('notifications'), jobs: await count('jobs') };
    const res = await t.a.post('/v1/events/trigger', { name: 'welcome', to: 'ada', payload: { plan: 'pro' }, transactionId: 'tx-1' }).expect(409);
    expect(res.body.message).toBe('transactionId tx-1 was already used in this environment');
    expect({ notifications: await count('notifications'), jobs: await count('jobs') }).toEqual(before);
    await t.b.post('/v1/subscribers', { subscriberId: 'ada' }).expect(201);
    await t.b.post('/v1/workflows', { name: 'Welcome', steps: [{ type: 'in_app', template: { content: 'x' } }] }).expect(201);
    await t.b.post('/v1/events/trigger', { name: 'welcome', to: 'ada', transactionId: 'tx-1' }).expect(201);
  });

  it('rejects the whole trigger with 422 naming every bad item, storing nothing', async () => {
    const before = await count('events');
    const res = await t.a
      .post('/v1/events/trigger', {
        name: 'welcome',
        to: ['ada', 'ghost', { type: 'Topic', topicKey: 'nope' }, { subscriberId: 'new-one', timezone: 'Mars/Base' }],
        actor: 'phantom',
        payload: { plan: 'gold' },
      })
      .expect(422);
    expect(res.body.details).toEqual(
      expect.arrayContaining([
        { field: 'body/payload/plan', message: 'must be equal to one of the allowed values' },
        { field: 'body/to/1', message: 'subscriber ghost not found' },
        { field: 'body/to/2', message: 'topic nope not found' },
        { field: 'body/to/3/timezone', message: 'Mars/Base is not an IANA time zone' },
        { field: 'body/actor', message: 'subscriber phantom not found' },
      ]),
    );
    expect(await count('events')).toBe(before);
    await t.a.get('/v1/subscribers/new-one').expect(404);
  });

  it('rejects an unknown workflow and a missing required payload field with 422', async () => {
    expect((await t.a.post('/v1/events/trigger', { name: 'nope', to: 'ada' }).expect(422)).body.message).toBe('Workflow nope not found');
    const res = await t.a.post('/v1/events/trigger', { name: 'welcome', to: 'ada' }).expect(422);
    expect(res.body.details).toEqual([{ field: 'body/payload/plan', message: 'is required' }]);
  });

  it("does not see another environment's workflows or subscribers", async () => {
    await t.aProduction.post('/v1/events/trigger', { name: 'welcome', to: 'ada', payload: { plan: 'pro' } }).expect(422);
  });

  it('creates inline subscribers and updates existing ones, and gives templates the actor', async () => {
    const res = await t.a
      .post('/v1/events/trigger', {
        name: 'welcome',
        to: [{ subscriberId: 'inline-1', email: 'inline@example.com' }],
        actor: { subscriberId: 'ada', firstName: 'Augusta' },
        payload: { plan: 'free' },
      })
      .expect(201);
    expect((await t.a.get('/v1/subscribers/inline-1').expect(200)).body.data.email).toBe('inline@example.com');
    expect((await t.a.get('/v1/subscribers/ada').expect(200)).body.data.firstName).toBe('Augusta');
    await new JobRunner(t.deps).runUntilIdle();
    const feed = (await t.a.get('/v1/subscribers/inline-1/messages').expect(200)).body.data;
    expect(feed[0]).toMatchObject({ content: 'Hi Augusta', transactionId: res.body.data.transactionId });
  });

  it('answers 201 with a status, storing nothing, for inactive or step-less workflows', async () => {
    await t.a.post('/v1/workflows', { name: 'Off', active: false, steps: [{ type: 'sms', template: { content: 'x' } }] }).expect(201);
    await t.a.post('/v1/workflows', { name: 'Empty' }).expect(201);
    await t.a.post('/v1/workflows', { name: 'Idle', steps: [{ type: 'sms', active: false, template: { content: 'x' } }] }).expect(201);
    const before = await count('events');
    for (const [name, status] of [
      ['off', 'trigger_not_active'],
      ['empty', 'no_workflow_steps_defined'],
      ['idle', 'no_workflow_active_steps_defined'],
    ]) {
      expect((await t.a.post('/v1/events/trigger', { name, to: 'ada' }).expect(201)).body.data).toEqual({ acknowledged: true, status });
    }
    expect(await count('events')).toBe(before);
  });

  it.runIf(testDatabaseUrl())('reads its workflow and the subscribers it names in one query on PostgreSQL', async () => {
    const reads = /^select\b.*\b(workflows|subscribers)\b/is;
    let recording = recordQueries(t.db, reads);
    const res = await t.a.post('/v1/events/trigger', { name: 'welcome', to: ['ada', 'ghost-reader'], payload: { plan: 'pro' } });
    expect(recording.stop()).toHaveLength(1);
    expect(res.status).toBe(422);
    expect(res.body.details).toEqual([{ field: 'body/to/1', message: 'subscriber ghost-reader not found' }]);
    recording = recordQueries(t.db, reads);
    await t.a.post('/v1/events/trigger', { name: 'welcome', to: 'ada', payload: { plan: 'pro' } }).expect(201);
    expect(recording.stop()).toHaveLength(1);
  });

  it('rejects malformed triggers with 400', async () => {
    await t.a.post('/v1/events/trigger', { to: 'ada' }).expect(400);
    await t.a.post('/v1/events/trigger', { name: 'welcome' }).expect(400);
    await t.a.post('/v1/events/trigger', { name: 'welcome', to: [] }).expect(400);
    await t.a.post('/v1/events/trigger', { name: 'welcome', to: Array.from({ length: 101 }, (_, i) => `s${i}`) }).expect(400);
    await t.a.post('/v1/events/trigger', { name: 'welcome', to: { type: 'Topic' } }).expect(400);
    await t.a.post('/v1/events/trigger', { name: 'welcome', to: 'ada', tenant: 'acme' }).expect(400);
    await t.a.post('/v1/events/trigger', { name: 'welcome', to: 'ada', payload: [] }).expect(400);
  });
});

describe('POST /events/trigger/bulk (triggerEventBulk)', () => {
  it('answers every event in order, one bad event not sinking the others', async () => {
    await createWorkflow(t.a, { workflowId: 'off', name: 'Off', active: false, steps: [{ type: 'sms', template: { content: 'x' } }] });
    const res = await t.a
      .post('/v1/events/trigger/bulk', {
        events: [
          { name: 'welcome', to: 'ada', payload: { plan: 'pro' } },
          { name: 'missing', to: 'ada' },
          { name: 'welcome', to: 'ghost', payload: { plan: 'pro' } },
          { name: 'off', to: 'ada' },
          { name: 'welcome', to: { type: 'Topic', topicKey: 'team' }, payload: { plan: 'free' } },
        ],
      })
      .expect(201);
    expect(res.body.data).toEqual([
      { acknowledged: true, status: 'processed', transactionId: expect.any(String) },
      { acknowledged: true, status: 'error', error: ['name missing is not a workflow'] },
      { acknowledged: true, status: 'error', error: ['to subscriber ghost not found'] },
      { acknowledged: true, status: 'trigger_not_active' },
      { acknowledged: true, status: 'processed', transactionId: expect.any(String) },
    ]);
  });

  it('answers a full request of 100 in order, each transaction id its own event', async () => {
    const events = Array.from({ length: 100 }, (_, i) =>
      i % 7 === 3 ? { name: 'missing', to: 'ada', transactionId: `bulk-100-${i}` } : { name: 'welcome', to: 'ada', payload: { plan: 'pro' }, transactionId: `bulk-100-${i}` },
    );
    const res = await t.a.post('/v1/events/trigger/bulk', { events }).expect(201);
    expect(res.body.data).toEqual(
      events.map((event, i) =>
        event.name === 'missing'
          ? { acknowledged: true, status: 'error', error: ['name missing is not a workflow'] }
          : { acknowledged: true, status: 'processed', transactionId: `bulk-100-${i}` },
      ),
    );
    const stored = await t.db('events').where('transaction_id', 'like', 'bulk-100-%').count({ n: '*' }).first();
    expect(Number(stored!.n)).toBe(events.filter((event) => event.name === 'welcome').length);
  });

  // The named subscriber's events are rows known in advance (insertAll); the inline one's create
  // their subscriber first (engine/trigger.ts): on both paths the events name one stored copy of
  // their workflow. Each had stored its own (25 events of a 200,000-character workflow wrote 5 MB,
  // which group commit then had to split into commits of about SLICE_CHARS).
  it.each([
    ['a named subscriber', (_i: number) => 'ada' as unknown],
    ['a subscriber given inline', (i: number) => ({ subscriberId: `inline-${i}`, email: `inline-${i}@example.com` })],
  ])('stores a large workflow once for the events of a request to %s, each event naming it', async (_, to) => {
    await createWorkflow(t.a, { workflowId: 'large', name: 'Large', steps: [{ type: 'email', template: { subject: 'Hi', content: 'x'.repeat(200_000) } }] });
    const events = Array.from({ length: 25 }, (_, i) => ({ name: 'large', to: to(i), payload: { n: i }, transactionId: `large-${i}` }));
    const writes = await countStatements(t.db, /^INSERT INTO "?workflow_snapshots"?/, async () => {
      const res = await t.a.post('/v1/events/trigger/bulk', { events }).expect(201);
      expect(res.body.data).toEqual(events.map((event) => ({ acknowledged: true, status: 'processed', transactionId: event.transactionId })));
    });
    expect(writes).toBe(1);
    const stored = await t.db('events').where({ environment_id: t.environments.a }).where('transaction_id', 'like', 'large-%').select('workflow', 'workflow_snapshot');
    expect(stored).toHaveLength(25);
    expect(stored.every((row) => row.workflow === '' && row.workflow_snapshot === stored[0].workflow_snapshot)).toBe(true);
  });

  it('gives the event loop back between parts of a large request, with an Idempotency-Key too', async () => {
    // 40 events of 100 inline subscribers: on SQLite, hundreds of ms of writes on the event loop.
    const events = (round: string) =>
      Array.from({ length: 40 }, (_, i) => ({
        name: 'welcome',
        payload: { plan: 'pro' },
        to: Array.from({ length: 100 }, (_, j) => ({ subscriberId: `${round}-${i}-${j}`, firstName: 'Many' })),
      }));
    for (const [round, key] of [['plain', undefined], ['keyed', 'bulk-loop']] as const) {
      const answered: string[] = [];
      const request = t.a.post('/v1/events/trigger/bulk', { events: events(round) });
      const bulk = (key ? request.set('Idempotency-Key', key) : request).expect(201).then(() => answered.push('bulk'));
      // Sent once the bulk request is under way; a loop held for all of its writes answers it last.
      await new Promise((resolve) => setTimeout(resolve, 50));
      const health = t.http.get('/health').expect(200).then(() => answered.push('health'));
      await Promise.all([bulk, health]);
      expect(answered).toEqual(['health', 'bulk']);
      expect(await count('subscribers')).toBeGreaterThanOrEqual(round === 'plain' ? 4000 : 8000);
    }
  });

  it('lets an event name a subscriber that an earlier event of the request created inline', async () => {
    const res = await t.a
      .post('/v1/events/trigger/bulk', {
        events: [
          { name: 'welcome', to: { subscriberId: 'bulk-newcomer', firstName: 'Nova' }, payload: { plan: 'pro' } },
          { name: 'welcome', to: 'bulk-newcomer', payload: { plan: 'free' } },
          { name: 'welcome', to: ['ada', 'bulk-newcomer'], payload: { plan: 'free' } },
          { name: 'welcome', to: 'ada', actor: 'bulk-newcomer', payload: { plan: 'free' } },
        ],
      })
      .expect(201);
    expect(res.body.data.map((result: { status: string }) => result.status)).toEqual(['processed', 'processed', 'processed', 'processed']);
    const notified = await t.db('notifications').where({ subscriber_id: 'bulk-newcomer' }).count({ n: '*' }).first();
    expect(Number(notified!.n)).toBe(3);
  });

  it('gives a transactionId two events share to the first, however long its trigger takes', async () => {
    // A topic's event takes longer to trigger than a subscriber's: run side by side, the second won the id.
    await t.a.post('/v1/topics/team/subscribers', { subscribers: ['ada'] }).expect(200);
    const res = await t.a
      .post('/v1/events/trigger/bulk', {
        events: [
          { name: 'welcome', to: { type: 'Topic', topicKey: 'team' }, payload: { plan: 'pro' }, transactionId: 'bulk-shared' },
          { name: 'welcome', to: 'ada', payload: { plan: 'free' }, transactionId: 'bulk-shared' },
        ],
      })
      .expect(201);
    expect(res.body.data).toEqual([
      { acknowledged: true, status: 'processed', transactionId: 'bulk-shared' },
      { acknowledged: true, status: 'error', error: [expect.stringContaining('bulk-shared')] },
    ]);
    const [event] = await t.db('events').where({ transaction_id: 'bulk-shared' });
    expect(JSON.parse(event.payload)).toEqual({ plan: 'pro' });
  });

  it.runIf(testDatabaseUrl())('reads the subscribers named by the events checked at once together on PostgreSQL', async () => {
    const ids = Array.from({ length: 40 }, (_, i) => `bulk-read-${i}`);
    await Promise.all(ids.slice(0, 30).map((subscriberId) => t.a.post('/v1/subscribers', { subscriberId }).expect(201)));
    const recording = recordQueries(t.db, /from subscribers where environment_id = \S+ and subscriber_id = any/i);
    const res = await t.a.post('/v1/events/trigger/bulk', { events: ids.map((to) => ({ name: 'welcome', to, payload: { plan: 'pro' } })) }).expect(201);
    const reads = recording.stop();
    expect(res.body.data.map((result: { status: string }) => result.status)).toEqual(ids.map((_, i) => (i < 30 ? 'processed' : 'error')));
    expect(res.body.data[35].error).toEqual(['to subscriber bulk-read-35 not found']);
    // One read for each 25 events checked at once (handlers/events.ts), naming every subscriber of those events.
    // The subscriberIds go as one JSON array (inList, db/knex.ts).
    expect(reads.map((read) => (JSON.parse(read.bindings[1] as string) as string[]).length)).toEqual([25, 15]);
  });

  it('rejects an empty list and more than 100 events with 400', async () => {
    await t.a.post('/v1/events/trigger/bulk', { events: [] }).expect(400);
    const many = Array.from({ length: 101 }, () => ({ name: 'welcome', to: 'ada' }));
    await t.a.post('/v1/events/trigger/bulk', { events: many }).expect(400);
  });
});

describe('DELETE /events/trigger/{transactionId} (cancelEvent)', () => {
  it('cancels the pending jobs of an event, then answers false', async () => {
    const tx = (await t.a.post('/v1/events/trigger', { name: 'welcome', to: 'ada', payload: { plan: 'pro' } }).expect(201)).body.data.transactionId;
    expect((await t.a.delete(`/v1/events/trigger/${tx}`).expect(200)).body).toEqual({ data: true });
    expect((await t.a.delete(`/v1/events/trigger/${tx}`).expect(200)).body).toEqual({ data: false });
    await new JobRunner(t.deps).runUntilIdle();
    expect((await t.a.get(`/v1/notifications?transactionId=${tx}`).expect(200)).body.data[0].status).toBe('canceled');
  });

  it("answers 404 for an unknown transactionId and for another environment's", async () => {
    await t.a.delete('/v1/events/trigger/unknown').expect(404);
    await t.aProduction.delete('/v1/events/trigger/tx-1').expect(404);
  });
});
