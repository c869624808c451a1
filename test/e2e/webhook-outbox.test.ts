// The webhook outbox across a crash: a server records each in-app delivery's message.delivered in
// the delivery's own transaction and starts sending it to a receiver that holds every request open;
// the server is killed with SIGKILL while they are held. A second server takes the deliveries over
// when their leases end, and every event arrives, each with the webhook-id it had before the crash.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ChildProcess } from 'node:child_process';
import { Webhook } from 'standardwebhooks';
import { createTestDb, processDatabaseUrl, testDatabaseUrl, type TestDb } from '../helpers/db.js';
import { startScript } from '../helpers/process.js';
import { startHttpPeer } from '../helpers/peers.js';
import { createApiKey, createOrganization } from '../../src/db/repos/accounts.js';
import { insertSubscriber } from '../../src/db/repos/subscribers.js';

const RECIPIENTS = 20;

describe('a server killed between a state change and its webhook', () => {
  let testDb: TestDb;
  let env: Record<string, string>;
  let key: string;
  const children: ChildProcess[] = [];
  let holding = true;
  const held: Array<() => void> = [];
  let receiver: Awaited<ReturnType<typeof startHttpPeer>>;

  beforeAll(async () => {
    testDb = await createTestDb();
    receiver = await startHttpPeer(() => (holding ? new Promise((resolve) => held.push(() => resolve({ status: 200 }))) : { status: 200 }));
    const { environmentIds } = await createOrganization(testDb.db, { name: 'Outbox', plan: 'enterprise', environments: ['production'] });
    key = (await createApiKey(testDb.db, { environmentId: environmentIds.production, name: 'outbox' })).key;
    for (let i = 0; i < RECIPIENTS; i++) await insertSubscriber(testDb.db, environmentIds.production, { subscriberId: `r${i}` }, new Date());
    // Every event on the wire at once: the endpoint never answers before the crash, so it has a
    // quarter of its places (engine/destinations.ts), and a quarter of 80 is the 20 recipients.
    env = { DATABASE_URL: processDatabaseUrl(testDb), HOST: '127.0.0.1', PORT: '0', LOG_LEVEL: 'info', HERALD_JOB_LEASE_MS: '2000', HERALD_SENDS_PER_DESTINATION: '80' };
  });

  afterAll(async () => {
    for (const child of children) if (child.exitCode === null) child.kill('SIGKILL');
    await receiver?.close();
    await testDb?.close();
  });

  it('loses no event and keeps each webhook-id', async () => {
    const start = async () => {
      const server = await startScript('src/main.ts', { env, ready: [/"msg":"Herald is listening"/], timeoutMs: 60_000 });
      children.push(server.child);
      return { ...server, port: Number(/"port":(\d+)/.exec(server.output())![1]) };
    };
    const first = await start();
    const call = async (port: number, method: string, path: string, body?: object) => {
      const res = await fetch(`http://127.0.0.1:${port}/v1${path}`, { method, headers: { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json' }, body: body && JSON.stringify(body) });
      return { status: res.status, body: (await res.json()) as { data: Record<string, string> } };
    };
    const endpoint = await call(first.port, 'POST', '/webhook-endpoints', { url: `${receiver.url}/hooks`, eventTypes: ['message.delivered'] });
    expect(endpoint.status).toBe(201);
    expect((await call(first.port, 'POST', '/workflows', { name: 'Hello', steps: [{ type: 'in_app', template: { content: 'hi' } }] })).status).toBe(201);
    const to = Array.from({ length: RECIPIENTS }, (_, i) => `r${i}`);
    expect((await call(first.port, 'POST', '/events/trigger', { name: 'hello', to })).status).toBe(201);

    // Every message is stored and its event is on the wire, unanswered: now the server dies.
    await expect.poll(() => receiver.requests.length, { timeout: 30_000, interval: 50 }).toBe(RECIPIENTS);
    first.child.kill('SIGKILL');
    expect(await first.exited).toBe(null);
    const before = new Set(receiver.requests.map((r) => r.headers['webhook-id']));
    expect(before.size).toBe(RECIPIENTS);

    holding = false;
    const second = await start();
    await expect.poll(() => receiver.requests.length, { timeout: 30_000, interval: 100 }).toBe(2 * RECIPIENTS);
    const after = receiver.requests.slice(RECIPIENTS);
    expect(new Set(after.map((r) => r.headers['webhook-id']))).toEqual(before);
    const verifier = new Webhook(endpoint.body.data.secret);
    const notifications = new Set(after.map((r) => (verifier.verify(r.body, r.headers as Record<string, string>) as { data: { notificationId: string } }).data.notificationId));
    expect(notifications.size).toBe(RECIPIENTS);
    await expect.poll(async () => (await testDb.db('webhook_deliveries').where({ status: 'succeeded' })).length, { timeout: 10_000 }).toBe(RECIPIENTS);

    second.child.kill('SIGTERM');
    expect(await second.exited).toBe(0);
    for (const release of held.splice(0)) release();
  }, 120_000);
});

// Each process remembers which environments have endpoints; on PostgreSQL an endpoint created
// through one process must count at once in the others (NOTIFY), not after their memory expires.
describe.runIf(testDatabaseUrl())('an endpoint created through another process', () => {
  let testDb: TestDb;
  let key: string;
  let env: Record<string, string>;
  const children: ChildProcess[] = [];
  let receiver: Awaited<ReturnType<typeof startHttpPeer>>;

  beforeAll(async () => {
    testDb = await createTestDb();
    receiver = await startHttpPeer();
    const { environmentIds } = await createOrganization(testDb.db, { name: 'Two', plan: 'enterprise', environments: ['production'] });
    key = (await createApiKey(testDb.db, { environmentId: environmentIds.production, name: 'two' })).key;
    await insertSubscriber(testDb.db, environmentIds.production, { subscriberId: 'ada' }, new Date());
    env = { DATABASE_URL: processDatabaseUrl(testDb), HOST: '127.0.0.1', PORT: '0', LOG_LEVEL: 'info' };
  });

  afterAll(async () => {
    for (const child of children) if (child.exitCode === null) child.kill('SIGKILL');
    await receiver?.close();
    await testDb?.close();
  });

  it("counts in a worker that had just found the environment without endpoints", async () => {
    const api = await startScript('src/main.ts', { env, args: ['--role', 'api'], ready: [/"msg":"Herald is listening"/], timeoutMs: 60_000 });
    const worker = await startScript('src/main.ts', { env, args: ['--role', 'worker'], ready: [/Herald worker is running jobs/], timeoutMs: 60_000 });
    children.push(api.child, worker.child);
    const port = Number(/"port":(\d+)/.exec(api.output())![1]);
    const call = async (method: string, path: string, body?: object) => {
      const res = await fetch(`http://127.0.0.1:${port}/v1${path}`, { method, headers: { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json' }, body: body && JSON.stringify(body) });
      return { status: res.status, body: (await res.json()) as { data: Record<string, string> } };
    };
    expect((await call('POST', '/workflows', { name: 'Hello', steps: [{ type: 'in_app', template: { content: 'hi' } }] })).status).toBe(201);
    // The worker delivers one and so remembers the environment as one without endpoints.
    expect((await call('POST', '/events/trigger', { name: 'hello', to: 'ada' })).status).toBe(201);
    await expect.poll(async () => (await testDb.db('messages')).length, { timeout: 20_000, interval: 50 }).toBe(1);
    expect((await call('POST', '/webhook-endpoints', { url: `${receiver.url}/hooks` })).status).toBe(201);
    expect((await call('POST', '/events/trigger', { name: 'hello', to: 'ada' })).status).toBe(201);
    await expect.poll(() => receiver.requests.length, { timeout: 20_000, interval: 50 }).toBe(1);
    expect((receiver.requests[0].json() as { type: string }).type).toBe('message.delivered');
    // Both end cleanly before the schema is dropped: a process still shutting down held locks the drop deadlocked on.
    for (const child of [api.child, worker.child]) child.kill('SIGTERM');
    expect(await Promise.all([api.exited, worker.exited])).toEqual([0, 0]);
  }, 120_000);
});
