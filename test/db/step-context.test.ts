// A channel job's context is read in one statement (repos/step-context.ts, readStepContext). It must
// answer exactly as the separate reads loadStepContext made before did: those reads are kept below,
// as they were, and each test compares the two on a case the engine meets.
import { describe, expect, it } from 'vitest';
import { selectRows, type Db } from '../../src/db/knex.js';
import type { Channel } from '../../src/contract.js';
import { PROVIDERS } from '../../src/providers/catalogue.js';
import { findIntegrationRow, type IntegrationRow } from '../../src/db/repos/integrations.js';
import { notificationRecipient } from '../../src/db/repos/notifications.js';
import { globalLayer, workflowLayer } from '../../src/db/repos/preferences.js';
import { findSubscriber } from '../../src/db/repos/subscribers.js';
import {
  credentialsForSending,
  readStepContext,
  STEP_CONTEXT,
  type SendingIntegration,
  type StepContextKey,
  type StepContextRead,
} from '../../src/db/repos/step-context.js';
import { newId } from '../../src/ids.js';
import { useTestApp, type Client } from '../helpers/app.js';
import { createIntegration, createSubscriber, createWorkflow, integrationBodies, step, uniqueId } from '../helpers/factories.js';
import { testDatabaseUrl } from '../helpers/db.js';
import { recordQueries } from '../helpers/queries.js';

// With a server secret, credentials are sealed at rest: the read must hand them over to be opened.
const SECRET = 'step-context-test-secret-0123456789';
const t = useTestApp({ config: { secret: SECRET } });

function sendingPart(row: IntegrationRow): SendingIntegration {
  return { id: row.id, provider_id: row.provider_id, credentials: row.credentials, send_limits: row.send_limits };
}

/** The reads loadStepContext made one statement each before readStepContext, in its order and with its rules. */
async function separateReads(db: Db, key: StepContextKey): Promise<StepContextRead | undefined> {
  const notification = await notificationRecipient(db, key.notificationId);
  if (!notification) return undefined;
  const [subscriber, global, own] = await Promise.all([
    findSubscriber(db, key.environmentId, notification.subscriber_id),
    globalLayer(db, notification.subscriber_key),
    workflowLayer(db, notification.subscriber_key, key.workflowKey),
  ]);
  const read: StepContextRead = { subscriberId: notification.subscriber_id, subscriberKey: notification.subscriber_key, subscriber, global, own };
  if (key.channel === 'email' || key.channel === 'sms') {
    // The channel's primary, else its oldest active integration (deliveryIntegrationOf).
    const [row] = await selectRows<IntegrationRow>(
      db,
      `SELECT i.id, i.provider_id, i.credentials, i.send_limits FROM integrations AS i JOIN environments AS e ON e.id = i.environment_id
       WHERE i.environment_id = ? AND i.channel = ? AND i.active = TRUE
       ORDER BY CASE WHEN i.primary_channel IS NULL THEN 1 ELSE 0 END, i.created_at, i.id LIMIT 1`,
      [key.environmentId, key.channel],
    );
    if (row) read.integration = sendingPart(row);
  }
  if ((key.channel === 'chat' || key.channel === 'push') && subscriber) {
    // The credentials of the channel's primary integration, else the first whose integration is active.
    const usable: Array<{ entry: (typeof subscriber.channels)[number]; row: IntegrationRow }> = [];
    for (const entry of subscriber.channels) {
      if (PROVIDERS[entry.providerId].channel !== key.channel) continue;
      const row = await findIntegrationRow(db, key.environmentId, entry._integrationId);
      if (row && (row.active === true || row.active === 1)) usable.push({ entry, row });
    }
    const chosen = usable.find(({ row }) => row.primary_channel === key.channel) ?? usable[0];
    if (chosen) {
      const { entry, row } = chosen;
      // The credentials to send with, by the notification's subscriber key (channelCredentialsForSending).
      const [stored] = await selectRows<{ credentials: string }>(db, 'SELECT credentials FROM subscriber_channels WHERE subscriber_id = ? AND integration_id = ?', [
        notification.subscriber_key,
        entry._integrationId,
      ]);
      // None there (the subscriber was deleted and created again): the subscriber's own now, never the masked entry.
      const [own] = stored
        ? [stored]
        : await selectRows<{ credentials: string }>(
            db,
            'SELECT c.credentials FROM subscriber_channels c JOIN subscribers s ON s.id = c.subscriber_id WHERE s.environment_id = ? AND s.subscriber_id = ? AND c.integration_id = ?',
            [key.environmentId, notification.subscriber_id, entry._integrationId],
          );
      read.channel = { entry, integration: sendingPart(row), stored: own.credentials };
    }
  }
  return read;
}

