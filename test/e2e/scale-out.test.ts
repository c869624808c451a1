import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ChildProcess } from 'node:child_process';
import { createTestDb, processDatabaseUrl, testDatabaseUrl, type TestDb } from '../helpers/db.js';
import { startScript } from '../helpers/process.js';
import { startSlowWebhook } from '../helpers/webhook.js';
import { createApiKey, createOrganization } from '../../src/db/repos/accounts.js';
import { insertSubscriber } from '../../src/db/repos/subscribers.js';

// The scale-out scenario of a production deployment: two API processes and two workers on one
// PostgreSQL, 2,000 notifications each with a chat send and an in-app message, and one worker
// killed with SIGKILL midway. Bounded: it finishes in well under a minute on this machine.
const MEMBERS = 500;
const TRIGGERS = 4;
const TOTAL = MEMBERS * TRIGGERS;
const CONCURRENCY = 16; // the runner's default: the most sends a dead worker can have had in flight

describe.runIf(testDatabaseUrl())('two API and two worker processes on one PostgreSQL', () => {
  let testDb: TestDb;
  let webhook: Awaited<ReturnType<typeof startSlowWebhook>>;
  const children: ChildProcess[] = [];
  let env: Record<string, string>;
  let key: string;

  beforeAll(async () => {
    testDb = await createTestDb();
    webhook = await startSlowWebhook(5);
    const { environmentIds } = await createOrganization(testDb.db, { name: 'Scale', plan: 'enterprise', environments: ['production'] });
    key = (await createApiKey(testDb.db, { environmentId: environmentIds.production, name: 'scale' })).key;
    const now = new Date();
    for (let i = 0; i < MEMBERS; i++) await insertSubscriber(testDb.db, environmentIds.production, { subscriberId: `m${i}` }, now);
    env = { DATABASE_URL: processDatabaseUrl(testDb), HOST: '127.0.0.1', PORT: '0', LOG_LEVEL: 'info', HERALD_JOB_LEASE_MS: '3000' };
  });

  afterAll(async () => {
    for (const child of children) if (child.exitCode === null) child.kill('SIGKILL');
    await webhook?.close();
    await testDb?.close();
  });

  it('delivers every notification, in-app exactly once, chat again only where a worker died mid-send', async () => {
    const api = await Promise.all(
      [0, 1].map(() => startScript('src/main.ts', { env, args: ['--role', 'api'], ready: [/"msg":"Herald is listening"/], timeoutMs: 60_000 })),
    );
    const ports = api.map((server) => Number(/"port":(\d+)/.exec(server.output())![1]));
    children.push(...api.map((server) => server.child));
    const call = (i: number, method: string, path: string, body?: object) =>
      fetch(`http://127.0.0.1:${ports[i % 2]}/v1${path}`, {
        method,
        headers: { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json' },
        body: body && JSON.stringify(body),
      });

    // Setup through both API processes.
    // Every member posts to the one webhook: without send limits (Slack's would pace it to one a second).
    const slack = await (await call(0, 'POST', '/integrations', { providerId: 'slack', sendLimits: { perDestination: [] } })).json();
    const integrationId = slack.data.integrationId as string;
    const members = await testDb.db('subscribers').select('id');
    const at = new Date().toISOString();
    for (let i = 0; i < members.length; i += 100) {
      await testDb.db('subscriber_channels').insert(
        members.slice(i, i + 100).map((m: { id: string }) => ({
          subscriber_id: m.id,
          integration_id: integrationId,
          provider_id: 'slack',
          credentials: JSON.stringify({ webhookUrl: webhook.url }),
          created_at: at,
          updated_at: at,
        })),
      );
    }
    expect((await call(1, 'POST', '/topics', { topicKey: 'all', name: 'All' })).status).toBe(201);
    const ids = Array.from({ length: MEMBERS }, (_, i) => `m${i}`);
    expect((await call(0, 'POST', '/topics/all/subscribers', { subscribers: ids })).status).toBe(200);
    const workflow = { name: 'Ping', steps: [{ type: 'chat', template: { content: 'ping {{subscriber.subscriberId}}' } }, { type: 'in_app', template: { content: 'ping' } }] };
    expect((await call(1, 'POST', '/workflows', workflow)).status).toBe(201);

    // Workers start, then the triggers come in through both APIs.
    const workers = await Promise.all([0, 1].map(() => startScript('src/main.ts', { env, args: ['--role', 'worker'], ready: [/Herald worker is running jobs/], timeoutMs: 60_000 })));
    for (const worker of workers) children.push(worker.child);
    for (let i = 0; i < TRIGGERS; i++) {
      const res = await call(i, 'POST', '/events/trigger', { name: 'ping', to: { type: 'Topic', topicKey: 'all' }, transactionId: `scale-${i}` });
      expect(res.status).toBe(201);
    }

    // Kill one worker hard while sends are under way.
    await expect.poll(() => webhook.deliveries.length, { timeout: 60_000, interval: 50 }).toBeGreaterThan(TOTAL / 5);
    workers[0].child.kill('SIGKILL');
    expect(await workers[0].exited).toBe(null);

    const completed = async () => Number((await testDb.db('notifications').where({ status: 'completed' }).count({ n: '*' }).first())!.n);
    await expect.poll(completed, { timeout: 120_000, interval: 250 }).toBe(TOTAL);

    // Every chat job reached the webhook; repeats are few and only for jobs tried more than once.
    const chatJobs = await testDb.db('jobs').where({ type: 'chat' }).select('id', 'attempts', 'status');
    expect(chatJobs).toHaveLength(TOTAL);
    expect(chatJobs.every((job: { status: string }) => job.status === 'completed')).toBe(true);
    const received = new Map<string, number>();
    for (const id of webhook.deliveries) received.set(id, (received.get(id) ?? 0) + 1);
    expect(new Set(chatJobs.map((job: { id: string }) => job.id))).toEqual(new Set(received.keys()));
    const repeated = [...received].filter(([, times]) => times > 1).map(([id]) => id);
    expect(repeated.length).toBeLessThanOrEqual(CONCURRENCY);
    const attempts = new Map(chatJobs.map((job: { id: string; attempts: number }) => [job.id, job.attempts]));
    for (const id of repeated) expect(attempts.get(id)).toBeGreaterThan(1);

    // In-app messages exactly once per notification.
    const messages = await testDb.db('messages').select('notification_id');
    expect(messages).toHaveLength(TOTAL);
    expect(new Set(messages.map((m: { notification_id: string }) => m.notification_id)).size).toBe(TOTAL);

    // The survivors stop cleanly on SIGTERM.
    for (const server of [...api, workers[1]]) server.child.kill('SIGTERM');
    expect(await Promise.all([...api, workers[1]].map((server) => server.exited))).toEqual([0, 0, 0]);
  }, 240_000);
});
