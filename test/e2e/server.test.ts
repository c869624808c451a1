import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDb, processDatabaseUrl, type TestDb } from '../helpers/db.js';
import fs from 'node:fs';
import net, { type AddressInfo } from 'node:net';
import path from 'node:path';
import { ROOT, buildServer, runScript, startScript } from '../helpers/process.js';
import { startSlowWebhook } from '../helpers/webhook.js';
import { createApiKey, createOrganization } from '../../src/db/repos/accounts.js';

// The real entry points, as a new user runs them: `npm start` and `npm run keys`.
let testDb: TestDb;
let env: Record<string, string>;
let builtMain: string;
beforeAll(async () => {
  testDb = await createTestDb();
  builtMain = await buildServer();
  env = { DATABASE_URL: processDatabaseUrl(testDb), PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'info' };
});
afterAll(async () => {
  await testDb?.close();
  if (builtMain) fs.rmSync(path.dirname(path.dirname(path.join(ROOT, builtMain))), { recursive: true, force: true });
});

describe('npm start', () => {
  it('prints a first key on an empty database, serves the API with it, and exits 0 on SIGTERM', async () => {
    // The build `npm start` runs: plain JavaScript on node, no TypeScript loader.
    const server = await startScript(builtMain, { env, ready: [/"msg":"Herald is listening"/, /Try: curl/] });
    try {
      const key = /^\s+(hk_[0-9a-f]{48})$/m.exec(server.output())?.[1];
      const port = Number(/"port":(\d+)/.exec(server.output())?.[1]);
      expect(key).toBeDefined();
      const res = await fetch(`http://127.0.0.1:${port}/v1/subscribers`, { headers: { Authorization: `Bearer ${key}` } });
      expect(res.status).toBe(200);
      expect(await res.json()).toEqual({ data: [], totalCount: 0, page: 0, pageSize: 10, hasMore: false });
      await expect.poll(() => server.output()).toContain('"path":"/v1/subscribers"');
      const log = server.output().split('\n').find((line) => line.includes('"path":"/v1/subscribers"'));
      expect(JSON.parse(log!)).toMatchObject({ method: 'GET', status: 200, requestId: res.headers.get('x-request-id') });
      expect(server.output()).not.toContain(`"${key}"`);
    } finally {
      server.child.kill('SIGTERM');
    }
    expect(await server.exited).toBe(0);
  });

  it('prints no new key on later starts, and makes sure HERALD_API_KEY exists', async () => {
    const key = 'hk_0123456789abcdef0123456789abcdef0123456789abcdef';
    const server = await startScript('src/main.ts', { env: { ...env, HERALD_API_KEY: key }, ready: [/"msg":"Herald is listening"/] });
    try {
      expect(server.output()).not.toContain('Herald created your first API key');
      const port = Number(/"port":(\d+)/.exec(server.output())?.[1]);
      const res = await fetch(`http://127.0.0.1:${port}/v1/subscribers`, { headers: { Authorization: `ApiKey ${key}` } });
      expect(res.status).toBe(200);
    } finally {
      server.child.kill('SIGTERM');
    }
    expect(await server.exited).toBe(0);
  });
});

describe('a start that fails', () => {
  it('says why without a stack, exits 1, and has printed the first key before it tried to listen', async () => {
    const fresh = await createTestDb();
    const taken = net.createServer();
    await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
    try {
      const port = String((taken.address() as AddressInfo).port);
      const result = await runScript('src/main.ts', [], { ...env, DATABASE_URL: processDatabaseUrl(fresh), PORT: port });
      expect(result.code).toBe(1);
      expect(result.stderr).toContain(`Herald could not start: cannot listen on 127.0.0.1:${port}: 127.0.0.1:${port} is in use by another process (set PORT and HOST)`);
      expect(result.stderr).not.toMatch(/^\s+at /m);
      expect(result.stdout).toMatch(/^\s+hk_[0-9a-f]{48}$/m);
    } finally {
      taken.close();
      await fresh.close();
    }
  });

  it('refuses a variable out of range, naming it', async () => {
    const result = await runScript('src/main.ts', [], { ...env, HERALD_PROVIDER_SEND_TIMEOUT_MS: '3000000000' });
    expect(result.code).toBe(1);
    expect(result.stderr.trim()).toBe('Herald could not start: HERALD_PROVIDER_SEND_TIMEOUT_MS must be a whole number from 1 to 2147483647, not "3000000000"');
  });
});