/** readStepContext's answer, after checking that it is the separate reads'. */
async function readAsBefore(key: StepContextKey): Promise<StepContextRead> {
  const read = await readStepContext(t.db, key);
  expect(read).toBeDefined();
  expect(read).toEqual(await separateReads(t.db, key));
  return read!;
}

/** Triggers `workflowId` for `subscriberIds` and answers the read's key of each one's notification, by subscriberId. */
async function triggered(client: Client, environmentId: string, workflow: Record<string, any>, subscriberIds: string[], channel: Channel) {
  const transactionId = uniqueId('tx');
  await client.post('/v1/events/trigger', { name: workflow.workflowId, to: subscriberIds, transactionId }).expect(201);
  const rows = (await t.db('notifications').where({ environment_id: environmentId, transaction_id: transactionId }).select('id', 'subscriber_id')) as Array<{
    id: string;
    subscriber_id: string;
  }>;
  expect(rows).toHaveLength(subscriberIds.length);
  return new Map(rows.map((row) => [row.subscriber_id, { notificationId: row.id, environmentId, workflowKey: workflow._id, channel } satisfies StepContextKey]));
}

const putCredentials = (subscriberId: string, body: object) => t.a.put(`/v1/subscribers/${subscriberId}/credentials`, body).expect(200);

