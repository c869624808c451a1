import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.js';
import { createIntegration, createSubscriber, createWorkflow, step } from '../helpers/factories.js';
import { LOCAL_PEERS, startHttpPeer } from '../helpers/peers.js';
import { JobRunner } from '../../src/engine/runner.js';
import { REFUSED_DESTINATION, type OutboundPolicy, type ResolvedAddress } from '../../src/outbound-guard.js';

// The outbound guard through the API and the job runner, on each database: what a tenant may save
// (422 naming the field), what a send to a refused destination records, and that a slow destination
// ends as a retryable timeout. The app allows no network at all, not even the local peers: names
// in `example.test` resolve through the test's own resolver.
const NAMES: Record<string, string> = {
  'hooks.example.test': '127.0.0.1',
  'metadata.example.test': '169.254.169.254',
  'intranet.example.test': '10.20.30.40',
  'public.example.test': '93.184.216.34',
};
const resolve = async (hostname: string): Promise<ResolvedAddress[]> => {
  const address = NAMES[hostname];
  if (!address) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' });
  return [{ address, family: 4 }];
};
const strict: OutboundPolicy = { allowedNetworks: [], timeouts: { connectMs: 300, firstByteMs: 300, sendMs: 800 }, resolve };

let t: TestApp;
let worker: JobRunner;
beforeAll(async () => {
  t = await startTestApp({ config: { outbound: strict } });
  worker = new JobRunner(t.deps, { random: () => 0.5 });
});
beforeEach(async () => {
  t.deps.config.outbound = strict;
  await t.renew();
  await createSubscriber(t.a, { subscriberId: 'ada', email: 'ada@example.com' });
});
afterEach(async () => t.assertContract());
afterAll(async () => t?.close());

/** Every spelling of a destination Herald must not reach, as the host of a URL. */
const HOSTILE_HOSTS = [
  '127.0.0.1',
  '127.1',
  '2130706433',
  '0x7f000001',
  '0177.0.0.1',
  '[::1]',
  '[::ffff:127.0.0.1]',
  '[::127.0.0.1]',
  '[64:ff9b::a9fe:a9fe]',
  '169.254.169.254',
  '10.0.0.1',
  '172.16.0.1',
  '192.168.1.1',
  '100.64.0.1',
  '[fc00::1]',
  '[fd00:ec2::254]',
  '[fe80::1]',
  '0.0.0.0',
  '0',
  '224.0.0.1',
  '240.0.0.1',
  '255.255.255.255',
  'localhost',
  'LOCALHOST.',
  'hooks.localhost',
  'metadata.google.internal',
];

async function notificationOf(transactionId: string) {
  const list = await t.a.get(`/v1/notifications?transactionId=${transactionId}`).expect(200);
  return (await t.a.get(`/v1/notifications/${list.body.data[0].notificationId}`).expect(200)).body.data;
}

async function triggerChat(subscriberId = 'ada'): Promise<string> {
  const res = await t.a.post('/v1/events/trigger', { name: 'chat-ping', to: subscriberId, payload: {} }).expect(201);
  return res.body.data.transactionId;
}

