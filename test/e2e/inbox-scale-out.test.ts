import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ChildProcess } from 'node:child_process';
import { createTestDb, processDatabaseUrl, testDatabaseUrl, type TestDb } from '../helpers/db.js';
import { startScript } from '../helpers/process.js';
import { openSse, type SseStream } from '../helpers/sse.js';
import { createApiKey, createOrganization } from '../../src/db/repos/accounts.js';

// Two API processes and a worker on one PostgreSQL: a browser holds its inbox stream on one API
// process while the worker delivers an in-app message and the other API process marks it read.
// Both changes reach the stream through PostgreSQL's NOTIFY (the catch-up poll is a backstop).
describe.runIf(testDatabaseUrl())('the inbox stream across API processes on PostgreSQL', () => {
  let testDb: TestDb;
  const children: ChildProcess[] = [];
  const streams: SseStream[] = [];
  let env: Record<string, string>;
  let key: string;

  beforeAll(async () => {
    testDb = await createTestDb();
    const { environmentIds } = await createOrganization(testDb.db, { name: 'Inbox', plan: 'enterprise', environments: ['production'] });
    key = (await createApiKey(testDb.db, { environmentId: environmentIds.production, name: 'inbox' })).key;
    env = { DATABASE_URL: processDatabaseUrl(testDb), HOST: '127.0.0.1', PORT: '0', LOG_LEVEL: 'info' };
  });

  afterAll(async () => {
    for (const stream of streams) stream.close();
    for (const child of children) if (child.exitCode === null) child.kill('SIGKILL');
    await testDb?.close();
  });

  it('sends a stream held by one process the items and changes committed through the others', { timeout: 180_000 }, async () => {
    const api = await Promise.all([0, 1].map(() => startScript('src/main.ts', { env, args: ['--role', 'api'], ready: [/"msg":"Herald is listening"/], timeoutMs: 60_000 })));
    children.push(...api.map((server) => server.child));
    const ports = api.map((server) => Number(/"port":(\d+)/.exec(server.output())![1]));
    const call = async (i: number, method: string, path: string, body?: object, credential = key) => {
      const res = await fetch(`http://127.0.0.1:${ports[i]}/v1${path}`, {
        method,
        headers: { Authorization: `Bearer ${credential}`, 'Content-Type': 'application/json' },
        body: body && JSON.stringify(body),
      });
      return { status: res.status, body: res.status === 204 ? undefined : await res.json() };
    };
    expect((await call(0, 'POST', '/subscribers', { subscriberId: 'ada' })).status).toBe(201);
    expect((await call(0, 'POST', '/workflows', { name: 'Ping', steps: [{ type: 'in_app', template: { content: 'ping {{payload.n}}' } }] })).status).toBe(201);
    const token = (await call(0, 'POST', '/subscribers/ada/inbox-tokens', {})).body.data.token as string;

    // The stream lives on process 1.
    const stream = await openSse(`http://127.0.0.1:${ports[1]}/v1/inbox/events`, { Authorization: `Bearer ${token}` });
    streams.push(stream);
    expect(stream.status).toBe(200);
    expect((await stream.next(undefined, 10_000)).event).toBe('counts');

    const worker = await startScript('src/main.ts', { env, args: ['--role', 'worker'], ready: [/Herald worker is running jobs/], timeoutMs: 60_000 });
    children.push(worker.child);
    expect((await call(0, 'POST', '/events/trigger', { name: 'ping', to: 'ada', payload: { n: 1 } })).status).toBe(201);
    const created = await stream.next((e) => e.event === 'notification.created', 15_000);
    expect(created.data).toMatchObject({ item: { body: 'ping 1' }, counts: { unread: 1 } });

    const messageId = (created.data.item as { messageId: string }).messageId;
    expect((await call(0, 'PATCH', `/inbox/messages/${messageId}`, { read: true }, token)).status).toBe(200);
    const updated = await stream.next((e) => e.event === 'notification.updated', 15_000);
    expect(updated).toMatchObject({ id: String(Number(created.id) + 1), data: { counts: { unread: 0 } } });
  });
});