describe('readStepContext', () => {
  it('answers nothing for a notification that does not exist, as the separate reads did', async () => {
    const key = { notificationId: newId(), environmentId: t.environments.a, workflowKey: newId(), channel: 'email' as const };
    expect(await readStepContext(t.db, key)).toBeUndefined();
    expect(await separateReads(t.db, key)).toBeUndefined();
  });

  it('keeps whom the notification was for when its subscriber was deleted, with no subscriber, layers or credentials', async () => {
    const workflow = await createWorkflow(t.a, { steps: [step.chat()] });
    await createIntegration(t.a);
    await createSubscriber(t.a, { subscriberId: 'gone' });
    await putCredentials('gone', { providerId: 'slack', credentials: { webhookUrl: 'https://hooks.slack.com/services/T/B/gone' } });
    await t.a.patch('/v1/subscribers/gone/preferences', { channels: { chat: false } }).expect(200);
    const key = (await triggered(t.a, t.environments.a, workflow, ['gone'], 'chat')).get('gone')!;
    await t.a.delete('/v1/subscribers/gone').expect(200);

    const read = await readAsBefore(key);
    expect(read).toMatchObject({ subscriberId: 'gone', global: { channels: {} }, own: { channels: {} } });
    expect(read.subscriber).toBeUndefined();
    expect(read.channel).toBeUndefined();
  });

  it("finds a subscriber created again under the same subscriberId, without the old key's layers and credentials", async () => {
    const workflow = await createWorkflow(t.a, { steps: [step.chat()] });
    await createIntegration(t.a);
    await createSubscriber(t.a, { subscriberId: 'again', firstName: 'Old' });
    await putCredentials('again', { providerId: 'slack', credentials: { webhookUrl: 'https://hooks.slack.com/services/T/B/old' } });
    await t.a.patch('/v1/subscribers/again/preferences', { channels: { chat: true } }).expect(200);
    const key = (await triggered(t.a, t.environments.a, workflow, ['again'], 'chat')).get('again')!;
    await t.a.delete('/v1/subscribers/again').expect(200);
    await createSubscriber(t.a, { subscriberId: 'again', firstName: 'New' });
    await putCredentials('again', { providerId: 'slack', credentials: { webhookUrl: 'https://hooks.slack.com/services/T/B/new' } });
    await t.a.patch('/v1/subscribers/again/preferences', { channels: { chat: false } }).expect(200);

    const read = await readAsBefore(key);
    expect(read.subscriber).toMatchObject({ subscriberId: 'again', firstName: 'New' });
    expect(read.subscriberKey).not.toBe((await t.db('subscribers').where({ environment_id: t.environments.a, subscriber_id: 'again' }).first('id')).id);
    expect(read.global).toEqual({ channels: {} });
    // The new subscriber's channel; nothing is stored under the notification's key, so the send goes
    // out with the subscriber's credentials now (it once went to the masked URL the entry shows).
    expect(read.channel).toMatchObject({ entry: { providerId: 'slack' } });
    expect(read.channel!.entry.credentials.webhookUrl).not.toBe('https://hooks.slack.com/services/T/B/new');
    expect(credentialsForSending(read.channel!, SECRET).webhookUrl).toBe('https://hooks.slack.com/services/T/B/new');
  });

  it("reads both preference layers, the workflow's own for that workflow alone, and empty layers for a subscriber without any", async () => {
    const workflow = await createWorkflow(t.a, { steps: [step.email()] });
    const other = await createWorkflow(t.a, { steps: [step.email()] });
    await createSubscriber(t.a, { subscriberId: 'chooser', email: 'chooser@example.com' });
    await createSubscriber(t.a, { subscriberId: 'plain', email: 'plain@example.com' });
    await t.a.patch('/v1/subscribers/chooser/preferences', { enabled: true, channels: { email: false, sms: true } }).expect(200);
    await t.a.patch('/v1/subscribers/chooser/preferences', { workflowId: workflow.workflowId, enabled: false, channels: { email: true } }).expect(200);
    await t.a.patch('/v1/subscribers/chooser/preferences', { workflowId: other.workflowId, channels: { email: false, chat: false } }).expect(200);
    const keys = await triggered(t.a, t.environments.a, workflow, ['chooser', 'plain'], 'email');

    const chooser = await readAsBefore(keys.get('chooser')!);
    expect(chooser.global).toEqual({ enabled: true, channels: { email: false, sms: true } });
    expect(chooser.own).toEqual({ enabled: false, channels: { email: true } });
    const plain = await readAsBefore(keys.get('plain')!);
    expect([plain.global, plain.own]).toEqual([{ channels: {} }, { channels: {} }]);
  });

  it('takes the first chat credentials whose integration is active, among several integrations and providers', async () => {
    const workflow = await createWorkflow(t.a, { steps: [step.chat()] });
    const first = await createIntegration(t.a, { providerId: 'slack', identifier: 'slack-first' });
    await createIntegration(t.a, { providerId: 'slack', identifier: 'slack-second', sendLimits: { perDestination: [] } });
    await createIntegration(t.a, { providerId: 'discord', identifier: 'discord' });
    await createIntegration(t.a, { providerId: 'expo', identifier: 'expo' });
    await createSubscriber(t.a, { subscriberId: 'chatty' });
    await putCredentials('chatty', { providerId: 'expo', credentials: { deviceTokens: ['ExponentPushToken[chatty]'] } });
    await putCredentials('chatty', { providerId: 'slack', integrationIdentifier: 'slack-first', credentials: { webhookUrl: 'https://hooks.slack.com/services/T/B/first' } });
    await putCredentials('chatty', { providerId: 'slack', integrationIdentifier: 'slack-second', credentials: { webhookUrl: 'https://hooks.slack.com/services/T/B/second' } });
    await putCredentials('chatty', { providerId: 'discord', credentials: { webhookUrl: 'https://discord.com/api/webhooks/1/chatty' } });
    const key = (await triggered(t.a, t.environments.a, workflow, ['chatty'], 'chat')).get('chatty')!;

    const read = await readAsBefore(key);
    expect(read.subscriber?.channels).toHaveLength(4);
    expect(read.channel?.entry.integrationIdentifier).toBe('slack-first');
    expect(credentialsForSending(read.channel!, SECRET)).toEqual({ webhookUrl: 'https://hooks.slack.com/services/T/B/first' });

    await t.a.put(`/v1/integrations/${first.integrationId}/status`, { active: false }).expect(200);
    const next = await readAsBefore(key);
    expect(next.channel?.entry.integrationIdentifier).toBe('slack-second');
    expect(next.channel?.integration.send_limits).not.toBeNull();
    expect(credentialsForSending(next.channel!, SECRET)).toEqual({ webhookUrl: 'https://hooks.slack.com/services/T/B/second' });
  });

  it("takes the credentials of the channel's primary integration before older ones (push: expo, then a primary push-webhook)", async () => {
    const workflow = await createWorkflow(t.a, { steps: [step.push()] });
    await createIntegration(t.a, { providerId: 'expo', identifier: 'expo-older' });
    const primary = await createIntegration(t.a, { providerId: 'push-webhook', identifier: 'push-primary', primary: true, credentials: { webhookUrl: 'https://push.example.com/hook', secretKey: 'k' } });
    await createSubscriber(t.a, { subscriberId: 'two-pushes' });
    await putCredentials('two-pushes', { providerId: 'expo', credentials: { deviceTokens: ['ExponentPushToken[older]'] } });
    await putCredentials('two-pushes', { providerId: 'push-webhook', credentials: { deviceTokens: ['device-primary'] } });
    const key = (await triggered(t.a, t.environments.a, workflow, ['two-pushes'], 'push')).get('two-pushes')!;

    const read = await readAsBefore(key);
    expect(read.channel?.integration.id).toBe(primary.integrationId);
    expect(credentialsForSending(read.channel!, SECRET)).toEqual({ deviceTokens: ['device-primary'] });
  });

  it('finds no chat credentials when none of the subscriber’s chat integrations is active', async () => {
    const workflow = await createWorkflow(t.a, { steps: [step.chat()] });
    const slack = await createIntegration(t.a, { providerId: 'slack', identifier: 'only-slack' });
    await createSubscriber(t.a, { subscriberId: 'muted' });
    await putCredentials('muted', { providerId: 'slack', credentials: { webhookUrl: 'https://hooks.slack.com/services/T/B/muted' } });
    await t.a.put(`/v1/integrations/${slack.integrationId}/status`, { active: false }).expect(200);
    const key = (await triggered(t.a, t.environments.a, workflow, ['muted'], 'chat')).get('muted')!;

    const read = await readAsBefore(key);
    expect(read.subscriber?.channels).toHaveLength(1);
    expect(read.channel).toBeUndefined();
  });

  it('reads a push subscriber’s several device tokens with their integration', async () => {
    const workflow = await createWorkflow(t.a, { steps: [step.push()] });
    await createIntegration(t.a, { providerId: 'slack', identifier: 'slack' });
    const expo = await createIntegration(t.a, { providerId: 'expo', identifier: 'expo', credentials: { apiKey: 'expo-access-token' } });
    await createSubscriber(t.a, { subscriberId: 'mobile' });
    await putCredentials('mobile', { providerId: 'slack', credentials: { webhookUrl: 'https://hooks.slack.com/services/T/B/mobile' } });
    const deviceTokens = ['ExponentPushToken[one]', 'ExponentPushToken[two]', 'ExponentPushToken[three]'];
    await putCredentials('mobile', { providerId: 'expo', credentials: { deviceTokens } });
    const key = (await triggered(t.a, t.environments.a, workflow, ['mobile'], 'push')).get('mobile')!;

    const read = await readAsBefore(key);
    expect(read.channel?.integration.id).toBe(expo.integrationId);
    expect(credentialsForSending(read.channel!, SECRET)).toEqual({ deviceTokens });
    // No email or SMS integration is read for a push.
    expect(read.integration).toBeUndefined();
  });

  it('reads the email integration: none while there is none, then the primary before an older active one', async () => {
    const workflow = await createWorkflow(t.a, { steps: [step.email()] });
    await createIntegration(t.a);
    await createSubscriber(t.a, { subscriberId: 'reader', email: 'reader@example.com' });
    await putCredentials('reader', { providerId: 'slack', credentials: { webhookUrl: 'https://hooks.slack.com/services/T/B/reader' } });
    const key = (await triggered(t.a, t.environments.a, workflow, ['reader'], 'email')).get('reader')!;

    const none = await readAsBefore(key);
    expect(none.integration).toBeUndefined();
    expect(none.channel).toBeUndefined();

    await createIntegration(t.a, { ...integrationBodies.smtp, identifier: 'older' });
    const primary = await createIntegration(t.a, { ...integrationBodies.sendgrid, identifier: 'newer', primary: true });
    const read = await readAsBefore(key);
    expect(read.integration?.id).toBe(primary.integrationId);
    // Sealed at rest: the read hands them over as stored.
    expect(read.integration?.credentials).toMatch(/^enc:v1:/);
  });

  it("reads the SMS integration of the job's environment, never another's", async () => {
    const workflow = await createWorkflow(t.a, { steps: [step.sms()] });
    const twilio = { providerId: 'twilio', credentials: { accountSid: 'AC1', token: 'tok', from: '+15005550006' } };
    await createIntegration(t.b, { ...twilio, identifier: 'other-tenant' });
    await createSubscriber(t.a, { subscriberId: 'texter', phone: '+15005550001' });
    const key = (await triggered(t.a, t.environments.a, workflow, ['texter'], 'sms')).get('texter')!;
    expect((await readAsBefore(key)).integration).toBeUndefined();

    const own = await createIntegration(t.a, { ...twilio, identifier: 'own' });
    expect((await readAsBefore(key)).integration?.id).toBe(own.integrationId);
  });

  it.runIf(testDatabaseUrl())('reads it all in one statement on PostgreSQL', async () => {
    const workflow = await createWorkflow(t.a, { steps: [step.chat()] });
    await createIntegration(t.a);
    await createSubscriber(t.a, { subscriberId: 'once' });
    await putCredentials('once', { providerId: 'slack', credentials: { webhookUrl: 'https://hooks.slack.com/services/T/B/once' } });
    const key = (await triggered(t.a, t.environments.a, workflow, ['once'], 'chat')).get('once')!;

    // Every table the separate reads went to.
    const recording = recordQueries(t.db, /\b(notifications|subscribers|subscriber_channels|integrations|subscriber_global_preferences|subscriber_workflow_preferences)\b/);
    expect((await readStepContext(t.db, key))?.channel).toBeDefined();
    const sent = recording.stop();
    expect(sent).toHaveLength(1);
    expect(sent[0].sql).toMatch(/^SELECT n\.subscriber_id AS recipient_id/);
  });
});

describe.runIf(process.env.HERALD_TEST_DB === 'sqlite')('its plan on SQLite', () => {
  it('reads every table through an index, scanning none', async () => {
    const plan = (await t.db.raw(`EXPLAIN QUERY PLAN ${STEP_CONTEXT}`, [t.environments.a, newId(), t.environments.a, 'email', newId()])) as Array<{ detail: string }>;
    const steps = plan.map((row) => row.detail);
    expect(steps.filter((detail) => detail.startsWith('SCAN'))).toEqual([]);
    expect(steps.filter((detail) => detail.startsWith('SEARCH'))).toHaveLength(10);
  });
});
