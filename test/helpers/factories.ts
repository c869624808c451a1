// Fixture factories: what tests keep making through the API, with defaults a test overrides only
// where it matters to it. Each one goes through the public API (so the contract recorder of
// startTestApp sees it), expects the status a successful create answers, and returns the created
// resource's data.
//
// Ids default to unique ones, so that two tests of one file never collide: a test that needs a
// known id passes it. Use them inside the `it` that needs the fixture (or in a `beforeEach`), never
// in one `it` for another.
import { createApiKey, createOrganization } from '../../src/db/repos/accounts.js';
import type { Db } from '../../src/db/knex.js';
import { Client, type TestApp } from './app.js';

type Plan = Parameters<typeof createOrganization>[1]['plan'];

let counter = 0;
/** A short id nobody else in this test file has: `prefix-1`, `prefix-2`, … */
export function uniqueId(prefix: string): string {
  counter += 1;
  return `${prefix}-${counter}`;
}

type Data = Record<string, any>;

// ── subscribers ──────────────────────────────────────────────────────────────────────────────

/** POST /v1/subscribers: a subscriber with a unique id unless `body.subscriberId` names one. */
export async function createSubscriber(client: Client, body: Data = {}): Promise<Data> {
  const res = await client.post('/v1/subscribers', { subscriberId: uniqueId('sub'), ...body }).expect(201);
  return res.body.data;
}

/** Several subscribers, one after another (so their internal ids keep the order of `ids`). */
export async function createSubscribers(client: Client, ids: string[], body: Data = {}): Promise<Data[]> {
  const created: Data[] = [];
  for (const subscriberId of ids) created.push(await createSubscriber(client, { ...body, subscriberId }));
  return created;
}

// ── workflows ────────────────────────────────────────────────────────────────────────────────

/** The step bodies tests use most, by channel; pass fields to override the template or the step. */
export const step = {
  inApp: (template: Data = {}, extra: Data = {}) => ({ type: 'in_app', template: { content: 'Hello {{subscriber.subscriberId}}', ...template }, ...extra }),
  email: (template: Data = {}, extra: Data = {}) => ({ type: 'email', template: { subject: 'Hello', content: '<p>Hello {{subscriber.firstName}}</p>', ...template }, ...extra }),
  chat: (template: Data = {}, extra: Data = {}) => ({ type: 'chat', template: { content: 'Hello', ...template }, ...extra }),
  sms: (template: Data = {}, extra: Data = {}) => ({ type: 'sms', template: { content: 'Hello', ...template }, ...extra }),
  push: (template: Data = {}, extra: Data = {}) => ({ type: 'push', template: { title: 'Hello', content: 'Hello', ...template }, ...extra }),
  digest: (amount: number, unit: 'seconds' | 'minutes' | 'hours' | 'days' = 'minutes', extra: Data = {}) => ({ type: 'digest', amount, unit, ...extra }),
  delay: (amount: number, unit: 'seconds' | 'minutes' | 'hours' | 'days' = 'minutes', extra: Data = {}) => ({ type: 'delay', amount, unit, ...extra }),
};

/**
 * POST /v1/workflows: one in-app step unless the body gives `steps`. A body with a `name` and no
 * `workflowId` gets the id the server derives from the name (`Chat ping` → `chat-ping`), as an API
 * user's would; a body with neither gets a unique one. Returns the workflow: trigger it by its
 * `workflowId`.
 */
export async function createWorkflow(client: Client, body: Data = {}): Promise<Data> {
  const workflowId = body.workflowId ?? (body.name ? undefined : uniqueId('workflow'));
  const res = await client.post('/v1/workflows', { name: `Workflow ${workflowId}`, steps: [step.inApp()], ...(workflowId ? { workflowId } : {}), ...body }).expect(201);
  return res.body.data;
}

// ── topics ───────────────────────────────────────────────────────────────────────────────────

/** POST /v1/topics, then adds `subscribers` (which must exist) as its members. Returns the topic. */
export async function createTopic(client: Client, body: Data = {}, subscribers: string[] = []): Promise<Data> {
  const topicKey = body.topicKey ?? body.key ?? uniqueId('topic');
  const res = await client.post('/v1/topics', { name: `Topic ${topicKey}`, ...(body.key ? {} : { topicKey }), ...body }).expect(201);
  if (subscribers.length > 0) await client.post(`/v1/topics/${topicKey}/subscribers`, { subscribers }).expect(200);
  return res.body.data;
}

// ── integrations ─────────────────────────────────────────────────────────────────────────────

/** Valid credentials for the providers tests use, so a test names only what it is about. */
export const integrationBodies = {
  sendgrid: { providerId: 'sendgrid', credentials: { apiKey: 'SG.live-api-key-0123456789', from: 'notifications@example.com' } },
  smtp: { providerId: 'smtp', credentials: { host: 'smtp.example.com', port: '587', user: 'herald', password: 'secret', from: 'herald@example.com' } },
  slack: { providerId: 'slack' },
};

/** POST /v1/integrations: by default a Slack integration, which needs no credentials. */
export async function createIntegration(client: Client, body: Data = integrationBodies.slack): Promise<Data> {
  return (await client.post('/v1/integrations', body).expect(201)).body.data;
}

// ── organizations, environments and keys ─────────────────────────────────────────────────────

/**
 * A new organization straight in the database (there is no API for one), with its environments and
 * a key of each, as clients of `t`'s app. Returns its ids and one Client per environment.
 */
export async function createTenant(
  t: Pick<TestApp, 'db' | 'http'>,
  options: { name?: string; plan?: Plan; environments?: string[] } = {},
): Promise<{ organizationId: string; environmentIds: Record<string, string>; clients: Record<string, Client> }> {
  const environments = options.environments ?? ['development'];
  const { organization, environmentIds } = await createOrganization(t.db, {
    name: options.name ?? uniqueId('organization'),
    plan: options.plan ?? 'enterprise',
    environments,
  });
  const clients: Record<string, Client> = {};
  for (const environment of environments) clients[environment] = new Client(t.http, await createKey(t.db, environmentIds[environment]));
  return { organizationId: organization.id, environmentIds, clients };
}

/** A new API key of an environment: its secret. */
export async function createKey(db: Db, environmentId: string, name = 'test'): Promise<string> {
  return (await createApiKey(db, { environmentId, name })).key;
}
