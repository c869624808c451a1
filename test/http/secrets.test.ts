import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.js';
import { createIntegration, createSubscriber, createWorkflow, step } from '../helpers/factories.js';
import { startHttpPeer } from '../helpers/peers.js';
import { createTestDb, type TestDb } from '../helpers/db.js';
import { JobRunner } from '../../src/engine/runner.js';
import { maskUrl, readOrCreateKeyFile } from '../../src/crypto.js';
import { sealClearChannels } from '../../src/db/repos/subscriber-channels.js';
import { keyFileOf, settleSecret } from '../../src/accounts/secret.js';
import { createLogger } from '../../src/logger.js';

// Subscribers' webhook URLs are credentials: sealed at rest when the server has a secret, masked in
// every answer, opened only to send.
const SECRET = 'test-secret-0123456789abcdef';
const HOOK_PATH = '/services/T000/B000/a1B2c3D4e5F6';

let t: TestApp;
let worker: JobRunner;
beforeAll(async () => {
  t = await startTestApp({ config: { secret: SECRET } });
  worker = new JobRunner(t.deps, { random: () => 0.5 });
});
beforeEach(async () => {
  t.deps.config.secret = SECRET;
  await t.renew();
  await createSubscriber(t.a, { subscriberId: 'ada' });
  await createIntegration(t.a, { providerId: 'slack' });
  await createWorkflow(t.a, { name: 'Chat ping', steps: [step.chat({ content: 'ping' })] });
});
afterEach(async () => t.assertContract());
afterAll(async () => t?.close());

async function storedCredentials(subscriberId: string): Promise<string> {
  const row = await t
    .db('subscriber_channels as c')
    .join('subscribers as s', 's.id', 'c.subscriber_id')
    .where({ 's.subscriber_id': subscriberId, 's.environment_id': t.environments.a })
    .first('c.credentials');
  return String(row.credentials);
}

async function sendsTo(hook: { requests: unknown[] }, subscriberId = 'ada') {
  await t.a.post('/v1/events/trigger', { name: 'chat-ping', to: subscriberId, payload: {} }).expect(201);
  await worker.runUntilIdle();
  return hook.requests.length;
}

describe("a subscriber's webhook URL", () => {
  it('is stored encrypted, shown masked, and still posted to', async () => {
    const hook = await startHttpPeer();
    try {
      const webhookUrl = `${hook.url}${HOOK_PATH}`;
      const res = await t.a.put('/v1/subscribers/ada/credentials', { providerId: 'slack', credentials: { webhookUrl } }).expect(200);
      const shown = `${new URL(hook.url).protocol}//${new URL(hook.url).host}/…e5F6`;
      expect(res.body.data.channels[0].credentials).toEqual({ webhookUrl: shown });
      expect((await t.a.get('/v1/subscribers/ada').expect(200)).body.data.channels[0].credentials).toEqual({ webhookUrl: shown });
      expect((await t.a.get('/v1/subscribers').expect(200)).body.data[0].channels[0].credentials.webhookUrl).toBe(shown);
      const stored = await storedCredentials('ada');
      expect(stored).not.toContain('a1B2c3D4');
      expect(JSON.parse(stored).webhookUrl).toMatch(/^enc:v1:/);
      expect(await sendsTo(hook)).toBe(1);
      expect((hook.requests[0] as { path: string }).path).toBe(HOOK_PATH);
    } finally {
      await hook.close();
    }
  });

  it('is masked in answers even when the server has no secret, and stored in clear then', async () => {
    t.deps.config.secret = undefined;
    await t.a.put('/v1/subscribers/ada/credentials', { providerId: 'slack', credentials: { webhookUrl: `https://hooks.slack.com${HOOK_PATH}` } }).expect(200);
    expect((await t.a.get('/v1/subscribers/ada').expect(200)).body.data.channels[0].credentials).toEqual({ webhookUrl: 'https://hooks.slack.com/…e5F6' });
    expect(JSON.parse(await storedCredentials('ada')).webhookUrl).toBe(`https://hooks.slack.com${HOOK_PATH}`);
  });

  it('written in clear is sealed once a secret is present, and still posted to', async () => {
    const hook = await startHttpPeer();
    try {
      t.deps.config.secret = undefined;
      await t.a.put('/v1/subscribers/ada/credentials', { providerId: 'slack', credentials: { webhookUrl: `${hook.url}${HOOK_PATH}` } }).expect(200);
      expect(await storedCredentials('ada')).toContain('a1B2c3D4');
      t.deps.config.secret = SECRET;
      expect(await sealClearChannels(t.db, SECRET, 2)).toBeGreaterThanOrEqual(1);
      expect(await sealClearChannels(t.db, SECRET)).toBe(0);
      expect(await storedCredentials('ada')).not.toContain('a1B2c3D4');
      expect((await t.a.get('/v1/subscribers/ada').expect(200)).body.data.channels[0].credentials.webhookUrl).toMatch(/\/…e5F6$/);
      expect(await sendsTo(hook)).toBe(1);
    } finally {
      await hook.close();
    }
  });
});

