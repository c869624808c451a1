import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { countTurns } from '../helpers/turns.js';
import { Webhook } from 'standardwebhooks';
import { useTestApp, type Client } from '../helpers/app.js';
import { createIntegration, createSubscriber, createWorkflow, step } from '../helpers/factories.js';
import { startWebhookReceiver } from '../helpers/webhook.js';
import { JobRunner } from '../../src/engine/runner.js';
import { systemClock } from '../../src/clock.js';
import { insertRows } from '../../src/db/insert-rows.js';
import { DELETED_AT_ONCE } from '../../src/db/delete-in-parts.js';
import { deleteEndpoint } from '../../src/engine/webhooks.js';
import { newId } from '../../src/ids.js';

// Webhook endpoints through the API, and the events of every kind reaching a real receiver on
// 127.0.0.1 that checks each signature with the `standardwebhooks` library, as a customer would.
// The runner signs with the real clock (the library checks the timestamp against it).
const t = useTestApp();
let receiver: Awaited<ReturnType<typeof startWebhookReceiver>>;
const runner = () => new JobRunner({ ...t.deps, clock: systemClock }, { random: () => 0.5 });

// The fields of the rendered message (WebhookMessageContent): only endpoints with includeContent get them.
const CONTENT_FIELDS = ['subject', 'preheader', 'title', 'content', 'url', 'avatar', 'primaryAction', 'secondaryAction', 'data'];
// Other peers a test starts, closed after it.
let peers: Array<{ close(): Promise<void> }> = [];

beforeEach(async () => {
  // The app's clock at the real time, so that what it writes and the runner's clock agree.
  t.clock.advance(Date.now() - t.clock.now().getTime());
  receiver = await startWebhookReceiver();
});
afterEach(async () => {
  await Promise.all([receiver, ...peers].map((peer) => peer.close()));
  peers = [];
});

async function createEndpoint(client: Client, body: Record<string, unknown> = {}) {
  return (await client.post('/v1/webhook-endpoints', { url: `${receiver.url}/hooks`, ...body }).expect(201)).body.data as { endpointId: string; secret: string };
}

describe('POST /v1/webhook-endpoints', () => {
  it('creates an endpoint with a whsec_ secret that only the create answer and the secret route show', async () => {
    const created = await createEndpoint(t.a, { description: 'billing', eventTypes: ['message.sent'] });
    expect(created.secret).toMatch(/^whsec_[A-Za-z0-9+/]+=*$/);
    expect(Buffer.from(created.secret.slice(6), 'base64')).toHaveLength(32);
    const got = (await t.a.get(`/v1/webhook-endpoints/${created.endpointId}`).expect(200)).body.data;
    expect(got).toMatchObject({ endpointId: created.endpointId, description: 'billing', eventTypes: ['message.sent'], disabled: false });
    expect(got.secret).toBeUndefined();
    expect((await t.a.get(`/v1/webhook-endpoints/${created.endpointId}/secret`).expect(200)).body.data).toEqual({ secret: created.secret });
    const list = (await t.a.get('/v1/webhook-endpoints').expect(200)).body;
    expect(list).toMatchObject({ totalCount: 1, data: [{ endpointId: created.endpointId }] });
  });

  it('stores the secret sealed at rest when the server has HERALD_SECRET, and shows it plain', async () => {
    const before = t.deps.config.secret;
    t.deps.config.secret = 'a-server-secret-for-this-test-0123456789';
    try {
      const created = await createEndpoint(t.a);
      const [row] = await t.db('webhook_endpoints').where({ id: created.endpointId }).select('secret');
      expect(row.secret).toMatch(/^enc:v1:/);
      expect(row.secret).not.toContain(created.secret.slice(6));
      expect((await t.a.get(`/v1/webhook-endpoints/${created.endpointId}/secret`).expect(200)).body.data.secret).toBe(created.secret);
      const rotated = (await t.a.post(`/v1/webhook-endpoints/${created.endpointId}/secret/rotate`, {}).expect(200)).body.data;
      const [after] = await t.db('webhook_endpoints').where({ id: created.endpointId }).select('secret', 'previous_secret');
      expect([after.secret, after.previous_secret].every((value: string) => value.startsWith('enc:v1:'))).toBe(true);
      expect((await t.a.get(`/v1/webhook-endpoints/${created.endpointId}/secret`).expect(200)).body.data.secret).toBe(rotated.secret);
    } finally {
      t.deps.config.secret = before;
    }
  });

  it('refuses a URL that is not a public address with 422 naming body/url', async () => {
    for (const url of ['http://169.254.169.254/latest', 'http://10.0.0.1/hook', 'http://localhost:9/hook', 'ftp://example.com/x']) {
      const res = await t.a.post('/v1/webhook-endpoints', { url }).expect(422);
      expect(res.body.details[0].field).toBe('body/url');
    }
  });

  it("answers 404 for another environment's endpoint", async () => {
    const created = await createEndpoint(t.a);
    await t.b.get(`/v1/webhook-endpoints/${created.endpointId}`).expect(404);
    await t.b.patch(`/v1/webhook-endpoints/${created.endpointId}`, { disabled: true }).expect(404);
    await t.b.delete(`/v1/webhook-endpoints/${created.endpointId}`).expect(404);
  });
});

