// Novu's own published SDK, `@novu/api@0.0.1`, driven against a real Herald server over HTTP: which of
// its calls work unchanged, and exactly how the others fail. 0.0.1 is the only release of `@novu/api`
// whose subscriber, topic, preference, credential and integration calls all use `/v1` paths
// (`../shared/reference/novu-sdk-wire.md`); later releases move most of them to `/v2`.
// The events calls (trigger, triggerBulk, cancel) are left out here.
import type { IncomingHttpHeaders, IncomingMessage, Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { Novu } from '@novu/api';
import { ErrorDto, SDKError, SDKValidationError } from '@novu/api/models/errors/index.js';
import { resolveGlobalSecurity } from '@novu/api/lib/security.js';
import { startTestApp, type TestApp } from '../helpers/app.js';
import { createIntegration, createSubscriber, createTopic, createWorkflow } from '../helpers/factories.js';
import { startHttpPeer, startSmtpPeer } from '../helpers/peers.js';
import { JobRunner } from '../../src/engine/runner.js';

let t: TestApp;
let server: Server;
let serverURL: string;
let novu: Novu;

/** An SDK client the way a Novu user makes one, pointed at Herald. */
function sdk(apiKey: string): Novu {
  return new Novu({
    apiKey,
    // The origin only: every operation path already starts with /v1.
    serverURL,
    // By default the SDK retries 408, 409, 429 and 5xx with backoff for up to an hour, so a 409
    // would look like a hang; the tests want each answer at once.
    retryConfig: { strategy: 'none' },
    timeoutMs: 10_000,
  });
}

/** The error a call rejects with; fails the test if the call succeeds. */
async function failure(call: Promise<unknown>): Promise<unknown> {
  try {
    await call;
  } catch (err) {
    return err;
  }
  throw new Error('expected the SDK call to fail, but it succeeded');
}

/** Records the headers of the requests the server receives while `work` runs. */
async function requestsDuring(work: () => Promise<unknown>): Promise<Array<{ method?: string; url?: string; headers: IncomingHttpHeaders }>> {
  const seen: Array<{ method?: string; url?: string; headers: IncomingHttpHeaders }> = [];
  const record = (req: IncomingMessage) => seen.push({ method: req.method, url: req.url, headers: req.headers });
  server.prependListener('request', record);
  try {
    await work();
  } finally {
    server.off('request', record);
  }
  return seen;
}

/**
 * A request the SDK has no method for (0.0.1 has none for workflows), made through the SDK's own
 * client: its `ApiKey` header, its hooks (which unwrap `{data: …}`), no retries. Answers the status
 * and the body as the hooks left it.
 */
async function sdkRequest(method: string, path: string): Promise<{ status: number; body: unknown }> {
  const security = resolveGlobalSecurity({ apiKey: t.a.key });
  const retryConfig = { strategy: 'none' } as const;
  const context = { operationID: `herald ${method} ${path}`, oAuth2Scopes: [], resolvedSecurity: security, securitySource: t.a.key, retryConfig, retryCodes: [] };
  const request = novu._createRequest(context, { method, path, security, timeoutMs: 10_000 });
  if (!request.ok) throw request.error;
  const response = await novu._do(request.value, { context, errorCodes: ['4XX', '5XX'], retryConfig, retryCodes: [] });
  if (!response.ok) throw response.error;
  return { status: response.value.status, body: await response.value.json() };
}

/** The id of an integration, read past the SDK: its results carry none (see the integrations tests). */
async function integrationIdOf(identifier: string): Promise<string> {
  const res = await t.a.get('/v1/integrations?includeInactive=true&limit=100').expect(200);
  const found = (res.body.data as Array<{ integrationId: string; identifier: string }>).find((i) => i.identifier === identifier);
  if (!found) throw new Error(`no integration ${identifier}`);
  return found.integrationId;
}

const now = () => t.clock.now().toISOString();
const SLACK_URL = 'https://hooks.slack.com/services/T000/B000/XXXX';
/** How answers show SLACK_URL: a webhook URL is a credential, masked. */
const SLACK_SHOWN = 'https://hooks.slack.com/…XXXX';

beforeAll(async () => {
  t = await startTestApp();
  server = t.app.listen(0, '127.0.0.1');
  await new Promise<void>((resolve, reject) => {
    server.once('listening', resolve);
    server.once('error', reject);
  });
  serverURL = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
// Each test starts from organizations of its own, with a client of its own: it makes what it reads.
beforeEach(async () => {
  await t.renew();
  novu = sdk(t.a.key);
});
beforeEach(() => t.clock.advance(1000));
afterEach(async () => t.assertContract());
afterAll(async () => {
  if (server) {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }
  await t?.close();
});

/** Ada as the first subscribers test creates her. */
const ADA = {
  subscriberId: 'ada',
  email: 'ada@example.com',
  firstName: 'Ada',
  lastName: 'Lovelace',
  phone: '+447700900123',
  locale: 'en-GB',
  data: { plan: 'pro' },
};
/** Ada, made through the API (`firstName` overridable). */
const createAda = (overrides: Record<string, unknown> = {}) => createSubscriber(t.a, { ...ADA, ...overrides });
/** The Slack integration the first integrations test creates. */
const createTeamSlack = () => createIntegration(t.a, { providerId: 'slack', channel: 'chat', name: 'Team Slack', identifier: 'team-slack', active: true });

describe('transport', () => {
  it('sends Authorization: ApiKey <key>, which Herald accepts', async () => {
    await t.a.post('/v1/subscribers', { subscriberId: 'transport-check' }).expect(201);
    let result: unknown;
    const seen = await requestsDuring(async () => {
      result = (await novu.subscribers.retrieve('transport-check')).result;
    });
    expect(seen).toHaveLength(1);
    expect(seen[0]).toMatchObject({ method: 'GET', url: '/v1/subscribers/transport-check' });
    expect(seen[0].headers.authorization).toBe(`ApiKey ${t.a.key}`);
    expect(seen[0].headers['user-agent']).toBe('speakeasy-sdk/typescript 0.0.1 2.493.21 1.0 @novu/api');
    expect(seen[0].headers['idempotency-key']).toMatch(/^\d{13}[0-9a-z]+$/);
    expect(result).toMatchObject({ subscriberId: 'transport-check' });
  });

  it('gets a typed ErrorDto 401 for an unknown key, since the error body has timestamp and path', async () => {
    await createSubscriber(t.a, { subscriberId: 'transport-check' });
    const err = await failure(sdk('hk_not-a-key').subscribers.retrieve('transport-check'));
    expect(err).toBeInstanceOf(ErrorDto);
    expect(err).toMatchObject({ statusCode: 401, message: 'Invalid API key', path: '/v1/subscribers/transport-check' });
    expect(Number.isNaN(Date.parse((err as ErrorDto).timestamp))).toBe(false);
  });
});

describe('subscribers', () => {
  it('create: answers 201 and the SDK returns the subscriber', async () => {
    const createdAt = now();
    const res = await novu.subscribers.create(ADA);
    // `data` is not in the SDK's Subscriber schema, so zod strips it.
    expect(res.result).toEqual({
      subscriberId: 'ada',
      email: 'ada@example.com',
      firstName: 'Ada',
      lastName: 'Lovelace',
      phone: '+447700900123',
      locale: 'en-GB',
      channels: [],
      organizationId: expect.any(String),
      environmentId: t.environments.a,
      deleted: false,
      createdAt,
      updatedAt: createdAt,
    });
    expect((await t.a.get('/v1/subscribers/ada').expect(200)).body.data.data).toEqual({ plan: 'pro' });
  });

  it('create: a duplicate subscriberId is an ErrorDto 409, at once because retries are off', async () => {
    await createAda();
    const err = await failure(novu.subscribers.create({ subscriberId: 'ada' }));
    expect(err).toBeInstanceOf(ErrorDto);
    expect(err).toMatchObject({ statusCode: 409, message: 'Subscriber ada already exists', path: '/v1/subscribers' });
  });

  it('create: rejects the Novu-only `channels` field with an ErrorDto 400 (credentials are a separate PUT here)', async () => {
    const err = await failure(
      novu.subscribers.create({
        subscriberId: 'carol',
        channels: [{ providerId: 'slack', credentials: { webhookUrl: SLACK_URL } }],
      }),
    );
    expect(err).toBeInstanceOf(ErrorDto);
    expect(err).toMatchObject({ statusCode: 400, message: 'body/channels is not allowed' });
  });

  it('list: sends page and limit, and the SDK returns the page', async () => {
    await createSubscriber(t.a, { subscriberId: 'transport-check' });
    t.clock.advance(1000);
    await createAda();
    t.clock.advance(1000);
    await novu.subscribers.create({ subscriberId: 'bob' });
    const res = await novu.subscribers.list(0, 2);
    expect(res.result).toEqual({
      data: [
        expect.objectContaining({ subscriberId: 'transport-check' }),
        expect.objectContaining({ subscriberId: 'ada', firstName: 'Ada' }),
      ],
      page: 0,
      pageSize: 2,
      hasMore: true,
    });
    const second = await novu.subscribers.list(1, 2);
    expect(second.result.data.map((s) => s.subscriberId)).toEqual(['bob']);
    expect(second.result.hasMore).toBe(false);
  });

  it("list: the SDK's page iterator stops after the first page, even with hasMore (an SDK bug)", async () => {
    // subscribersList.js looks for the items under `data.resultArray`, which no server sends.
    await createAda();
    await createSubscriber(t.a, { subscriberId: 'bob' });
    const res = await novu.subscribers.list(0, 1);
    expect(res.result.hasMore).toBe(true);
    expect(res.next()).toBeNull();
  });

  it('retrieve: returns the subscriber', async () => {
    await createAda();
    const res = await novu.subscribers.retrieve('ada');
    expect(res.result).toMatchObject({ subscriberId: 'ada', email: 'ada@example.com', firstName: 'Ada', deleted: false });
  });

  it('retrieve: an unknown subscriber is an ErrorDto 404', async () => {
    const err = await failure(novu.subscribers.retrieve('nobody'));
    expect(err).toBeInstanceOf(ErrorDto);
    expect(err).toMatchObject({ statusCode: 404, message: 'Subscriber nobody not found' });
  });

  it('retrieve with includeTopics lists the keys of the subscriber’s topics', async () => {
    await createAda();
    const res = await novu.subscribers.retrieve('ada', true);
    expect(res.result).toMatchObject({ subscriberId: 'ada', topics: [] });
  });

  it('update: sends PUT with only the given fields, and returns the updated subscriber', async () => {
    await createAda();
    const updatedAt = now();
    const seen = await requestsDuring(async () => {
      const res = await novu.subscribers.update({ firstName: 'Augusta' }, 'ada');
      expect(res.result).toMatchObject({ subscriberId: 'ada', firstName: 'Augusta', lastName: 'Lovelace', updatedAt });
    });
    expect(seen.map((r) => `${r.method} ${r.url}`)).toEqual(['PUT /v1/subscribers/ada']);
  });

  it("delete: returns Novu's acknowledgement", async () => {
    await createSubscriber(t.a, { subscriberId: 'bob' });
    const res = await novu.subscribers.delete('bob');
    expect(res.result).toEqual({ acknowledged: true, status: 'deleted' });
    expect((await failure(novu.subscribers.retrieve('bob'))) as ErrorDto).toMatchObject({ statusCode: 404 });
  });
});

describe('integrations', () => {
  it('create: answers 201 and the SDK returns the integration with its id', async () => {
    const res = await novu.integrations.create({ providerId: 'slack', channel: 'chat', name: 'Team Slack', identifier: 'team-slack', active: true });
    expect(res.result).toEqual({
      id: expect.any(String),
      organizationId: expect.any(String),
      environmentId: t.environments.a,
      providerId: 'slack',
      channel: 'chat',
      name: 'Team Slack',
      identifier: 'team-slack',
      credentials: {},
      active: true,
      primary: true,
      deleted: false,
    });
    // Herald sends the id as `integrationId` and, for Novu's clients, as `_id`, which the SDK maps to `id`.
    expect(res.result.id).toBe(await integrationIdOf('team-slack'));
  });

  it('create: rejects the Novu-only `check` field with an ErrorDto 400', async () => {
    const err = await failure(novu.integrations.create({ providerId: 'discord', channel: 'chat', check: false }));
    expect(err).toBeInstanceOf(ErrorDto);
    expect(err).toMatchObject({ statusCode: 400, message: 'body/check is not allowed' });
  });

  it('list fails: every Herald list is the paginated envelope, the SDK wants a plain array (SDKValidationError)', async () => {
    await createTeamSlack();
    const err = await failure(novu.integrations.list());
    expect(err).toBeInstanceOf(SDKValidationError);
    const validation = err as SDKValidationError;
    expect(validation.message).toContain('Response validation failed');
    expect((validation.cause as { issues: unknown[] }).issues).toEqual([
      expect.objectContaining({ code: 'invalid_type', expected: 'array', received: 'object', path: ['Result'] }),
    ]);
    expect((validation.rawValue as { Result: unknown }).Result).toMatchObject({
      data: [expect.objectContaining({ identifier: 'team-slack' })],
      totalCount: 1,
      page: 0,
      hasMore: false,
    });
  });

  it('update: sends PUT and returns the updated integration', async () => {
    await createTeamSlack();
    const id = await integrationIdOf('team-slack');
    const res = await novu.integrations.update({ name: 'Company Slack' }, id);
    expect(res.result).toMatchObject({ identifier: 'team-slack', name: 'Company Slack', active: true, primary: true });
  });

  it('update with active:false deactivates it (the SDK has no status call; this is how Novu toggles one)', async () => {
    await createTeamSlack();
    await novu.integrations.create({ providerId: 'discord', channel: 'chat', identifier: 'team-discord' });
    const id = await integrationIdOf('team-discord');
    const res = await novu.integrations.update({ active: false }, id);
    expect(res.result).toMatchObject({ identifier: 'team-discord', active: false, primary: false });
  });

  it('delete: returns the integrations that remain, as a plain array', async () => {
    await createTeamSlack();
    await createIntegration(t.a, { providerId: 'discord', channel: 'chat', identifier: 'team-discord', active: false });
    const id = await integrationIdOf('team-discord');
    const res = await novu.integrations.delete(id);
    expect(res.result).toEqual([expect.objectContaining({ identifier: 'team-slack', providerId: 'slack', active: true, primary: true })]);
  });
});

describe('subscriber credentials', () => {
  beforeEach(async () => {
    // As the subscribers tests leave her: renamed Augusta.
    await createAda({ firstName: 'Augusta' });
    await createTeamSlack();
  });

  it('update: sets a Slack webhook (with an active slack integration) and returns the subscriber with its channel', async () => {
    const integrationId = await integrationIdOf('team-slack');
    const res = await novu.subscribers.credentials.update({ providerId: 'slack', credentials: { webhookUrl: SLACK_URL } }, 'ada');
    expect(res.result).toMatchObject({ subscriberId: 'ada', firstName: 'Augusta' });
    expect(res.result.channels).toEqual([
      { providerId: 'slack', integrationIdentifier: 'team-slack', integrationId, credentials: { webhookUrl: SLACK_SHOWN } },
    ]);
    expect((await novu.subscribers.retrieve('ada')).result.channels).toEqual(res.result.channels);
  });

  it('update: a provider without an active integration is a 422, which the SDK cannot type (SDKValidationError)', async () => {
    // The SDK parses a 422 as ValidationErrorDto, which needs an `errors` map; Herald's error body
    // lists the problems under `details` instead, so the SDK reports a validation failure of its own.
    const err = await failure(novu.subscribers.credentials.update({ providerId: 'msteams', credentials: { webhookUrl: SLACK_URL } }, 'ada'));
    expect(err).not.toBeInstanceOf(ErrorDto);
    expect(err).toBeInstanceOf(SDKValidationError);
    expect((err as SDKValidationError).rawValue).toMatchObject({ statusCode: 422, message: 'No active msteams integration in this environment' });
  });
});

describe('preferences', () => {
  beforeEach(async () => {
    await createAda();
    await t.a
      .post('/v1/workflows', {
        name: 'Comment added',
        steps: [
          { type: 'in_app', template: { content: 'New comment on {{postTitle}}' } },
          { type: 'email', template: { subject: 'New comment', content: 'On {{postTitle}}' } },
        ],
        payloadSchema: { type: 'object', properties: { postTitle: { type: 'string' } } },
      })
      .expect(201);
  });

  it("list: returns one entry per active workflow in Novu's v1 array shape", async () => {
    const res = await novu.subscribers.preferences.list('ada');
    expect(res.result).toEqual([
      {
        template: {
          id: 'comment-added',
          name: 'Comment added',
          critical: false,
          triggers: [{ type: 'event', identifier: 'comment-added', variables: [{ name: 'postTitle', type: 'String' }] }],
        },
        preference: { enabled: true, channels: { inApp: true, email: true } },
      },
    ]);
  });

  it('list with includeInactiveChannels shows all five channels', async () => {
    const res = await novu.subscribers.preferences.list('ada', true);
    expect(res.result[0].preference.channels).toEqual({ inApp: true, email: true, sms: true, chat: true, push: true });
  });

  it("updateGlobal: takes Novu's list form and returns the global layer", async () => {
    const res = await novu.subscribers.preferences.updateGlobal({ enabled: true, preferences: [{ type: 'email', enabled: false }] }, 'ada');
    expect(res.result).toEqual({ preference: { enabled: true, channels: { inApp: true, email: false, sms: true, chat: true, push: true } } });
    const after = await novu.subscribers.preferences.list('ada');
    expect(after.result[0].preference).toEqual({ enabled: true, channels: { inApp: true, email: false } });
  });
});

describe('topics', () => {
  /** Watchers as the first topics test creates it, with `members` assigned. */
  const createWatchers = (members: string[] = []) => createTopic(t.a, { topicKey: 'watchers', name: 'Watchers' }, members);
  beforeEach(async () => {
    await createAda();
  });

  it('create: answers 201 and the SDK returns the key', async () => {
    const res = await novu.topics.create({ key: 'watchers', name: 'Watchers' });
    expect(res.result).toEqual({ key: 'watchers' });
  });

  it('create: a duplicate key is an ErrorDto 409', async () => {
    await createWatchers();
    const err = await failure(novu.topics.create({ key: 'watchers', name: 'Again' }));
    expect(err).toBeInstanceOf(ErrorDto);
    expect(err).toMatchObject({ statusCode: 409, message: 'Topic watchers already exists' });
  });

  it('list: sends pageSize (accepted as an alias of limit) and returns the page', async () => {
    await createWatchers();
    await novu.topics.create({ key: 'editors', name: 'Editors' });
    const seen = await requestsDuring(async () => {
      const res = await novu.topics.list({ page: 0, pageSize: 1 });
      expect(res.result).toEqual({
        data: [{ organizationId: expect.any(String), environmentId: t.environments.a, key: 'watchers', name: 'Watchers', subscribers: [] }],
        page: 0,
        pageSize: 1,
        totalCount: 2,
      });
    });
    expect(seen.map((r) => r.url)).toEqual(['/v1/topics?page=0&pageSize=1']);
    const byKey = await novu.topics.list({ key: 'editors' });
    expect(byKey.result.data.map((topic) => topic.key)).toEqual(['editors']);
  });

  it('subscribers.assign: answers 200 with succeeded and failed.notFound', async () => {
    await createWatchers();
    const res = await novu.topics.subscribers.assign({ subscribers: ['ada', 'ghost'] }, 'watchers');
    expect(res.result).toEqual({ succeeded: ['ada'], failed: { notFound: ['ghost'] } });
  });

  it('retrieve: returns the topic with its members', async () => {
    await createWatchers(['ada']);
    const res = await novu.topics.retrieve('watchers');
    expect(res.result).toEqual({
      organizationId: expect.any(String),
      environmentId: t.environments.a,
      key: 'watchers',
      name: 'Watchers',
      subscribers: ['ada'],
    });
  });

  it('subscribers.remove fails in the SDK: Herald answers 200 with {succeeded, failed}, the SDK accepts only 204 (SDKError)', async () => {
    await createWatchers(['ada']);
    const err = await failure(novu.topics.subscribers.remove({ subscribers: ['ada', 'ghost'] }, 'watchers'));
    expect(err).toBeInstanceOf(SDKError);
    const sdkError = err as SDKError;
    expect(sdkError.statusCode).toBe(200);
    expect(sdkError.message).toMatch(/^Unexpected API response status or content-type: Status 200 Content-Type application\/json/);
    // The body the SDK saw, after its hook unwrapped `{data: …}`.
    expect(JSON.parse(sdkError.body)).toEqual({ succeeded: ['ada'], failed: { notFound: ['ghost'] } });
    // The removal itself happened.
    expect((await novu.topics.retrieve('watchers')).result.subscribers).toEqual([]);
  });

  it('delete: answers 204, which the SDK accepts', async () => {
    await createWatchers();
    await novu.topics.subscribers.assign({ subscribers: ['ada'] }, 'watchers');
    const res = await novu.topics.delete('watchers');
    expect(res).toEqual({ headers: expect.objectContaining({ 'x-request-id': [expect.any(String)] }) });
    const err = await failure(novu.topics.retrieve('watchers'));
    expect(err).toBeInstanceOf(ErrorDto);
    expect(err).toMatchObject({ statusCode: 404, message: 'Topic watchers not found' });
  });
});

describe('events', () => {
  beforeEach(async () => {
    await createSubscriber(t.a, { subscriberId: 'eve' });
    await createWorkflow(t.a, { name: 'Ping', steps: [{ type: 'delay', amount: 1, unit: 'hours' }, { type: 'in_app', template: { content: 'ping' } }] });
  });

  it('trigger: answers 201 and the SDK returns the acknowledgement with the transactionId', async () => {
    const res = await novu.trigger({ name: 'ping', to: [{ subscriberId: 'eve' }], payload: {} });
    expect(res.result).toEqual({ acknowledged: true, status: 'processed', transactionId: expect.any(String) });
  });

  it('trigger: an unknown workflow is a 422, which the SDK cannot type (SDKValidationError)', async () => {
    expect(await failure(novu.trigger({ name: 'nope', to: 'eve' }))).toBeInstanceOf(SDKValidationError);
  });

  it('triggerBulk: answers each event in order', async () => {
    const res = await novu.triggerBulk({ events: [{ name: 'ping', to: 'eve' }, { name: 'nope', to: 'eve' }] });
    expect(res.result).toEqual([
      { acknowledged: true, status: 'processed', transactionId: expect.any(String) },
      { acknowledged: true, status: 'error', error: ['name nope is not a workflow'] },
    ]);
  });

  it("cancel: the SDK's own bug rejects Herald's {data: true}, though the event is canceled", async () => {
    const { transactionId } = (await novu.trigger({ name: 'ping', to: 'eve' })).result;
    expect(await failure(novu.cancel(transactionId!))).toBeInstanceOf(SDKValidationError);
    expect((await t.a.delete(`/v1/events/trigger/${transactionId}`).expect(200)).body).toEqual({ data: false });
  });
});

describe('notifications', () => {
  beforeEach(async () => {
    await createAda();
    await createWorkflow(t.a, { name: 'Order shipped', steps: [{ type: 'in_app', template: { content: 'Order {{orderId}} shipped' } }] });
  });

  it('list: each notification carries its id (`_id`, the SDK’s `id`), and the SDK returns the page', async () => {
    const { transactionId } = (await novu.trigger({ name: 'order-shipped', to: 'ada', payload: { orderId: 'A-1' } })).result;
    const res = await novu.notifications.list({ page: 0 });
    expect(res.result).toMatchObject({ page: 0, pageSize: 10, hasMore: false });
    expect(res.result.data).toEqual([
      expect.objectContaining({ id: expect.stringMatching(/^[0-9a-f]{24}$/), transactionId, subscriberId: 'ada', environmentId: t.environments.a, channels: ['in_app'] }),
    ]);
    const listed = (await t.a.get(`/v1/notifications?transactionId=${transactionId}`).expect(200)).body.data[0];
    expect(res.result.data[0].id).toBe(listed.notificationId);
  });

  it('retrieve with the id from list returns the notification, its jobs in Novu’s shape', async () => {
    await novu.trigger({ name: 'order-shipped', to: 'ada', payload: { orderId: 'A-1' } });
    await new JobRunner(t.deps).runUntilIdle();
    const [listed] = (await novu.notifications.list({ page: 0 })).result.data;
    const seen = await requestsDuring(async () => {
      const { result } = await novu.notifications.retrieve(listed.id!);
      expect(result).toMatchObject({ id: listed.id, transactionId: listed.transactionId, subscriberId: 'ada', channels: ['in_app'] });
      const herald = (await t.a.get(`/v1/notifications/${listed.id}`).expect(200)).body.data;
      const [job] = herald.jobs;
      expect(result.jobs).toEqual([
        {
          id: job.jobId,
          type: 'in_app',
          status: 'completed',
          providerId: 'novu',
          step: { id: job.stepId, templateId: job.stepId, active: true, filters: [] },
          // The SDK's job has no createdAt: zod drops it.
          updatedAt: job.updatedAt,
          executionDetails: job.executionDetails.map((detail: { detail: string; isRetry: boolean; createdAt: string }) => ({
            id: expect.stringMatching(/^[0-9a-f]{24}$/),
            status: 'Success',
            detail: detail.detail,
            providerId: 'novu',
            isRetry: detail.isRetry,
            isTest: false,
            source: 'Internal',
            createdAt: detail.createdAt,
          })),
        },
      ]);
      expect(job.executionDetails.length).toBeGreaterThan(0);
    });
    expect(seen.map((r) => `${r.method} ${r.url}`)).toEqual([`GET /v1/notifications/${listed.id}`]);
  });

  it('retrieve names Novu’s providers and step kinds: SMTP is nodemailer, a throttle step is custom, a send that failed is Failed', async () => {
    const smtp = await startSmtpPeer();
    try {
      await novu.integrations.create({ providerId: 'smtp', channel: 'email', credentials: { host: '127.0.0.1', port: String(smtp.port), from: 'shop@example.com' }, active: true });
      await createWorkflow(t.a, {
        name: 'Receipt',
        steps: [
          { type: 'throttle', amount: 1, unit: 'hours', threshold: 5 },
          { type: 'email', template: { subject: 'Receipt {{orderId}}', content: '<p>Thanks</p>' } },
          { type: 'sms', template: { content: 'Receipt {{orderId}}' } },
        ],
      });
      const { transactionId } = (await novu.trigger({ name: 'receipt', to: 'ada', payload: { orderId: 'A-2' } })).result;
      await new JobRunner(t.deps).runUntilIdle();
      expect(smtp.mails).toHaveLength(1);
      const listed = (await t.a.get(`/v1/notifications?transactionId=${transactionId}`).expect(200)).body.data[0];
      const { result } = await novu.notifications.retrieve(listed.notificationId);
      expect(result.jobs!.map((job) => [job.type, job.providerId, job.status, [...new Set(job.executionDetails.map((d) => d.status))]])).toEqual([
        ['custom', 'novu', 'completed', ['Success']],
        ['email', 'nodemailer', 'completed', ['Success']],
        // No SMS integration in this environment: the send fails, and Herald itself recorded why.
        ['sms', 'novu', 'failed', expect.arrayContaining(['Failed'])],
      ]);
    } finally {
      await smtp.close();
    }
  });
});

describe('workflows', () => {
  it('a workflow made through the API is deleted by its `_id` through the SDK’s client (0.0.1 has no workflow method)', async () => {
    const created = await createWorkflow(t.a, { name: 'Order shipped' });
    expect(created._id).toMatch(/^[0-9a-f]{24}$/);
    expect(created._id).not.toBe(created.workflowId);
    const deleted = await sdkRequest('DELETE', `/v1/workflows/${created._id}`);
    expect(deleted).toEqual({ status: 200, body: { acknowledged: true, status: 'deleted' } });
    await t.a.get(`/v1/workflows/${created.workflowId}`).expect(404);
    expect(await sdkRequest('DELETE', `/v1/workflows/${created._id}`)).toMatchObject({ status: 404, body: { message: `Workflow ${created._id} not found` } });
  });
});

describe('a Novu v1 template, unchanged', () => {
  // Novu v1 reads payload fields at the top level ({{orderId}}) beside {{subscriber.firstName}}.
  const novuTemplate = {
    subject: 'Order {{orderId}} shipped',
    content: 'Hi {{subscriber.firstName}}, order {{orderId}} ({{items.length}} items) is on its way{{#if express}}, express{{/if}}.',
  };

  it('renders the same text through email (SMTP), chat (a Slack webhook) and in-app', async () => {
    const smtp = await startSmtpPeer();
    const slack = await startHttpPeer();
    try {
      await novu.subscribers.create({ subscriberId: 'ada', email: 'ada@example.com', firstName: 'Ada' });
      await novu.integrations.create({ providerId: 'smtp', channel: 'email', credentials: { host: '127.0.0.1', port: String(smtp.port), from: 'shop@example.com' }, active: true });
      await createTeamSlack();
      await novu.subscribers.credentials.update({ providerId: 'slack', credentials: { webhookUrl: `${slack.url}/hook` } }, 'ada');
      await createWorkflow(t.a, {
        name: 'Order shipped',
        steps: [
          { type: 'email', template: { subject: novuTemplate.subject, content: `<p>${novuTemplate.content}</p>` } },
          { type: 'chat', template: { content: novuTemplate.content } },
          { type: 'in_app', template: { content: novuTemplate.content } },
        ],
      });
      const payload = { orderId: 'A-1', items: [1, 2, 3], express: true };
      const { transactionId } = (await novu.trigger({ name: 'order-shipped', to: 'ada', payload })).result;
      await new JobRunner(t.deps).runUntilIdle();

      const text = 'Hi Ada, order A-1 (3 items) is on its way, express.';
      expect(smtp.mails).toHaveLength(1);
      expect(smtp.mails[0].subject).toBe('Order A-1 shipped');
      expect(smtp.mails[0].raw).toContain(`<p>${text}</p>`);
      expect(slack.requests.map((r) => r.json())).toEqual([{ text }]);
      const feed = (await t.a.get('/v1/subscribers/ada/messages').expect(200)).body.data as Array<{ content: string; transactionId: string }>;
      expect(feed).toEqual([expect.objectContaining({ content: text, transactionId })]);
    } finally {
      await Promise.all([smtp.close(), slack.close()]);
    }
  });

  it("keeps Herald's names first: a payload field called subscriber, step or payload is read only under payload", async () => {
    await createAda();
    await createWorkflow(t.a, {
      name: 'Shadowed',
      steps: [{ type: 'in_app', template: { content: '{{subscriber.firstName}}|{{step.total_count}}|{{payload.subscriber}}|{{payload.step}}|{{tenant}}|{{orderId}}' } }],
    });
    await novu.trigger({ name: 'shadowed', to: 'ada', payload: { subscriber: 'Mallory', step: 'forged', tenant: 'other', orderId: 'A-2' } });
    await new JobRunner(t.deps).runUntilIdle();
    const feed = (await t.a.get('/v1/subscribers/ada/messages').expect(200)).body.data as Array<{ content: string }>;
    expect(feed.map((m) => m.content)).toEqual(['Ada||Mallory|forged||A-2']);
  });
});