describe('npm run keys', () => {
  it('creates a key (printed on the last line), lists it, and revokes it', async () => {
    const created = await runScript('scripts/keys.ts', ['create', '--name', 'ci key'], env);
    expect(created.code).toBe(0);
    const key = created.stdout.trim().split('\n').at(-1)!;
    expect(key).toMatch(/^hk_[0-9a-f]{48}$/);
    const id = /Created key ([0-9a-f]{24})/.exec(created.stdout)![1];

    const listed = await runScript('scripts/keys.ts', ['list'], env);
    expect(listed.stdout).toMatch(new RegExp(`${id}\\s+${key.slice(0, 10)}…\\s+ci key .* active`));
    expect(listed.stdout).not.toContain(key);

    expect((await runScript('scripts/keys.ts', ['revoke', id], env)).code).toBe(0);
    expect((await runScript('scripts/keys.ts', ['list'], env)).stdout).toMatch(new RegExp(`${id}.*revoked`));
    expect((await runScript('scripts/keys.ts', ['revoke', id], env)).code).toBe(1);
  });

  it("refuses a key name the dashboard would refuse: empty, or over 100 characters", async () => {
    for (const name of ['  ', 'k'.repeat(101)]) {
      const refused = await runScript('scripts/keys.ts', ['create', '--name', name], env);
      expect(refused.code).toBe(1);
      expect(refused.stderr).toContain('--name must be 1 to 100 characters');
    }
  });

  it('creates a new organization on a given plan, and refuses an unknown plan', async () => {
    const created = await runScript('scripts/keys.ts', ['create', '--plan', 'free'], env);
    expect(created.code).toBe(0);
    expect((await runScript('scripts/keys.ts', ['list'], env)).stdout).toContain('free organization (free) / development');
    const refused = await runScript('scripts/keys.ts', ['create', '--plan', 'platinum'], env);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain('--plan must be one of free, pro, enterprise');
  });

  it('explains its usage when the command is unknown', async () => {
    const res = await runScript('scripts/keys.ts', ['explode'], env);
    expect(res.code).toBe(2);
    expect(res.stderr).toContain('usage: npm run keys');
  });
});

describe('SIGTERM with jobs under way', () => {
  it('finishes the sends in flight, leaves no job running, and exits 0', async () => {
    const webhook = await startSlowWebhook(1500);
    const { environmentIds } = await createOrganization(testDb.db, { name: 'Shutdown', plan: 'enterprise', environments: ['production'] });
    const key = (await createApiKey(testDb.db, { environmentId: environmentIds.production, name: 'shutdown' })).key;
    const server = await startScript('src/main.ts', { env, ready: [/"msg":"Herald is listening"/] });
    try {
      const port = Number(/"port":(\d+)/.exec(server.output())?.[1]);
      const call = (path: string, body: object) =>
        fetch(`http://127.0.0.1:${port}/v1${path}`, {
          method: 'POST',
          headers: { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json' },
          body: JSON.stringify(body),
        });
      await call('/integrations', { providerId: 'slack' });
      await call('/workflows', { name: 'Slow', steps: [{ type: 'chat', template: { content: 'slow' } }] });
      for (const id of ['s1', 's2', 's3']) {
        await call('/subscribers', { subscriberId: id });
        await fetch(`http://127.0.0.1:${port}/v1/subscribers/${id}/credentials`, {
          method: 'PUT',
          headers: { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json' },
          body: JSON.stringify({ providerId: 'slack', credentials: { webhookUrl: webhook.url } }),
        });
      }
      expect((await call('/events/trigger', { name: 'slow', to: ['s1', 's2', 's3'] })).status).toBe(201);
      await expect.poll(() => webhook.deliveries.length, { timeout: 20_000 }).toBe(3);
      server.child.kill('SIGTERM'); // while all three sends wait for the webhook's answer
      expect(await server.exited).toBe(0);
      expect(webhook.answered()).toBe(3);
      const jobs = await testDb.db('jobs').where({ environment_id: environmentIds.production }).select('status', 'lease_owner');
      expect(jobs).toEqual([
        { status: 'completed', lease_owner: null },
        { status: 'completed', lease_owner: null },
        { status: 'completed', lease_owner: null },
      ]);
    } finally {
      if (server.child.exitCode === null) server.child.kill('SIGKILL');
      await webhook.close();
    }
  });
});