describe('saving a destination', () => {
  beforeEach(async () => {
    await createIntegration(t.a, { providerId: 'slack' });
  });

  it.each(HOSTILE_HOSTS)('refuses a subscriber webhook at http://%s/ with a 422 naming the field', async (host) => {
    const res = await t.a.put('/v1/subscribers/ada/credentials', { providerId: 'slack', credentials: { webhookUrl: `http://${host}:8080/hook` } }).expect(422);
    expect(res.body).toMatchObject({ statusCode: 422, error: 'Unprocessable Entity' });
    expect(res.body.details).toEqual([{ field: 'body/credentials/webhookUrl', message: 'must be a public address' }]);
    expect(res.body.message).not.toContain(host);
  });

  it('refuses a webhook that is not http or https', async () => {
    for (const webhookUrl of ['ftp://hooks.example.com/x', 'file:///etc/passwd', 'gopher://hooks.example.com:70/', 'javascript:alert(1)']) {
      const res = await t.a.put('/v1/subscribers/ada/credentials', { providerId: 'slack', credentials: { webhookUrl } }).expect(422);
      expect(res.body.details[0].field).toBe('body/credentials/webhookUrl');
    }
  });

  it('keeps a public webhook, and a name whose address is judged when sending', async () => {
    for (const webhookUrl of ['https://hooks.slack.com/services/T000/B000/XXXX', 'http://93.184.216.34/hook', 'http://hooks.example.test/hook']) {
      await t.a.put('/v1/subscribers/ada/credentials', { providerId: 'slack', credentials: { webhookUrl } }).expect(200);
    }
  });

  it('refuses an integration whose baseUrl, push-webhook URL or SMTP host is not public', async () => {
    const cases = [
      [{ providerId: 'sendgrid', credentials: { apiKey: 'SG.key', from: 'a@example.com', baseUrl: 'http://169.254.169.254/latest' } }, 'baseUrl'],
      [{ providerId: 'twilio', credentials: { accountSid: 'AC1', token: 't', from: '+15005550006', baseUrl: 'http://[::1]:8080' } }, 'baseUrl'],
      [{ providerId: 'expo', credentials: { baseUrl: 'http://0x7f000001' } }, 'baseUrl'],
      [{ providerId: 'push-webhook', credentials: { webhookUrl: 'http://10.0.0.5/push', secretKey: 'k' } }, 'webhookUrl'],
      [{ providerId: 'smtp', credentials: { host: '127.0.0.1', port: 25, from: 'a@example.com' } }, 'host'],
      [{ providerId: 'smtp', credentials: { host: '2130706433', port: 25, from: 'a@example.com' } }, 'host'],
      [{ providerId: 'smtp', credentials: { host: 'localhost', port: 25, from: 'a@example.com' } }, 'host'],
      [{ providerId: 'smtp', credentials: { host: '::1', port: 25, from: 'a@example.com' } }, 'host'],
    ] as const;
    for (const [body, field] of cases) {
      const res = await t.a.post('/v1/integrations', body).expect(422);
      expect(res.body.details).toEqual([{ field: `body/credentials/${field}`, message: expect.stringMatching(/public address|http or https/) }]);
    }
    const created = await createIntegration(t.a, { providerId: 'sendgrid', credentials: { apiKey: 'SG.key', from: 'a@example.com', baseUrl: 'https://api.sendgrid.com' } });
    const res = await t.a.put(`/v1/integrations/${created.integrationId}`, { credentials: { apiKey: 'SG.key', from: 'a@example.com', baseUrl: 'http://192.168.0.1' } }).expect(422);
    expect(res.body.details[0].field).toBe('body/credentials/baseUrl');
  });

  it('keeps a destination in a network the operator allows', async () => {
    t.deps.config.outbound = { ...strict, allowedNetworks: [LOCAL_PEERS, '10.0.0.0/8'] };
    await t.a.put('/v1/subscribers/ada/credentials', { providerId: 'slack', credentials: { webhookUrl: 'http://127.0.0.1:8080/hook' } }).expect(200);
    await t.a.post('/v1/integrations', { providerId: 'push-webhook', credentials: { webhookUrl: 'http://10.0.0.5/push', secretKey: 'k' } }).expect(201);
    await t.a.put('/v1/subscribers/ada/credentials', { providerId: 'slack', credentials: { webhookUrl: 'http://127.0.0.2:8080/hook' } }).expect(422);
  });
});