describe('PATCH and DELETE /v1/webhook-endpoints/{endpointId}', () => {
  it('changes the fields given, clears with null, and deletes with 204', async () => {
    const created = await createEndpoint(t.a, { description: 'x', eventTypes: ['message.sent'], rateLimitPerSecond: 5 });
    const patched = (await t.a.patch(`/v1/webhook-endpoints/${created.endpointId}`, { description: null, eventTypes: null, rateLimitPerSecond: null, includeContent: true }).expect(200)).body.data;
    expect(patched.description).toBeUndefined();
    expect(patched.eventTypes).toBeUndefined();
    expect(patched.rateLimitPerSecond).toBeUndefined();
    expect(patched.includeContent).toBe(true);
    await t.a.delete(`/v1/webhook-endpoints/${created.endpointId}`).expect(204);
    await t.a.get(`/v1/webhook-endpoints/${created.endpointId}`).expect(404);
  });

  it('deletes an endpoint with a large backlog of deliveries a part at a time, letting the event loop turn between the parts', async () => {
    const parts = 10;
    const { endpointId } = await createEndpoint(t.a, { rateLimitPerSecond: 1 });
    const at = t.clock.now().toISOString();
    await insertRows(
      t.db,
      'webhook_deliveries',
      Array.from({ length: parts * DELETED_AT_ONCE }, (_, i) => ({
        id: newId(),
        environment_id: t.environments.a,
        endpoint_id: endpointId,
        event_id: `msg_${i}`,
        event_type: 'message.sent',
        payload: '{}',
        status: 'pending',
        run_at: at,
        created_at: at,
        updated_at: at,
      })),
    );

    // Counts the loop's turns while the delete runs: one statement for the whole backlog (SQLite
    // runs it on the loop) lets none happen in between.
    const turns = countTurns();
    await deleteEndpoint(t.deps, t.environments.a, endpointId);
    const turnsTaken = turns.stop();

    expect(turnsTaken).toBeGreaterThanOrEqual(parts - 1);
    expect(await t.db('webhook_deliveries').where('endpoint_id', endpointId).count({ n: '*' })).toEqual([{ n: 0 }]);
    await t.a.get(`/v1/webhook-endpoints/${endpointId}`).expect(404);
  });
});

describe('POST /v1/webhook-endpoints/{endpointId}/test', () => {
  it('delivers a signed webhook.test that standardwebhooks verifies, and lists the try', async () => {
    const created = await createEndpoint(t.a, { eventTypes: ['message.failed'] });
    const queued = (await t.a.post(`/v1/webhook-endpoints/${created.endpointId}/test`).expect(200)).body.data;
    expect(queued).toMatchObject({ eventType: 'webhook.test', status: 'pending' });
    await runner().runUntilIdle();
    const [event] = receiver.verified(created.secret);
    expect(event).toMatchObject({ type: 'webhook.test', environmentId: t.environments.a, data: { endpointId: created.endpointId } });
    expect(receiver.requests[0].headers['webhook-id']).toBe(queued.eventId);
    const deliveries = (await t.a.get(`/v1/webhook-endpoints/${created.endpointId}/deliveries?status=succeeded`).expect(200)).body.data;
    expect(deliveries).toHaveLength(1);
    expect(deliveries[0].attempts).toEqual([expect.objectContaining({ attempt: 1, trigger: 'scheduled', statusCode: 200, response: '{"ok":true}' })]);
  });
});