describe('maskUrl', () => {
  it('keeps the scheme, the host and the last 4 characters of a long rest only', () => {
    expect(maskUrl('https://hooks.slack.com/services/T000/B000/XXXX')).toBe('https://hooks.slack.com/…XXXX');
    expect(maskUrl('https://discord.com/api/webhooks/1/abcdefgh')).toBe('https://discord.com/…efgh');
    expect(maskUrl('https://example.com/abc')).toBe('https://example.com/…');
    expect(maskUrl('not a url')).toBe('…');
  });
});

describe('the secret at start', () => {
  function capture() {
    const lines: string[] = [];
    const logger = createLogger(
      'info',
      new Writable({
        write(chunk, _encoding, done) {
          lines.push(String(chunk));
          done();
        },
      }),
    );
    return { lines, logger };
  }

  // A database with nothing sealed yet: one that holds sealed values needs the secret they were
  // sealed with (test/db/start-up.test.ts).
  let empty: TestDb;
  beforeAll(async () => {
    empty = await createTestDb();
  });
  afterAll(() => empty.close());

  it('on SQLite without HERALD_SECRET: a key file made once, readable by its owner alone, and said once', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'herald-key-'));
    try {
      const databaseUrl = `sqlite:${path.join(dir, 'herald.db')}`;
      expect(keyFileOf(databaseUrl)).toBe(path.join(dir, 'herald.key'));
      const first = capture();
      const secret = await settleSecret({ ...t.deps.config, databaseUrl, secret: undefined }, empty.db, first.logger);
      expect(secret).toMatch(/^[\w-]{43}$/);
      expect(fs.statSync(path.join(dir, 'herald.key')).mode & 0o777).toBe(0o600);
      expect(first.lines.filter((line) => line.includes('created a secret key file'))).toHaveLength(1);
      const again = capture();
      expect(await settleSecret({ ...t.deps.config, databaseUrl, secret: undefined }, empty.db, again.logger)).toBe(secret);
      expect(again.lines.join('')).not.toContain('created a secret key file');
      expect(readOrCreateKeyFile(path.join(dir, 'herald.key'))).toEqual({ secret, created: false });
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('HERALD_SECRET wins over any key file; PostgreSQL without one is warned about', async () => {
    const given = capture();
    expect(await settleSecret({ ...t.deps.config, databaseUrl: 'sqlite:/nonexistent/herald.db', secret: SECRET }, empty.db, given.logger)).toBe(SECRET);
    expect(given.lines.join('')).not.toContain('HERALD_SECRET is not set');
    const postgres = capture();
    expect(await settleSecret({ ...t.deps.config, databaseUrl: 'postgres://h@127.0.0.1/h', secret: undefined }, empty.db, postgres.logger)).toBeUndefined();
    expect(postgres.lines.filter((line) => /"level":40.*HERALD_SECRET is not set.*IN CLEAR/.test(line))).toHaveLength(1);
  });

  it('has no key file for PostgreSQL whatever the scheme\'s case, nor for a database in memory', () => {
    for (const databaseUrl of ['postgres://h@127.0.0.1/h', 'POSTGRESQL://h@127.0.0.1/h', 'sqlite::memory:', ':memory:']) expect(keyFileOf(databaseUrl)).toBeUndefined();
    expect(keyFileOf('data/herald.db')).toBe(path.resolve('data/herald.key'));
  });
});
