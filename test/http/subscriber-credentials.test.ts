import { beforeEach, describe, expect, it } from 'vitest';
import { type Client, useTestApp } from '../helpers/app.js';

const t = useTestApp();
// Made again before each test, in its fresh organizations.
beforeEach(async () => {
  await t.a.post('/v1/subscribers', { subscriberId: 'ada', firstName: 'Ada' }).expect(201);
  await t.aProduction.post('/v1/subscribers', { subscriberId: 'ada' }).expect(201);
  await t.b.post('/v1/subscribers', { subscriberId: 'ada' }).expect(201);
});
// Every test starts without integrations, and so without any subscriber credentials (they cascade).
beforeEach(async () => {
  await t.db('integrations').delete();
});

const SLACK_URL = 'https://hooks.slack.com/services/T000/B000/XXXX';
/** How answers show SLACK_URL: a webhook URL is a credential. */
const SLACK_SHOWN = 'https://hooks.slack.com/…XXXX';
const EXPO_TOKEN = 'ExponentPushToken[xxxxxxxxxxxxxxxxxxxxxx]';

interface Integration {
  integrationId: string;
  identifier: string;
}

async function integration(body: object, client: Client = t.a): Promise<Integration> {
  t.clock.advance(1000);
  return (await client.post('/v1/integrations', body).expect(201)).body.data;
}

const put = (body: object, subscriberId = 'ada', client: Client = t.a) => client.put(`/v1/subscribers/${subscriberId}/credentials`, body);