describe('POST /v1/webhook-endpoints/{endpointId}/secret/rotate', () => {
  it('signs with both secrets during the grace period, and with the new one alone after a rotation without grace', async () => {
    const created = await createEndpoint(t.a);
    const rotated = (await t.a.post(`/v1/webhook-endpoints/${created.endpointId}/secret/rotate`, { gracePeriodSeconds: 3600 }).expect(200)).body.data;
    expect(rotated.secret).not.toBe(created.secret);
    expect(rotated.previousSecretExpiresAt).toBe(new Date(t.clock.now().getTime() + 3_600_000).toISOString());
    await t.a.post(`/v1/webhook-endpoints/${created.endpointId}/test`).expect(200);
    await runner().runUntilIdle();
    expect(String(receiver.requests[0].headers['webhook-signature']).split(' ')).toHaveLength(2);
    expect(receiver.verified(created.secret)).toHaveLength(1);
    expect(receiver.verified(rotated.secret)).toHaveLength(1);

    const again = (await t.a.post(`/v1/webhook-endpoints/${created.endpointId}/secret/rotate`, { gracePeriodSeconds: 0 }).expect(200)).body.data;
    receiver.requests.length = 0;
    await t.a.post(`/v1/webhook-endpoints/${created.endpointId}/test`).expect(200);
    await runner().runUntilIdle();
    expect(receiver.verified(again.secret)).toHaveLength(1);
    expect(() => receiver.verified(rotated.secret)).toThrow();
  });

  it('keeps the old secret 24 hours when no grace period is given', async () => {
    const created = await createEndpoint(t.a);
    const rotated = (await t.a.post(`/v1/webhook-endpoints/${created.endpointId}/secret/rotate`).expect(200)).body.data;
    expect(rotated.previousSecretExpiresAt).toBe(new Date(t.clock.now().getTime() + 86_400_000).toISOString());
    expect((await t.a.get(`/v1/webhook-endpoints/${created.endpointId}/secret`).expect(200)).body.data).toEqual(rotated);
  });
});

