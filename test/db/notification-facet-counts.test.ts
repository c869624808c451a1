// The totals GET /notifications answers for one status, one channel or one workflow, and the
// hours GET /notifications/stats sums, are kept by triggers (migrations 20261127_02 and
// 20261206_02), not counted. Whatever writes notifications (a trigger, a fan-out, the runner's
// status changes, a cancel, retention, an environment deleted), each kept total must equal the
// count of the rows themselves.
import { describe, expect, it } from 'vitest';
import { useTestApp } from '../helpers/app.js';
import { createSubscribers, createTopic, createWorkflow } from '../helpers/factories.js';
import { JobRunner } from '../../src/engine/runner.js';
import { sweepExpired } from '../../src/engine/retention.js';
import { countNotificationFacet, foldEndedCountShards } from '../../src/db/repos/notifications.js';
import { testDatabaseUrl } from '../helpers/db.js';
import { loadConfig } from '../../src/config.js';
import { createLogger } from '../../src/logger.js';
import { CHANNELS } from '../../src/contract.js';
import * as hourCounts from '../../src/db/migrations/20261206_02_notification_hour_counts.js';

const t = useTestApp();
const STATUSES = ['pending', 'processing', 'completed', 'failed', 'canceled'];

/** Every kept total of the environment beside the count of its rows, facet by facet. */
async function keptAndCounted(environmentId: string) {
  const db = t.deps.db;
  const workflows: string[] = await db('notifications').where('environment_id', environmentId).distinct('workflow_key').pluck('workflow_key');
  const kept: Record<string, number> = {};
  const counted: Record<string, number> = {};
  for (const status of STATUSES) {
    kept[`status:${status}`] = await countNotificationFacet(db, environmentId, 'status', status);
    counted[`status:${status}`] = Number((await db('notifications').where({ environment_id: environmentId, status }).count({ n: '*' }).first())!.n);
  }
  for (const channel of CHANNELS) {
    kept[`channel:${channel}`] = await countNotificationFacet(db, environmentId, 'channel', channel);
    counted[`channel:${channel}`] = Number(
      (await db('notifications').where('environment_id', environmentId).where('channels', 'like', `%"${channel}"%`).count({ n: '*' }).first())!.n,
    );
  }
  for (const workflow of workflows) {
    kept[`workflow:${workflow}`] = await countNotificationFacet(db, environmentId, 'workflow', workflow);
    counted[`workflow:${workflow}`] = Number((await db('notifications').where({ environment_id: environmentId, workflow_key: workflow }).count({ n: '*' }).first())!.n);
  }
  // The hours stats sums (migration 20261206_02), each kept beside the count of its rows.
  const hours: Array<{ hour: string; n: number | string }> = await db('notifications')
    .where('environment_id', environmentId)
    .select(db.raw('substr(created_at, 1, 13) AS hour'), db.raw('count(*) AS n'))
    .groupByRaw('substr(created_at, 1, 13)');
  for (const { hour, n } of hours) counted[`hour:${hour}`] = Number(n);
  const keptHours: Array<{ hour: string; n: number | string }> = await db('notification_hour_counts')
    .where('environment_id', environmentId)
    .groupBy('hour')
    .select('hour', db.raw('sum(total) AS n'));
  for (const { hour, n } of keptHours) if (Number(n) !== 0) kept[`hour:${hour}`] = Number(n);
  return { kept, counted };
}

async function expectKeptEqualsCounted(environmentId: string) {
  const { kept, counted } = await keptAndCounted(environmentId);
  expect(kept).toEqual(counted);
  return counted;
}

