// Provider send limits through the job path: a send whose turn is still to come goes back to the
// queue until then, spends no attempt and keeps its turn; an integration sets its own limits.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { useTestApp } from '../helpers/app.js';
import { createIntegration, createSubscriber, createWorkflow, step } from '../helpers/factories.js';
import { startHttpPeer } from '../helpers/peers.js';
import { JobRunner } from '../../src/engine/runner.js';

const t = useTestApp();
let peer: Awaited<ReturnType<typeof startHttpPeer>>;
beforeAll(async () => {
  peer = await startHttpPeer();
});
afterAll(async () => peer?.close());

const runner = () => new JobRunner(t.deps, { random: () => 0.5 });

/** Subscribers of a chat workflow, each posting to its own path of the peer. */
async function chatAudience(providerId: string, hooks: Record<string, string>) {
  const integration = await createIntegration(t.a, { providerId });
  await createWorkflow(t.a, { workflowId: 'deploys', steps: [step.chat({ content: 'Deploy {{payload.n}}' })] });
  for (const [subscriberId, hook] of Object.entries(hooks)) {
    await createSubscriber(t.a, { subscriberId });
    await t.a.put(`/v1/subscribers/${subscriberId}/credentials`, { providerId, credentials: { webhookUrl: `${peer.url}/${hook}` } }).expect(200);
  }
  return integration;
}

const posted = (from: number) => peer.requests.slice(from).map((r) => `${r.path} ${(r.json() as { text: string }).text}`);

async function chatJobs() {
  return (await t.db('jobs').where({ type: 'chat', environment_id: t.environments.a }).orderBy('id').select('id', 'status', 'attempts', 'run_at')) as Array<{
    id: string;
    status: string;
    attempts: number;
    run_at: string;
  }>;
}

describe('provider send limits', () => {
  it('sends a Slack webhook one message a second, without spending attempts; other webhooks are not held up', async () => {
    const from = peer.requests.length;
    await chatAudience('slack', { ada: 'team', bob: 'team', cy: 'ops' });
    const worker = runner();
    const t0 = t.clock.now().getTime();
    for (let n = 1; n <= 3; n++) await t.a.post('/v1/events/trigger', { name: 'deploys', to: n === 3 ? ['ada', 'cy'] : 'ada', payload: { n } }).expect(201);
    await worker.runUntilIdle();
    // One message to each webhook now; ada's other two wait their turns, a second apart (which of
    // her three went first is the order the jobs, run side by side, reserved their turns).
    const team = () => posted(from).filter((p) => p.startsWith('/team'));
    expect(posted(from).filter((p) => p.startsWith('/ops'))).toEqual(['/ops Deploy 3']);
    expect(team()).toHaveLength(1);
    const waiting = (await chatJobs()).filter((j) => j.status === 'queued');
    expect(waiting.map((j) => [new Date(j.run_at).getTime() - t0, j.attempts]).sort()).toEqual([
      [1000, 0],
      [2000, 0],
    ]);
    const first = waiting.find((j) => new Date(j.run_at).getTime() === t0 + 1000)!;
    const detail = await t.db('execution_details').where({ job_id: first.id }).first('status', 'detail');
    expect(detail).toEqual({ status: 'queued', detail: `Waiting for its turn under Slack's send limits: goes at ${new Date(t0 + 1000).toISOString()} (no attempt spent)` });

    t.clock.advance(999);
    await worker.runUntilIdle();
    expect(team()).toHaveLength(1);
    t.clock.advance(1);
    await worker.runUntilIdle();
    expect(team()).toHaveLength(2);
    t.clock.advance(1000);
    await worker.runUntilIdle();
    expect(team().sort()).toEqual(['/team Deploy 1', '/team Deploy 2', '/team Deploy 3']);
    // Each sent once, on its first attempt.
    expect((await chatJobs()).map((j) => [j.status, j.attempts])).toEqual(Array(4).fill(['completed', 1]));
  });

  it('follows an integration’s own limits, and its provider’s again after null', async () => {
    const integration = await chatAudience('slack', { ada: 'own' });
    expect(integration).toMatchObject({ customSendLimits: false, sendLimits: { perIntegration: [], perDestination: [{ limit: 1, seconds: 1 }] } });
    const own = await t.a.put(`/v1/integrations/${integration.integrationId}`, { sendLimits: { perDestination: [{ limit: 3, seconds: 60 }] } }).expect(200);
    expect(own.body.data).toMatchObject({ customSendLimits: true, sendLimits: { perIntegration: [], perDestination: [{ limit: 3, seconds: 60 }] } });

    const worker = runner();
    const t0 = t.clock.now().getTime();
    for (let n = 1; n <= 4; n++) await t.a.post('/v1/events/trigger', { name: 'deploys', to: 'ada', payload: { n } }).expect(201);
    await worker.runUntilIdle();
    // Three at once, the fourth 20 s later (three a minute).
    const jobs = await chatJobs();
    expect(jobs.filter((j) => j.status === 'completed')).toHaveLength(3);
    expect(jobs.filter((j) => j.status === 'queued').map((j) => new Date(j.run_at).getTime() - t0)).toEqual([20_000]);

    const reset = await t.a.put(`/v1/integrations/${integration.integrationId}`, { sendLimits: null }).expect(200);
    expect(reset.body.data).toMatchObject({ customSendLimits: false, sendLimits: { perDestination: [{ limit: 1, seconds: 1 }] } });
  });

  it('paces every send of an integration together with perIntegration, whichever webhook it goes to', async () => {
    const integration = await chatAudience('discord', { ada: 'a', bob: 'b', cy: 'c' });
    // Discord has no published limit: nothing is paced until the integration sets one.
    expect(integration.sendLimits).toEqual({ perIntegration: [], perDestination: [] });
    await t.a.put(`/v1/integrations/${integration.integrationId}`, { sendLimits: { perIntegration: [{ limit: 2, seconds: 10 }] } }).expect(200);
    await t.a.post('/v1/events/trigger', { name: 'deploys', to: ['ada', 'bob', 'cy'], payload: { n: 1 } }).expect(201);
    await runner().runUntilIdle();
    const jobs = await chatJobs();
    expect(jobs.map((j) => j.status).sort()).toEqual(['completed', 'completed', 'queued']);
  });

  it('refuses send limits on the in-app integration, and windows out of range', async () => {
    const inApp = await t.a.post('/v1/integrations', { providerId: 'herald', sendLimits: { perIntegration: [{ limit: 1, seconds: 1 }] } }).expect(422);
    expect(inApp.body).toMatchObject({ statusCode: 422, details: [{ field: 'body/sendLimits' }] });
    await t.a.post('/v1/integrations', { providerId: 'slack', sendLimits: { perDestination: [{ limit: 0, seconds: 1 }] } }).expect(400);
    await t.a.post('/v1/integrations', { providerId: 'slack', sendLimits: { perDestination: [{ limit: 1, seconds: 86_401 }] } }).expect(400);
    await t.a.post('/v1/integrations', { providerId: 'slack', sendLimits: { perMinute: 3 } }).expect(400);
  });
});