describe('the events', () => {
  it('sends message.delivered for an in-app step, then message.seen and message.read when it is marked', async () => {
    const endpoint = await createEndpoint(t.a);
    await createSubscriber(t.a, { subscriberId: 'ada' });
    const workflow = await createWorkflow(t.a, { steps: [step.inApp({ content: 'Hi' })] });
    const triggered = (await t.a.post('/v1/events/trigger', { name: workflow.workflowId, to: 'ada' }).expect(201)).body.data;
    await runner().runUntilIdle();
    const [message] = (await t.a.get('/v1/subscribers/ada/messages').expect(200)).body.data;
    await t.a.patch(`/v1/subscribers/ada/messages/${message.messageId}`, { read: true }).expect(200);
    await t.a.patch(`/v1/subscribers/ada/messages/${message.messageId}`, { read: true }).expect(200);
    await runner().runUntilIdle();
    const events = receiver.verified(endpoint.secret);
    expect(events.map((e) => e.type).sort()).toEqual(['message.delivered', 'message.read', 'message.seen']);
    const delivered = events.find((e) => e.type === 'message.delivered')!;
    expect(delivered.data).toMatchObject({ messageId: message.messageId, subscriberId: 'ada', transactionId: triggered.transactionId, workflowId: workflow.workflowId, channel: 'in_app', providerId: 'herald' });
    expect(delivered.data.content).toBeUndefined();
    expect(events.find((e) => e.type === 'message.read')!.data).toMatchObject({ messageId: message.messageId, seen: true, read: true });
  });

  it('sends message.seen, message.read and message.archived for changes made from the inbox, one message or in bulk', async () => {
    const endpoint = await createEndpoint(t.a, { eventTypes: ['message.seen', 'message.read', 'message.archived'] });
    await createSubscriber(t.a, { subscriberId: 'ada' });
    const workflow = await createWorkflow(t.a, { steps: [step.inApp({ content: 'Hi {{payload.n}}' })] });
    for (const n of [1, 2, 3]) await t.a.post('/v1/events/trigger', { name: workflow.workflowId, to: 'ada', payload: { n } }).expect(201);
    await runner().runUntilIdle();
    const token = (await t.a.post('/v1/subscribers/ada/inbox-tokens', {}).expect(201)).body.data.token as string;
    const inbox = (method: 'get' | 'patch' | 'post', path: string) => t.http[method](`/v1/inbox${path}`).set('Authorization', `Bearer ${token}`);
    const items = (await inbox('get', '/messages').expect(200)).body.data as Array<{ messageId: string }>;
    // One message archived from a device: it is seen and archived, not read.
    await inbox('patch', `/messages/${items[0].messageId}`).send({ seen: true, archived: true }).expect(200);
    // Then "mark all read": the other two become seen and read; the first only read.
    await inbox('post', '/messages/bulk').send({ set: { read: true } }).expect(200);
    await runner().runUntilIdle();
    const events = receiver.verified(endpoint.secret).map((e) => `${e.type} ${(e.data as { messageId: string }).messageId}`);
    const [first, second, third] = items.map((item) => item.messageId);
    expect(events.sort()).toEqual(
      [
        `message.archived ${first}`,
        `message.seen ${first}`,
        `message.read ${first}`,
        `message.seen ${second}`,
        `message.read ${second}`,
        `message.seen ${third}`,
        `message.read ${third}`,
      ].sort(),
    );
  });

  it("carries the stored in-app item's rendered fields only to an endpoint with includeContent", async () => {
    const plain = await createEndpoint(t.a);
    const other = await startWebhookReceiver();
    peers.push(other);
    const full = await createEndpoint(t.a, { url: `${other.url}/hooks`, includeContent: true });
    await createSubscriber(t.a, { subscriberId: 'ada' });
    const template = {
      subject: 'Plans for {{payload.project}}',
      content: 'Secret plans for {{payload.project}}',
      url: 'https://example.com/{{payload.project}}',
      avatar: 'https://example.com/avatars/{{subscriber.subscriberId}}.png',
      primaryAction: { label: 'Open {{payload.project}}', url: 'https://example.com/{{payload.project}}/open' },
      data: { project: '{{payload.project}}' },
    };
    const workflow = await createWorkflow(t.a, { steps: [step.inApp(template)] });
    await t.a.post('/v1/events/trigger', { name: workflow.workflowId, to: 'ada', payload: { project: 'apollo' } }).expect(201);
    await runner().runUntilIdle();
    const [bare] = receiver.verified(plain.secret);
    const [rendered] = other.verified(full.secret);
    expect(rendered.type).toBe('message.delivered');
    expect(rendered.data).toEqual({
      ...bare.data,
      subject: 'Plans for apollo',
      content: 'Secret plans for apollo',
      url: 'https://example.com/apollo',
      avatar: 'https://example.com/avatars/ada.png',
      primaryAction: { label: 'Open apollo', url: 'https://example.com/apollo/open' },
      data: { project: 'apollo' },
    });
    for (const field of CONTENT_FIELDS) expect(bare.data).not.toHaveProperty(field);
    expect(other.requests[0].headers['webhook-id']).toBe(receiver.requests[0].headers['webhook-id']);
  });

  it('carries the rendered email, SMS, chat and push message on message.sent only to an endpoint with includeContent', async () => {
    const plain = await createEndpoint(t.a);
    const other = await startWebhookReceiver();
    const provider = await startWebhookReceiver();
    peers.push(other, provider);
    const full = await createEndpoint(t.a, { url: `${other.url}/hooks`, includeContent: true });
    await t.a.post('/v1/integrations', { providerId: 'sendgrid', credentials: { apiKey: 'SG.key', from: 'herald@example.com', baseUrl: provider.url } }).expect(201);
    await t.a.post('/v1/integrations', { providerId: 'twilio', credentials: { accountSid: 'AC1', token: 'tok', from: '+15005550006', baseUrl: provider.url } }).expect(201);
    await t.a.post('/v1/integrations', { providerId: 'push-webhook', credentials: { webhookUrl: `${provider.url}/push`, secretKey: 'k' } }).expect(201);
    await createIntegration(t.a);
    await createSubscriber(t.a, { subscriberId: 'ada', email: 'ada@example.com', phone: '+447700900123' });
    await t.a.put('/v1/subscribers/ada/credentials', { providerId: 'slack', credentials: { webhookUrl: `${provider.url}/slack` } }).expect(200);
    await t.a.put('/v1/subscribers/ada/credentials', { providerId: 'push-webhook', credentials: { deviceTokens: ['device-1'] } }).expect(200);
    const workflow = await createWorkflow(t.a, {
      steps: [
        step.email({ subject: 'Order {{payload.order}}', preheader: 'Arrives {{payload.day}}', content: '<p>Order <b>{{payload.order}}</b> shipped</p>' }),
        step.sms({ content: 'SMS: order {{payload.order}}' }),
        step.chat({ content: 'Chat: order {{payload.order}}' }),
        step.push({ title: 'Order {{payload.order}}', content: 'Push: order {{payload.order}}' }),
      ],
    });
    await t.a.post('/v1/events/trigger', { name: workflow.workflowId, to: 'ada', payload: { order: '42', day: 'Friday' } }).expect(201);
    await runner().runUntilIdle();
    const sent = other.verified(full.secret);
    expect(sent.map((e) => e.type)).toEqual(['message.sent', 'message.sent', 'message.sent', 'message.sent']);
    const contentOf = (channel: string) => {
      const { subject, title, content, preheader } = sent.find((e) => e.data.channel === channel)!.data;
      return { subject, title, content, preheader };
    };
    expect(contentOf('email')).toEqual({ subject: 'Order 42', title: undefined, content: '<p>Order <b>42</b> shipped</p>', preheader: 'Arrives Friday' });
    expect(contentOf('sms')).toEqual({ subject: undefined, title: undefined, content: 'SMS: order 42', preheader: undefined });
    expect(contentOf('chat')).toEqual({ subject: undefined, title: undefined, content: 'Chat: order 42', preheader: undefined });
    expect(contentOf('push')).toEqual({ subject: undefined, title: 'Order 42', content: 'Push: order 42', preheader: undefined });
    const bare = receiver.verified(plain.secret);
    expect(bare.map((e) => e.data.channel).sort()).toEqual(['chat', 'email', 'push', 'sms']);
    for (const event of bare) for (const field of CONTENT_FIELDS) expect(event.data).not.toHaveProperty(field);
    const ids = (peer: typeof receiver) => peer.requests.map((r) => String(r.headers['webhook-id'])).sort();
    expect(ids(receiver)).toEqual(ids(other));
  });

  it('carries the message that failed on message.failed to an endpoint with includeContent', async () => {
    const other = await startWebhookReceiver();
    const slack = await startWebhookReceiver(() => ({ status: 400 }));
    peers.push(other, slack);
    const full = await createEndpoint(t.a, { url: `${other.url}/hooks`, includeContent: true, eventTypes: ['message.failed'] });
    await createIntegration(t.a);
    await createSubscriber(t.a, { subscriberId: 'ada' });
    await t.a.put('/v1/subscribers/ada/credentials', { providerId: 'slack', credentials: { webhookUrl: `${slack.url}/refuses` } }).expect(200);
    const workflow = await createWorkflow(t.a, { steps: [step.chat({ content: 'Chat for {{subscriber.subscriberId}}' })] });
    await t.a.post('/v1/events/trigger', { name: workflow.workflowId, to: 'ada' }).expect(201);
    await runner().runUntilIdle();
    expect(other.verified(full.secret)).toEqual([
      expect.objectContaining({ type: 'message.failed', data: expect.objectContaining({ channel: 'chat', content: 'Chat for ada', error: expect.objectContaining({ message: expect.stringContaining('400') }) }) }),
    ]);
  });

  it('sends message.sent, message.attempt_failed and message.failed for chat sends, and message.skipped with its reason', async () => {
    const endpoint = await createEndpoint(t.a);
    const slack = await startWebhookReceiver((request) => (request.path.includes('broken') ? { status: 500 } : request.path.includes('refuses') ? { status: 400 } : { status: 200 }));
    try {
      await createIntegration(t.a);
      const workflow = await createWorkflow(t.a, { steps: [step.chat({ content: 'Hi' }, { conditions: [{ field: 'payload.go', operator: 'eq', value: true }] })] });
      for (const subscriberId of ['fine', 'broken', 'refuses', 'skipped']) {
        await createSubscriber(t.a, { subscriberId });
        await t.a.put(`/v1/subscribers/${subscriberId}/credentials`, { providerId: 'slack', credentials: { webhookUrl: `${slack.url}/${subscriberId}` } }).expect(200);
      }
      await t.a.post('/v1/events/trigger', { name: workflow.workflowId, to: ['fine', 'broken', 'refuses'], payload: { go: true } }).expect(201);
      await t.a.post('/v1/events/trigger', { name: workflow.workflowId, to: ['skipped'], payload: { go: false } }).expect(201);
      await runner().runUntilIdle();
      const events = receiver.verified(endpoint.secret);
      const bySubscriber = (id: string) => events.filter((e) => e.data.subscriberId === id).map((e) => e.type);
      expect(bySubscriber('fine')).toEqual(['message.sent']);
      expect(bySubscriber('broken')).toEqual(['message.attempt_failed']);
      expect(bySubscriber('refuses')).toEqual(['message.failed']);
      expect(bySubscriber('skipped')).toEqual(['message.skipped']);
      expect(events.find((e) => e.type === 'message.sent')!.data).toMatchObject({ channel: 'chat', providerId: 'slack', stepId: expect.any(String) });
      expect(events.find((e) => e.type === 'message.attempt_failed')!.data).toMatchObject({ attempt: 1, maxAttempts: 5, retryable: true, nextAttemptAt: expect.any(String), error: { message: expect.stringContaining('500') } });
      expect(events.find((e) => e.type === 'message.failed')!.data).toMatchObject({ attempts: 1, error: { message: expect.stringContaining('400') } });
      expect(events.find((e) => e.type === 'message.skipped')!.data).toMatchObject({ reason: 'condition' });
    } finally {
      await slack.close();
    }
  });

  it('sends message.skipped with reason preference when the subscriber turned the channel off', async () => {
    const endpoint = await createEndpoint(t.a, { eventTypes: ['message.skipped'] });
    await createSubscriber(t.a, { subscriberId: 'ada' });
    const workflow = await createWorkflow(t.a, { steps: [step.inApp()] });
    await t.a.patch('/v1/subscribers/ada/preferences', { channels: { in_app: false } }).expect(200);
    await t.a.post('/v1/events/trigger', { name: workflow.workflowId, to: 'ada' }).expect(201);
    await runner().runUntilIdle();
    expect(receiver.verified(endpoint.secret)).toEqual([expect.objectContaining({ type: 'message.skipped', data: expect.objectContaining({ reason: 'preference' }) })]);
  });

  it('sends notification.canceled when an event is canceled, and only the types an endpoint asked for', async () => {
    const endpoint = await createEndpoint(t.a, { eventTypes: ['notification.canceled'] });
    await createSubscriber(t.a, { subscriberId: 'ada' });
    const workflow = await createWorkflow(t.a, { steps: [step.delay(5), step.inApp()] });
    const { transactionId } = (await t.a.post('/v1/events/trigger', { name: workflow.workflowId, to: 'ada' }).expect(201)).body.data;
    await runner().runUntilIdle();
    await t.a.delete(`/v1/events/trigger/${transactionId}`).expect(200);
    await runner().runUntilIdle();
    expect(receiver.verified(endpoint.secret)).toEqual([
      expect.objectContaining({ type: 'notification.canceled', data: expect.objectContaining({ transactionId, subscriberId: 'ada', workflowId: workflow.workflowId }) }),
    ]);
  });

  it('records nothing for a disabled endpoint, or for an environment without endpoints', async () => {
    const endpoint = await createEndpoint(t.a, { disabled: true });
    await createSubscriber(t.a, { subscriberId: 'ada' });
    const workflow = await createWorkflow(t.a, { steps: [step.inApp()] });
    await t.a.post('/v1/events/trigger', { name: workflow.workflowId, to: 'ada' }).expect(201);
    await runner().runUntilIdle();
    expect(await t.db('webhook_deliveries').where({ endpoint_id: endpoint.endpointId })).toHaveLength(0);
  });
});

