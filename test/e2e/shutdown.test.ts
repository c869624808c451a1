// SIGTERM under keep-alive load (issue 24): the server stops listening, answers the requests in
// flight and those that arrive on kept-alive connections meanwhile with `Connection: close`, and
// closes idle connections only after a grace period. A client that keeps its connections busy sees
// no reset of a kept-alive connection: each request is answered, and a new connection made after
// the signal is refused (or reset by the kernel, if it waited in the listen backlog as the
// listener closed: a request that never reached the server).
import http from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDb, processDatabaseUrl, type TestDb } from '../helpers/db.js';
import { startScript } from '../helpers/process.js';
import { createApiKey, createOrganization } from '../../src/db/repos/accounts.js';

let testDb: TestDb;
let env: Record<string, string>;
let key: string;
beforeAll(async () => {
  testDb = await createTestDb();
  env = { DATABASE_URL: processDatabaseUrl(testDb), PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'info' };
  const { environmentIds } = await createOrganization(testDb.db, { name: 'Drain', plan: 'enterprise', environments: ['production'] });
  key = (await createApiKey(testDb.db, { environmentId: environmentIds.production, name: 'drain' })).key;
});
afterAll(async () => testDb?.close());

type Outcome = { status: number; connection: string | undefined; afterSignal: boolean } | { error: string; afterSignal: boolean };

describe('SIGTERM under keep-alive load', () => {
  it('answers every request in flight with Connection: close and resets no connection', async () => {
    const server = await startScript('src/main.ts', { env, ready: [/"msg":"Herald is listening"/] });
    const port = Number(/"port":(\d+)/.exec(server.output())?.[1]);
    const agent = new http.Agent({ keepAlive: true, maxSockets: 8 });
    let signaled = false;
    const outcomes: Outcome[] = [];
    const request = () =>
      new Promise<Outcome>((resolve) => {
        const afterSignal = signaled;
        const req = http.get({ host: '127.0.0.1', port, path: '/v1/subscribers?limit=5', agent, headers: { Authorization: `Bearer ${key}` } }, (res) => {
          res.resume();
          res.on('end', () => resolve({ status: res.statusCode!, connection: res.headers.connection, afterSignal }));
          res.on('error', (err: NodeJS.ErrnoException) => resolve({ error: err.code ?? err.message, afterSignal }));
        });
        req.on('error', (err: NodeJS.ErrnoException) => resolve({ error: `${err.code ?? err.message}${req.reusedSocket ? ' reused' : ' new'}`, afterSignal }));
      });
    // Eight clients, each sending its next request as soon as the last is answered, until refused.
    const client = async () => {
      for (;;) {
        const outcome = await request();
        outcomes.push(outcome);
        if ('error' in outcome) return;
      }
    };
    try {
      const clients = Array.from({ length: 8 }, client);
      // Under way on every connection first: a few answers each.
      await expect.poll(() => outcomes.length, { timeout: 20_000, interval: 50 }).toBeGreaterThanOrEqual(40);
      signaled = true;
      server.child.kill('SIGTERM');
      await Promise.all(clients);
    } finally {
      agent.destroy();
      server.child.kill('SIGTERM');
    }
    expect(await server.exited).toBe(0);

    const errors = outcomes.filter((o): o is Extract<Outcome, { error: string }> => 'error' in o).map((o) => o.error);
    // Each client ends on a new connection that the server no longer takes: refused, or reset by the
    // kernel when it was waiting in the listen backlog as the listener closed (the request never
    // reached Herald). No request on a kept-alive connection is reset.
    expect(errors).toHaveLength(8);
    expect(errors.filter((e) => !/^(ECONNREFUSED|ECONNRESET) new$/.test(e))).toEqual([]);
    const answered = outcomes.filter((o): o is Extract<Outcome, { status: number }> => 'status' in o);
    expect(answered.length).toBeGreaterThanOrEqual(40);
    expect(answered.every((o) => o.status === 200)).toBe(true);
    // Answers from before the signal kept the connection; the last answer on each connection closed it.
    expect(answered.some((o) => !o.afterSignal && o.connection === 'keep-alive')).toBe(true);
    expect(answered.filter((o) => o.connection === 'close').length).toBeGreaterThanOrEqual(1);
  }, 60_000);
});