describe('kept totals of one status, channel or workflow', () => {
  it('follow triggers, a fan-out, every status change, a cancel and a failure, and the list answers them', async () => {
    await createSubscribers(t.a, ['ada', 'grace', 'alan']);
    await createTopic(t.a, { topicKey: 'everyone' }, ['ada', 'grace', 'alan']);
    // Two in-app steps: a channel named twice counts once, as the list's filter does.
    await createWorkflow(t.a, { name: 'Feed', steps: [{ type: 'in_app', template: { content: 'a' } }, { type: 'in_app', template: { content: 'b' } }] });
    await createWorkflow(t.a, { name: 'Mixed', steps: [{ type: 'in_app', template: { content: 'a' } }, { type: 'email', template: { subject: 's', content: 'c' } }] });
    await createWorkflow(t.a, { name: 'Later', steps: [{ type: 'delay', amount: 1, unit: 'days' }, { type: 'in_app', template: { content: 'x' } }] });
    await t.a.post('/v1/events/trigger', { name: 'feed', to: ['ada', 'grace'] }).expect(201);
    await t.a.post('/v1/events/trigger', { name: 'mixed', to: { type: 'Topic', topicKey: 'everyone' } }).expect(201);
    const canceled = (await t.a.post('/v1/events/trigger', { name: 'later', to: 'alan' }).expect(201)).body.data.transactionId;
    await t.a.post('/v1/events/trigger', { name: 'later', to: 'ada' }).expect(201);
    await expectKeptEqualsCounted(t.environments.a);

    // The runner moves them on: in-app ones complete, the emails fail (no integration), the delays wait.
    await new JobRunner(t.deps).runUntilIdle();
    await t.a.delete(`/v1/events/trigger/${canceled}`).expect(200);
    const counted = await expectKeptEqualsCounted(t.environments.a);
    expect(counted).toMatchObject({ 'status:completed': 2, 'status:failed': 3, 'status:canceled': 1, 'channel:in_app': 7, 'channel:email': 3, 'workflow:later': 2 });
    expect(counted['status:pending'] + counted['status:processing']).toBe(1);

    // The list answers the kept total for one filter, and counts when there are two.
    for (const [query, total] of [
      ['status=failed', 3],
      ['channel=in_app', 7],
      ['workflowId=mixed', 3],
      ['workflowId=mixed&status=failed', 3],
      ['channel=email&status=completed', 0],
    ] as const) {
      expect((await t.a.get(`/v1/notifications?${query}`).expect(200)).body.totalCount, query).toBe(total);
    }
    // Other environments keep their own.
    expect(await countNotificationFacet(t.deps.db, t.environments.b, 'status', 'failed')).toBe(0);
  });

  it('count nothing twice when a fan-out batch runs again (after a crash): the notifications it would repeat are skipped', async () => {
    await createSubscribers(t.a, ['ada', 'grace', 'alan']);
    await createTopic(t.a, { topicKey: 'everyone' }, ['ada', 'grace', 'alan']);
    await createWorkflow(t.a, { name: 'Mixed', steps: [{ type: 'in_app', template: { content: 'a' } }, { type: 'email', template: { subject: 's', content: 'c' } }] });
    const { transactionId } = (await t.a.post('/v1/events/trigger', { name: 'mixed', to: { type: 'Topic', topicKey: 'everyone' } }).expect(201)).body.data;
    await new JobRunner(t.deps).runUntilIdle();
    const before = await expectKeptEqualsCounted(t.environments.a);
    expect(before).toMatchObject({ 'workflow:mixed': 3, 'channel:in_app': 3 });

    // The fan-out's jobs (one, or one a shard) back at their first batch, as a crash before their commit would leave them.
    const fanouts = t.deps.db('jobs').where({ environment_id: t.environments.a, kind: 'fanout' });
    const states: Array<{ id: string; state: string }> = await fanouts.clone().select('id', 'state');
    expect(states.length).toBeGreaterThan(0);
    for (const { id, state } of states) {
      const { cursor: _done, ...first } = JSON.parse(state);
      await t.deps.db('jobs').where('id', id).update({ status: 'pending', run_at: t.clock.now().toISOString(), state: JSON.stringify(first), lease_owner: null, lease_expires_at: null });
    }
    await new JobRunner(t.deps).runUntilIdle();
    expect(await fanouts.clone().whereNot('status', 'completed').count({ n: '*' }).first()).toMatchObject({ n: 0 });
    expect(await expectKeptEqualsCounted(t.environments.a)).toEqual(before);
    expect((await t.a.get(`/v1/notifications?transactionId=${transactionId}`).expect(200)).body.totalCount).toBe(3);
  });

  it('follow retention, and an environment deleted takes its totals with it', async () => {
    await createSubscribers(t.a, ['ada', 'grace']);
    await createWorkflow(t.a, { name: 'Feed', steps: [{ type: 'in_app', template: { content: 'a' } }] });
    // Deleted too: a notification naming two channels, and one naming one channel twice.
    await createWorkflow(t.a, { name: 'Mixed', steps: [{ type: 'in_app', template: { content: 'a' } }, { type: 'email', template: { subject: 's', content: 'c' } }] });
    await createWorkflow(t.a, { name: 'Twice', steps: [{ type: 'in_app', template: { content: 'a' } }, { type: 'in_app', template: { content: 'b' } }] });
    await t.a.post('/v1/events/trigger', { name: 'feed', to: ['ada', 'grace'] }).expect(201);
    for (const name of ['mixed', 'twice']) await t.a.post('/v1/events/trigger', { name, to: 'grace' }).expect(201);
    await new JobRunner(t.deps).runUntilIdle();
    expect(await expectKeptEqualsCounted(t.environments.a)).toMatchObject({ 'channel:in_app': 4, 'channel:email': 1, 'status:failed': 1 });
    t.clock.advance(40 * 86_400_000);
    await t.a.post('/v1/events/trigger', { name: 'feed', to: 'ada' }).expect(201);
    await new JobRunner(t.deps).runUntilIdle();

    const deps = { db: t.deps.db, clock: t.clock, config: { ...loadConfig({}), retentionDays: 30 }, logger: createLogger('silent') };
    await sweepExpired(deps, 1);
    expect(await expectKeptEqualsCounted(t.environments.a)).toMatchObject({ 'status:completed': 1, 'status:failed': 0, 'channel:in_app': 1, 'channel:email': 0, 'workflow:feed': 1 });

    // The hour whose notifications all went keeps no total of 0 behind.
    const hours = await t.deps.db('notification_hour_counts').where('environment_id', t.environments.a).pluck('total');
    expect(hours.map(Number)).toEqual([1]);

    await t.deps.db('environments').where('id', t.environments.a).del();
    for (const table of ['notification_facet_counts', 'notification_hour_counts']) {
      expect(Number((await t.deps.db(table).where('environment_id', t.environments.a).count({ n: '*' }).first())!.n), table).toBe(0);
    }
  });

  it('are counted for the notifications already there when the hours migration runs', async () => {
    await createSubscribers(t.a, ['ada', 'grace']);
    await createWorkflow(t.a, { name: 'Feed', steps: [{ type: 'in_app', template: { content: 'a' } }] });
    for (const gap of [0, 3_600_000, 60_000]) {
      t.clock.advance(gap);
      await t.a.post('/v1/events/trigger', { name: 'feed', to: ['ada', 'grace'] }).expect(201);
    }
    await hourCounts.down(t.deps.db);
    await hourCounts.up(t.deps.db);
    const counted = await expectKeptEqualsCounted(t.environments.a);
    expect(Object.entries(counted).filter(([key]) => key.startsWith('hour:')).map(([, n]) => n).sort()).toEqual([2, 4]);
  });

  it.runIf(testDatabaseUrl() !== undefined)(
    'PostgreSQL: writes from several connections keep a shard each, and the shards of ended connections fold into shard 0',
    async () => {
      await createSubscribers(t.a, ['ada']);
      await createWorkflow(t.a, { name: 'Feed', steps: [{ type: 'in_app', template: { content: 'a' } }] });
      await Promise.all(Array.from({ length: 8 }, () => t.a.post('/v1/events/trigger', { name: 'feed', to: 'ada' }).expect(201)));
      const db = t.deps.db;
      // A connection that has ended: no backend has this pid.
      const ended = 2_000_000_000;
      await db('notification_facet_counts').insert({ environment_id: t.environments.a, facet: 'status', value: 'pending', shard: ended, total: 5 });
      await db('notification_facet_counts').insert({ environment_id: t.environments.a, facet: 'status', value: 'pending', shard: 0, total: -5 });
      const hour = t.clock.now().toISOString().slice(0, 13);
      await db('notification_hour_counts').insert({ environment_id: t.environments.a, hour, shard: ended, total: 5 });
      await db('notification_hour_counts').insert({ environment_id: t.environments.a, hour, shard: 0, total: -5 });
      const hourTotal = async () => Number((await db('notification_hour_counts').where({ environment_id: t.environments.a, hour }).sum({ n: 'total' }).first())!.n);
      expect(await hourTotal()).toBe(8);
      const before = await countNotificationFacet(db, t.environments.a, 'status', 'pending');
      expect(before).toBe(8);
      const live: number[] = (await db('notification_facet_counts').where('environment_id', t.environments.a).whereNot('shard', ended).whereNot('shard', 0).distinct('shard').pluck('shard')).map(Number);
      expect(live.length).toBeGreaterThan(0);

      await foldEndedCountShards(db);
      expect(await countNotificationFacet(db, t.environments.a, 'status', 'pending')).toBe(8);
      expect(await hourTotal()).toBe(8);
      // Rows of connections still open are left alone (their transactions may be writing them).
      const open = new Set((await db.raw('SELECT pid FROM pg_stat_activity')).rows.map((row: { pid: number }) => row.pid));
      for (const table of ['notification_facet_counts', 'notification_hour_counts']) {
        expect(Number((await db(table).where('shard', ended).count({ n: '*' }).first())!.n), table).toBe(0);
        const remaining: number[] = (await db(table).whereNot('shard', 0).distinct('shard').pluck('shard')).map(Number);
        expect(remaining.every((shard) => open.has(shard)), table).toBe(true);
      }
    },
  );
});