describe('the events of notifications that ride in a digest', () => {
  // The digest's window is waited out on the app's clock (set to the real time above), so the
  // runner runs on it too: the signatures' timestamps stay within standardwebhooks' five minutes.
  const digestRunner = () => new JobRunner(t.deps, { random: () => 0.5 });
  const notificationOf = async (transactionId: string) => (await t.a.get(`/v1/notifications?transactionId=${transactionId}`).expect(200)).body.data[0];

  async function digestOf(subscriberId: string, workflowId: string, count: number): Promise<string[]> {
    const transactionIds: string[] = [];
    for (let n = 1; n <= count; n++) {
      transactionIds.push((await t.a.post('/v1/events/trigger', { name: workflowId, to: subscriberId, payload: { n } }).expect(201)).body.data.transactionId);
    }
    return transactionIds;
  }

  it("tells each notification merged into a digest the outcome of the send that carried it, naming the carrier in digestedInto", async () => {
    const plain = await createEndpoint(t.a);
    const other = await startWebhookReceiver();
    const slack = await startWebhookReceiver();
    peers.push(other, slack);
    const full = await createEndpoint(t.a, { url: `${other.url}/hooks`, includeContent: true });
    await createIntegration(t.a);
    for (const subscriberId of ['ada', 'bob']) {
      await createSubscriber(t.a, { subscriberId });
      await t.a.put(`/v1/subscribers/${subscriberId}/credentials`, { providerId: 'slack', credentials: { webhookUrl: `${slack.url}/${subscriberId}` } }).expect(200);
    }
    // Bob turned chat off: his digest's chat step is skipped, for every notification in it.
    await t.a.patch('/v1/subscribers/bob/preferences', { channels: { chat: false } }).expect(200);
    const content = '{{step.total_count}} comments: {{#each step.events}}{{this.n}};{{/each}}';
    const workflow = await createWorkflow(t.a, { steps: [step.digest(1), step.inApp({ content }), step.chat({ content })] });
    const ada = await digestOf('ada', workflow.workflowId, 3);
    const bob = await digestOf('bob', workflow.workflowId, 2);
    await digestRunner().runUntilIdle();
    expect(receiver.requests).toHaveLength(0);
    t.clock.advance(60_000);
    await digestRunner().runUntilIdle();

    const [adaCarrier, ...adaRiders] = await Promise.all(ada.map(notificationOf));
    const [bobCarrier, ...bobRiders] = await Promise.all(bob.map(notificationOf));
    const events = receiver.verified(plain.secret);
    const told = (notification: { notificationId: string }) =>
      events
        .filter((e) => e.data.notificationId === notification.notificationId)
        .map((e) => `${e.type} ${e.data.channel} ${(e.data.digestedInto as string | undefined) ?? 'carrier'}`)
        .sort();
    expect(told(adaCarrier)).toEqual(['message.delivered in_app carrier', 'message.sent chat carrier']);
    for (const rider of adaRiders) expect(told(rider)).toEqual([`message.delivered in_app ${adaCarrier.notificationId}`, `message.sent chat ${adaCarrier.notificationId}`]);
    expect(told(bobCarrier)).toEqual(['message.delivered in_app carrier', 'message.skipped chat carrier']);
    expect(told(bobRiders[0])).toEqual([`message.delivered in_app ${bobCarrier.notificationId}`, `message.skipped chat ${bobCarrier.notificationId}`]);
    expect(events).toHaveLength(10);

    // A rider's event is its own (its transaction, its webhook-id) about the carrier's send (its job, its message).
    const delivered = (transactionId: string) => events.find((e) => e.type === 'message.delivered' && e.data.transactionId === transactionId)!;
    const carrierDelivered = delivered(ada[0]);
    expect(delivered(ada[1]).data).toEqual({ ...carrierDelivered.data, notificationId: adaRiders[0].notificationId, transactionId: ada[1], digestedInto: adaCarrier.notificationId });
    expect(new Set(receiver.requests.map((r) => r.headers['webhook-id'])).size).toBe(10);
    expect(events.find((e) => e.type === 'message.skipped' && e.data.transactionId === bob[1])!.data).toMatchObject({ reason: 'preference', subscriberId: 'bob' });
    expect(events.every((e) => e.data.content === undefined)).toBe(true);

    // An endpoint with includeContent gets the digest's one rendering in the riders' events too.
    const withContent = other.verified(full.secret).filter((e) => e.data.subscriberId === 'ada');
    expect(withContent).toHaveLength(6);
    expect(withContent.every((e) => e.data.content === '3 comments: 1;2;3;')).toBe(true);
  });

  it('names the notification that took the send over when the one that opened the digest was canceled after it closed', async () => {
    const endpoint = await createEndpoint(t.a, { eventTypes: ['message.delivered', 'notification.canceled'] });
    await createSubscriber(t.a, { subscriberId: 'ada' });
    const workflow = await createWorkflow(t.a, { steps: [step.digest(1), step.delay(1), step.inApp({ content: '{{step.total_count}} new' })] });
    const [first, second, third] = await digestOf('ada', workflow.workflowId, 3);
    await digestRunner().runUntilIdle();
    t.clock.advance(60_000);
    await digestRunner().runUntilIdle();
    // The digest has closed and its send waits out the delay: the event that opened it is canceled.
    await t.a.delete(`/v1/events/trigger/${first}`).expect(200);
    t.clock.advance(60_000);
    await digestRunner().runUntilIdle();
    const heir = await notificationOf(second);
    const told = receiver.verified(endpoint.secret).map((e) => `${e.type} ${e.data.transactionId} ${e.data.digestedInto === heir.notificationId ? 'rides' : (e.data.digestedInto ?? 'alone')}`);
    expect(told.sort()).toEqual([`message.delivered ${second} alone`, `message.delivered ${third} rides`, `notification.canceled ${first} alone`].sort());
  });

  it("tells the riders nothing while the digest is open, nor of its send's retries: only of the send's outcome", async () => {
    const slack = await startWebhookReceiver((_request, index) => ({ status: index === 0 ? 500 : 200 }));
    peers.push(slack);
    const endpoint = await createEndpoint(t.a, { eventTypes: ['message.attempt_failed', 'message.sent'] });
    await createIntegration(t.a);
    await createSubscriber(t.a, { subscriberId: 'ada' });
    await t.a.put('/v1/subscribers/ada/credentials', { providerId: 'slack', credentials: { webhookUrl: `${slack.url}/ada` } }).expect(200);
    const workflow = await createWorkflow(t.a, { steps: [step.digest(1), step.chat()] });
    const [first, second] = await digestOf('ada', workflow.workflowId, 2);
    await digestRunner().runUntilIdle();
    t.clock.advance(60_000);
    await digestRunner().runUntilIdle();
    expect(receiver.verified(endpoint.secret)).toEqual([expect.objectContaining({ type: 'message.attempt_failed', data: expect.objectContaining({ transactionId: first }) })]);
    t.clock.advance(60_000);
    await digestRunner().runUntilIdle();
    const sent = receiver.verified(endpoint.secret).slice(1);
    expect(sent.map((e) => [e.type, e.data.transactionId, e.data.digestedInto !== undefined]).sort()).toEqual([
      ['message.sent', first, false],
      ['message.sent', second, true],
    ].sort());
  });
});