describe('sending to a destination', () => {
  beforeEach(async () => {
    await createIntegration(t.a, { providerId: 'slack' });
    await createWorkflow(t.a, { name: 'Chat ping', steps: [step.chat({ content: 'ping' })] });
  });

  it('records a name that resolves inward as failed at once, with the same reason whatever is there', async () => {
    const open = await startHttpPeer();
    try {
      const port = new URL(open.url).port;
      const webhooks = {
        open: `http://hooks.example.test:${port}/hook`,
        closed: 'http://hooks.example.test:1/hook',
        metadata: 'http://metadata.example.test/latest/meta-data/',
        intranet: 'http://intranet.example.test:22/',
        unresolved: 'http://nowhere.example.test/hook',
      };
      const details = [];
      for (const [subscriberId, webhookUrl] of Object.entries(webhooks)) {
        await createSubscriber(t.a, { subscriberId });
        await t.a.put(`/v1/subscribers/${subscriberId}/credentials`, { providerId: 'slack', credentials: { webhookUrl } }).expect(200);
        const tx = await triggerChat(subscriberId);
        await worker.runUntilIdle();
        const job = (await notificationOf(tx)).jobs[0];
        expect(job).toMatchObject({ status: 'failed', attempts: 1 });
        details.push(job.executionDetails.map((d: { status: string; detail: string; raw?: string }) => [d.status, d.detail, d.raw ?? null]));
      }
      expect(details[0]).toEqual([['failed', REFUSED_DESTINATION, null]]);
      expect(new Set(details.map((d) => JSON.stringify(d))).size).toBe(1);
      expect(open.requests).toHaveLength(0);
    } finally {
      await open.close();
    }
  });

  it('delivers to the same peer once its network is allowed', async () => {
    t.deps.config.outbound = { ...strict, allowedNetworks: [LOCAL_PEERS] };
    const hook = await startHttpPeer();
    try {
      await t.a.put('/v1/subscribers/ada/credentials', { providerId: 'slack', credentials: { webhookUrl: `http://hooks.example.test:${new URL(hook.url).port}/hook` } }).expect(200);
      const tx = await triggerChat();
      await worker.runUntilIdle();
      expect((await notificationOf(tx)).jobs[0]).toMatchObject({ status: 'completed', attempts: 1 });
      expect(hook.requests).toHaveLength(1);
    } finally {
      await hook.close();
    }
  });

  it('records a webhook that never answers as a retryable timeout', async () => {
    t.deps.config.outbound = { ...strict, allowedNetworks: [LOCAL_PEERS] };
    const sockets: net.Socket[] = [];
    const silent = net.createServer((socket) => void sockets.push(socket));
    await new Promise<void>((done) => silent.listen(0, '127.0.0.1', done));
    try {
      const port = (silent.address() as AddressInfo).port;
      await t.a.put('/v1/subscribers/ada/credentials', { providerId: 'slack', credentials: { webhookUrl: `http://127.0.0.1:${port}/hook` } }).expect(200);
      const tx = await triggerChat();
      const started = Date.now();
      await worker.runUntilIdle();
      expect(Date.now() - started).toBeLessThan(2_000);
      const job = (await notificationOf(tx)).jobs[0];
      expect(job).toMatchObject({ status: 'queued', attempts: 1 });
      expect(job.executionDetails[0].detail).toMatch(/did not answer within 0.3 s; retrying at/);
    } finally {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((done) => silent.close(() => done()));
    }
  });
});

describe('an Expo push to a dozen devices', () => {
  it('is sent once and records an outcome for every device token', async () => {
    t.deps.config.outbound = { ...strict, allowedNetworks: [LOCAL_PEERS] };
    const tokens = Array.from({ length: 12 }, (_, i) => `ExponentPushToken[dev${String(i).padStart(2, '0')}]`);
    const expo = await startHttpPeer(() => ({
      status: 200,
      body: JSON.stringify({
        data: tokens.map((_, i) =>
          i === 4 ? { status: 'error', message: 'not registered', details: { error: 'DeviceNotRegistered' } } : { status: 'ok', id: `7c1d5e9a-3f2b-4d8c-9e6a-${String(i).padStart(12, '0')}` },
        ),
      }),
    }));
    try {
      await createIntegration(t.a, { providerId: 'expo', credentials: { baseUrl: expo.url } });
      await t.a.put('/v1/subscribers/ada/credentials', { providerId: 'expo', credentials: { deviceTokens: tokens } }).expect(200);
      await createWorkflow(t.a, { name: 'Phone ping', steps: [step.push()] });
      const res = await t.a.post('/v1/events/trigger', { name: 'phone-ping', to: 'ada', payload: {} }).expect(201);
      await worker.runUntilIdle();
      t.clock.advance(60_000);
      await worker.runUntilIdle();
      expect(expo.requests).toHaveLength(1);
      const job = (await notificationOf(res.body.data.transactionId)).jobs[0];
      expect(job).toMatchObject({ status: 'completed', attempts: 1 });
      expect(job.executionDetails[0].detail).toBe('Push sent to 12 device(s): 11 of 12 tickets ok');
      const raw: string = job.executionDetails[0].raw;
      expect(raw).toMatch(/^200 11 of 12 tickets ok\./);
      for (const [i, token] of tokens.entries()) expect(raw).toContain(`#${i + 1} …${token.slice(-12)}: ${i === 4 ? 'DeviceNotRegistered' : 'ok'}`);
    } finally {
      await expo.close();
    }
  });
});
