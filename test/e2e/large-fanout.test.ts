import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { ChildProcess } from 'node:child_process';
import { createTestDb, processDatabaseUrl, testDatabaseUrl, type TestDb } from '../helpers/db.js';
import { startScript } from '../helpers/process.js';
import { createApiKey, createOrganization } from '../../src/db/repos/accounts.js';
import { insertRows } from '../../src/db/insert-rows.js';
import { newId } from '../../src/ids.js';

// A topic fan-out of many in-app deliveries, in a spawned server: it must not stop the API
// answering (in one process), nor stop itself (an API and a worker process on one SQLite file).
const MEMBERS = 20_000;

let testDb: TestDb;
let key: string;
const children: ChildProcess[] = [];

beforeEach(async () => {
  testDb = await createTestDb();
  const { environmentIds } = await createOrganization(testDb.db, { name: 'Fan-out', plan: 'enterprise', environments: ['production'] });
  const environmentId = environmentIds.production;
  key = (await createApiKey(testDb.db, { environmentId, name: 'fanout' })).key;
  // Members written straight into the database: through the API they would take most of the test.
  const at = new Date().toISOString();
  const subscribers = Array.from({ length: MEMBERS }, (_, i) => ({ id: newId(), environment_id: environmentId, subscriber_id: `m${i}`, data: '{}', created_at: at, updated_at: at }));
  const topicId = newId();
  await testDb.db.transaction(async (trx) => {
    await insertRows(trx, 'subscribers', subscribers);
    await insertRows(trx, 'topics', [{ id: topicId, environment_id: environmentId, topic_key: 'all', name: 'All', created_at: at, updated_at: at }]);
    await insertRows(trx, 'topic_subscribers', subscribers.map((row) => ({ topic_id: topicId, subscriber_id: row.id, created_at: at })));
  });
});

afterEach(async () => {
  for (const child of children.splice(0)) if (child.exitCode === null) child.kill('SIGKILL');
  await testDb?.close();
});

async function start(args: string[], ready: RegExp) {
  const env = { DATABASE_URL: processDatabaseUrl(testDb), HOST: '127.0.0.1', PORT: '0', LOG_LEVEL: 'info' };
  const server = await startScript('src/main.ts', { env, args, ready: [ready], timeoutMs: 60_000 });
  children.push(server.child);
  return server;
}

function client(port: number) {
  return (method: string, path: string, body?: object) =>
    fetch(`http://127.0.0.1:${port}${path}`, {
      method,
      headers: { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json' },
      body: body && JSON.stringify(body),
    });
}

async function triggerFanout(call: ReturnType<typeof client>) {
  expect((await call('POST', '/v1/workflows', { name: 'Ping', steps: [{ type: 'in_app', template: { content: 'ping' } }] })).status).toBe(201);
  expect((await call('POST', '/v1/events/trigger', { name: 'ping', to: { type: 'Topic', topicKey: 'all' } })).status).toBe(201);
}

const delivered = async () => Number((await testDb.db('notifications').where('status', 'completed').count({ n: '*' }).first())!.n);

describe('a large fan-out', () => {
  it('leaves the API of its own process answering between its batches', async () => {
    const server = await start([], /"msg":"Herald is listening"/);
    const call = client(Number(/"port":(\d+)/.exec(server.output())![1]));
    await triggerFanout(call);
    // /health again and again while the fan-out runs: answered while some of it is done and some
    // not, it was answered between two batches. Run as one unbroken chain, the fan-out answered
    // nothing until its last batch.
    const between: number[] = [];
    for (let done = 0; done < MEMBERS; done = await delivered()) {
      const asked = Date.now();
      const res = await call('GET', '/health');
      expect(res.status).toBe(200);
      // A liveness bound, far above a batch's length: no request waits out the whole fan-out.
      expect(Date.now() - asked).toBeLessThan(2_000);
      const now = await delivered();
      if (now > 0 && now < MEMBERS) between.push(now);
    }
    expect(between.length).toBeGreaterThan(0);
  }, 120_000);

  it.runIf(!testDatabaseUrl())('runs to its end with an API and a worker process writing to one SQLite file', async () => {
    const api = await start(['--role', 'api'], /"msg":"Herald is listening"/);
    await start(['--role', 'worker'], /Herald worker is running jobs/);
    const call = client(Number(/"port":(\d+)/.exec(api.output())![1]));
    await triggerFanout(call);
    // The API commits all along (a subscriber a request): a batch that read before such a commit
    // and wrote after it failed, and waited out its lease (a minute) before the next try.
    let writes = 0;
    const started = Date.now();
    while ((await delivered()) < MEMBERS) {
      expect((await call('POST', '/v1/subscribers', { subscriberId: `writer-${writes++}` })).status).toBe(201);
      // Far under one lease: a fan-out that stalls on a failed batch does not finish in time.
      expect(Date.now() - started).toBeLessThan(45_000);
    }
    expect(writes).toBeGreaterThan(0);
    expect(await testDb.db('messages').count({ n: '*' }).first()).toEqual({ n: MEMBERS });
  }, 120_000);
});