describe('deliveries, retry and recover', () => {
  it('lists failed deliveries by status and type, retries one by hand, and recovers the rest', async () => {
    let failing = true;
    const flaky = await startWebhookReceiver(() => ({ status: failing ? 503 : 200 }));
    try {
      const endpoint = (await t.a.post('/v1/webhook-endpoints', { url: `${flaky.url}/h` }).expect(201)).body.data;
      const since = t.clock.now().toISOString();
      await t.a.post(`/v1/webhook-endpoints/${endpoint.endpointId}/test`).expect(200);
      await t.a.post(`/v1/webhook-endpoints/${endpoint.endpointId}/test`).expect(200);
      await runner().runUntilIdle();
      const pending = (await t.a.get(`/v1/webhook-endpoints/${endpoint.endpointId}/deliveries?status=pending&eventType=webhook.test`).expect(200)).body.data;
      expect(pending).toHaveLength(2);
      expect(pending[0]).toMatchObject({ nextAttemptAt: expect.any(String), attempts: [expect.objectContaining({ statusCode: 503, error: expect.stringContaining('503') })] });
      await t.db('webhook_deliveries').where({ endpoint_id: endpoint.endpointId }).update({ status: 'failed' });
      failing = false;
      const retried = (await t.a.post(`/v1/webhook-deliveries/${pending[0].deliveryId}/retry`).expect(200)).body.data;
      expect(retried.status).toBe('pending');
      await runner().runUntilIdle();
      const after = (await t.a.get(`/v1/webhook-endpoints/${endpoint.endpointId}/deliveries?status=succeeded`).expect(200)).body.data;
      expect(after).toEqual([expect.objectContaining({ deliveryId: pending[0].deliveryId, attempts: expect.arrayContaining([expect.objectContaining({ trigger: 'manual', statusCode: 200 })]) })]);
      // A window that ends where (or before) it starts is a mistake, not an empty recovery.
      const backwards = await t.a.post(`/v1/webhook-endpoints/${endpoint.endpointId}/recover`, { since, until: since }).expect(422);
      expect(backwards.body.message).toMatch(/until must be after since/);
      const recovered = (await t.a.post(`/v1/webhook-endpoints/${endpoint.endpointId}/recover`, { since }).expect(200)).body.data;
      expect(recovered).toEqual({ queued: 1 });
      await runner().runUntilIdle();
      expect((await t.a.get(`/v1/webhook-endpoints/${endpoint.endpointId}/deliveries?status=succeeded`).expect(200)).body.totalCount).toBe(2);
      expect(new Set(flaky.requests.map((r) => r.headers['webhook-id'])).size).toBe(2);
      await t.a.post('/v1/webhook-deliveries/0194f2a1c3b27e4d9a1f0c80/retry').expect(404);
    } finally {
      await flaky.close();
    }
  });

  it('gives a try its 15 s to be answered, whatever shorter timeouts the providers have', async () => {
    const slow = await startWebhookReceiver(() => new Promise((resolve) => setTimeout(() => resolve({ status: 200 }), 600)));
    try {
      const endpoint = (await t.a.post('/v1/webhook-endpoints', { url: `${slow.url}/h` }).expect(201)).body.data;
      await t.a.post(`/v1/webhook-endpoints/${endpoint.endpointId}/test`).expect(200);
      const outbound = { ...t.deps.config.outbound, timeouts: { connectMs: 300, firstByteMs: 300, sendMs: 300 } };
      await new JobRunner({ ...t.deps, clock: systemClock, config: { ...t.deps.config, outbound } }, { random: () => 0.5 }).runUntilIdle();
      const [delivery] = (await t.a.get(`/v1/webhook-endpoints/${endpoint.endpointId}/deliveries`).expect(200)).body.data;
      expect(delivery).toMatchObject({ status: 'succeeded', attempts: [expect.objectContaining({ statusCode: 200 })] });
    } finally {
      await slow.close();
    }
  });

  it('verifies with standardwebhooks from the raw body alone', async () => {
    const endpoint = await createEndpoint(t.a);
    await t.a.post(`/v1/webhook-endpoints/${endpoint.endpointId}/test`).expect(200);
    await runner().runUntilIdle();
    const request = receiver.requests[0];
    expect(() => new Webhook(endpoint.secret).verify(request.body + ' ', request.headers as Record<string, string>)).toThrow();
  });
});