describe('PUT /subscribers/{subscriberId}/credentials (updateSubscriberCredentials)', () => {
  it("sets a Slack webhook and answers 200 with the subscriber, whose channels show it", async () => {
    const slack = await integration({ providerId: 'slack', identifier: 'company-slack' });
    const res = await put({ providerId: 'slack', credentials: { webhookUrl: SLACK_URL } }).expect(200);
    expect(res.body.data).toMatchObject({ subscriberId: 'ada', firstName: 'Ada' });
    expect(res.body.data.channels).toEqual([
      { providerId: 'slack', integrationIdentifier: 'company-slack', _integrationId: slack.integrationId, credentials: { webhookUrl: SLACK_SHOWN } },
    ]);
    expect((await t.a.get('/v1/subscribers/ada').expect(200)).body.data.channels).toEqual(res.body.data.channels);
  });

  it("answers a subscriber's large data as stored, not parsed and serialized again", async () => {
    await integration({ providerId: 'slack', identifier: 'company-slack' });
    // Over ANSWERED_AS_STORED_CHARS (db/json.ts), with spaces JSON.stringify never writes: found as it is only if spliced in.
    const stored = `{ "text" : "${'x'.repeat(2_000)}" }`;
    await t.db('subscribers').where('subscriber_id', 'ada').update({ data: stored });
    const res = await put({ providerId: 'slack', credentials: { webhookUrl: SLACK_URL } }).expect(200);
    expect(res.text).toContain(`"data":${stored}`);
    expect(res.body.data).toMatchObject({ subscriberId: 'ada', data: JSON.parse(stored), channels: [expect.objectContaining({ providerId: 'slack' })] });
  });

  it("changes the subscriber's updatedAt, as any change of what GET /subscribers/{subscriberId} shows does", async () => {
    await integration({ providerId: 'slack', identifier: 'company-slack' });
    const before = (await t.a.get('/v1/subscribers/ada').expect(200)).body.data;
    t.clock.advance(5000);
    const after = (await put({ providerId: 'slack', credentials: { webhookUrl: SLACK_URL } }).expect(200)).body.data;
    expect(after.updatedAt).toBe(t.clock.now().toISOString());
    expect(after.updatedAt > before.updatedAt).toBe(true);
    expect(after.createdAt).toBe(before.createdAt);
  });

  it('replaces the credentials for that integration instead of adding to them', async () => {
    await integration({ providerId: 'expo' });
    await put({ providerId: 'expo', credentials: { deviceTokens: [EXPO_TOKEN, 'ExponentPushToken[old]'] } }).expect(200);
    const res = await put({ providerId: 'expo', credentials: { deviceTokens: [EXPO_TOKEN] } }).expect(200);
    expect(res.body.data.channels).toHaveLength(1);
    expect(res.body.data.channels[0].credentials).toEqual({ deviceTokens: [EXPO_TOKEN] });
  });

  it('keeps one entry per integration, for several providers', async () => {
    await integration({ providerId: 'slack' });
    await integration({ providerId: 'discord' });
    await integration({ providerId: 'push-webhook', credentials: { webhookUrl: 'https://example.com/push', secretKey: 'whsec_0123456789' } });
    await put({ providerId: 'slack', credentials: { webhookUrl: SLACK_URL } }).expect(200);
    await put({ providerId: 'discord', credentials: { webhookUrl: 'https://discord.com/api/webhooks/1/x' } }).expect(200);
    const res = await put({ providerId: 'push-webhook', credentials: { deviceTokens: ['device-1'] } }).expect(200);
    expect(res.body.data.channels.map((c: { providerId: string }) => c.providerId)).toEqual(['slack', 'discord', 'push-webhook']);
  });

  it('goes to the integration integrationIdentifier names, when there are several of that provider', async () => {
    await integration({ providerId: 'slack', identifier: 'slack-eng' });
    const sales = await integration({ providerId: 'slack', identifier: 'slack-sales' });
    const res = await put({ providerId: 'slack', integrationIdentifier: 'slack-sales', credentials: { webhookUrl: SLACK_URL } }).expect(200);
    expect(res.body.data.channels).toEqual([expect.objectContaining({ integrationIdentifier: 'slack-sales', _integrationId: sales.integrationId })]);
  });

  it("goes to the provider's primary integration when none is named, else to its oldest active one", async () => {
    await integration({ providerId: 'discord', identifier: 'discord' }); // the chat channel's primary
    await integration({ providerId: 'slack', identifier: 'slack-off', active: false });
    await integration({ providerId: 'slack', identifier: 'slack-old' });
    const newer = await integration({ providerId: 'slack', identifier: 'slack-new' });
    const oldest = await put({ providerId: 'slack', credentials: { webhookUrl: SLACK_URL } }).expect(200);
    expect(oldest.body.data.channels.map((c: { integrationIdentifier: string }) => c.integrationIdentifier)).toEqual(['slack-old']);
    await t.a.put(`/v1/integrations/${newer.integrationId}`, { primary: true }).expect(200);
    const primary = await put({ providerId: 'slack', credentials: { webhookUrl: SLACK_URL } }).expect(200);
    expect(primary.body.data.channels.map((c: { integrationIdentifier: string }) => c.integrationIdentifier)).toEqual(['slack-old', 'slack-new']);
  });

  it('answers 404 for an unknown subscriber, and for a subscriber of another environment', async () => {
    await integration({ providerId: 'slack' });
    const res = await put({ providerId: 'slack', credentials: { webhookUrl: SLACK_URL } }, 'nobody').expect(404);
    expect(res.body.message).toBe('Subscriber nobody not found');
    await t.aProduction.post('/v1/subscribers', { subscriberId: 'only-in-production' }).expect(201);
    await put({ providerId: 'slack', credentials: { webhookUrl: SLACK_URL } }, 'only-in-production').expect(404);
  });

  it('rejects a provider that is not chat or push with 422 naming body/providerId', async () => {
    await integration({ providerId: 'smtp', credentials: { host: 'smtp.example.com', port: 587, from: 'n@example.com' } });
    for (const providerId of ['smtp', 'herald']) {
      const res = await put({ providerId, credentials: { webhookUrl: SLACK_URL } }).expect(422);
      expect(res.body.details).toEqual([{ field: 'body/providerId', message: `${providerId} is not a chat or push provider` }]);
    }
  });

  it('rejects a provider without an active integration in the environment with 422', async () => {
    const res = await put({ providerId: 'discord', credentials: { webhookUrl: SLACK_URL } }).expect(422);
    expect(res.body.message).toBe('No active discord integration in this environment');
    expect(res.body.details).toEqual([{ field: 'body/providerId', message: 'has no active integration in this environment' }]);
    await integration({ providerId: 'discord', active: false });
    await put({ providerId: 'discord', credentials: { webhookUrl: SLACK_URL } }).expect(422);
    expect((await t.a.get('/v1/subscribers/ada').expect(200)).body.data.channels).toEqual([]);
  });

  it('rejects an integrationIdentifier that is unknown, of another provider, or inactive with 422', async () => {
    await integration({ providerId: 'slack', identifier: 'slack' });
    await integration({ providerId: 'discord', identifier: 'discord' });
    await integration({ providerId: 'slack', identifier: 'slack-off', active: false });
    const unknown = await put({ providerId: 'slack', integrationIdentifier: 'nope', credentials: { webhookUrl: SLACK_URL } }).expect(422);
    expect(unknown.body.message).toBe('No slack integration has the identifier nope');
    expect(unknown.body.details[0].field).toBe('body/integrationIdentifier');
    await put({ providerId: 'slack', integrationIdentifier: 'discord', credentials: { webhookUrl: SLACK_URL } }).expect(422);
    const inactive = await put({ providerId: 'slack', integrationIdentifier: 'slack-off', credentials: { webhookUrl: SLACK_URL } }).expect(422);
    expect(inactive.body.message).toBe('Integration slack-off is not active');
    expect((await t.a.get('/v1/subscribers/ada').expect(200)).body.data.channels).toEqual([]);
  });

  it('rejects credentials the provider needs and lacks, or does not use, with 422 naming each', async () => {
    await integration({ providerId: 'slack' });
    await integration({ providerId: 'expo' });
    const slack = await put({ providerId: 'slack', credentials: { deviceTokens: [EXPO_TOKEN] } }).expect(422);
    expect(slack.body.details).toEqual([
      { field: 'body/credentials/webhookUrl', message: 'is required by slack' },
      { field: 'body/credentials/deviceTokens', message: 'is not used by slack' },
    ]);
    const channel = await put({ providerId: 'slack', credentials: { webhookUrl: SLACK_URL, channel: 'general' } }).expect(422);
    expect(channel.body.details).toEqual([{ field: 'body/credentials/channel', message: 'is not used by slack' }]);
    const expo = await put({ providerId: 'expo', credentials: { webhookUrl: SLACK_URL } }).expect(422);
    expect(expo.body.details).toEqual([
      { field: 'body/credentials/deviceTokens', message: 'is required by expo' },
      { field: 'body/credentials/webhookUrl', message: 'is not used by expo' },
    ]);
    expect((await t.a.get('/v1/subscribers/ada').expect(200)).body.data.channels).toEqual([]);
  });

  it('accepts an empty list of device tokens, which clears them', async () => {
    await integration({ providerId: 'expo' });
    await put({ providerId: 'expo', credentials: { deviceTokens: [EXPO_TOKEN] } }).expect(200);
    const res = await put({ providerId: 'expo', credentials: { deviceTokens: [] } }).expect(200);
    expect(res.body.data.channels[0].credentials).toEqual({ deviceTokens: [] });
  });

  it('rejects bodies that break the schema with 400 naming the field', async () => {
    await integration({ providerId: 'slack' });
    expect((await put({ providerId: 'slack' }).expect(400)).body.details[0].field).toBe('body/credentials');
    expect((await put({ providerId: 'slack', credentials: {} }).expect(400)).body.details[0].field).toBe('body/credentials');
    expect((await put({ providerId: 'slack', credentials: { webhookUrl: 'not a url' } }).expect(400)).body.details[0].field).toBe(
      'body/credentials/webhookUrl',
    );
    expect((await put({ providerId: 'slack', credentials: { token: 'x' } }).expect(400)).body.details[0].field).toBe('body/credentials/token');
    expect((await put({ providerId: 'fcm', credentials: { deviceTokens: ['x'] } }).expect(400)).body.details[0].field).toBe('body/providerId');
    expect((await put({ credentials: { webhookUrl: SLACK_URL } }).expect(400)).body.details[0].field).toBe('body/providerId');
    await put({ providerId: 'expo', credentials: { deviceTokens: ['same', 'same'] } }).expect(400);
  });

  it("cannot use another environment's integrations, and leaves other environments' subscribers alone", async () => {
    await integration({ providerId: 'slack', identifier: 'company-slack' });
    await put({ providerId: 'slack', credentials: { webhookUrl: SLACK_URL } }, 'ada', t.aProduction).expect(422);
    await put({ providerId: 'slack', integrationIdentifier: 'company-slack', credentials: { webhookUrl: SLACK_URL } }, 'ada', t.b).expect(422);
    await put({ providerId: 'slack', credentials: { webhookUrl: SLACK_URL } }).expect(200);
    expect((await t.aProduction.get('/v1/subscribers/ada').expect(200)).body.data.channels).toEqual([]);
    expect((await t.b.get('/v1/subscribers/ada').expect(200)).body.data.channels).toEqual([]);
  });

  it('removes the credentials when the integration is deleted', async () => {
    const slack = await integration({ providerId: 'slack' });
    await put({ providerId: 'slack', credentials: { webhookUrl: SLACK_URL } }).expect(200);
    await t.a.delete(`/v1/integrations/${slack.integrationId}`).expect(200);
    expect((await t.a.get('/v1/subscribers/ada').expect(200)).body.data.channels).toEqual([]);
  });
});
