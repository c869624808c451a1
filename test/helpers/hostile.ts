// Shared by the hostile-input suites (test/fuzz, test/http/isolation.test.ts): the operations of
// the contract as data, a snapshot of every table to prove a request changed nothing, a raw HTTP
// client that can send what supertest will not (no content type, odd methods, bytes), and a
// fixture of every kind of resource in organization A's development environment.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { OpenAPIBackend } from 'openapi-backend';
import { createBackend } from '../../src/http/backend.js';
import { isPostgres, type Db } from '../../src/db/knex.js';
import { JobRunner } from '../../src/engine/runner.js';
import type { Client, TestApp } from './app.js';

// --- The contract as data ---------------------------------------------------------------------

export type JsonSchema = Record<string, unknown>;

export interface SpecParameter {
  name: string;
  in: 'path' | 'query' | 'header' | 'cookie';
  required: boolean;
  schema: JsonSchema;
}

export interface SpecOperation {
  operationId: string;
  /** Upper case, as it goes on the wire. */
  method: string;
  /** The templated path under /v1, such as `/subscribers/{subscriberId}`. */
  path: string;
  parameters: SpecParameter[];
  pathParams: string[];
  body?: { required: boolean; schema: JsonSchema; examples: unknown[] };
  statuses: string[];
  /** An inbox operation: opened by a subscriber token, not an API key. */
  inbox?: boolean;
}

let backendPromise: Promise<OpenAPIBackend> | undefined;
function backend(): Promise<OpenAPIBackend> {
  backendPromise ??= createBackend();
  return backendPromise;
}

/** Every operation of openapi/v1.yaml, dereferenced, in the contract's order. */
export async function specOperations(): Promise<SpecOperation[]> {
  const api = await backend();
  return api.router.getOperations().map((op) => {
    const parameters = ((op.parameters ?? []) as unknown as Array<Record<string, unknown>>).map((p) => ({
      name: String(p.name),
      in: p.in as SpecParameter['in'],
      required: p.required === true,
      schema: (p.schema ?? {}) as JsonSchema,
    }));
    const json = (op.requestBody as { required?: boolean; content?: Record<string, { schema?: JsonSchema; examples?: Record<string, { value: unknown }> }> } | undefined)
      ?.content?.['application/json'];
    return {
      operationId: op.operationId!,
      method: op.method.toUpperCase(),
      path: op.path,
      parameters,
      pathParams: parameters.filter((p) => p.in === 'path').map((p) => p.name),
      body: json
        ? {
            required: (op.requestBody as { required?: boolean }).required === true,
            schema: json.schema ?? {},
            examples: Object.values(json.examples ?? {}).map((e) => e.value),
          }
        : undefined,
      statuses: Object.keys(op.responses ?? {}),
      inbox: ((op.security ?? []) as Array<Record<string, unknown>>).some((requirement) => 'subscriberToken' in requirement),
    };
  });
}

/** Fills a templated path; values are URL-encoded unless `raw` says they already are. */
export function fillPath(template: string, values: Record<string, string>, raw = false): string {
  return `/v1${template.replace(/\{(\w+)\}/g, (_m, name: string) => {
    if (!(name in values)) throw new Error(`No value for {${name}} in ${template}`);
    return raw ? values[name] : encodeURIComponent(values[name]);
  })}`;
}

// --- Every table, before and after ----------------------------------------------------------

/**
 * Tables that record that a request happened rather than what it did: migrations, and the rate
 * limiter's buckets and idempotency records (issue 5), which every request may legitimately touch.
 */
const BOOKKEEPING = /^knex_migrations|rate_limit|idempotency/i;

export type Snapshot = Map<string, string[]>;

export async function tableNames(db: Db): Promise<string[]> {
  const names = isPostgres(db)
    ? ((await db.raw(`SELECT table_name AS name FROM information_schema.tables WHERE table_schema = current_schema() AND table_type = 'BASE TABLE'`)) as {
        rows: Array<{ name: string }>;
      }).rows.map((r) => r.name)
    : ((await db.raw(`SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'`)) as Array<{ name: string }>).map((r) => r.name);
  return names.filter((name) => !BOOKKEEPING.test(name)).sort();
}

/** Every row of every table, as sorted JSON lines per table. */
export async function snapshot(db: Db): Promise<Snapshot> {
  const result: Snapshot = new Map();
  for (const table of await tableNames(db)) {
    const rows = (await db(table).select('*')) as unknown[];
    result.set(table, rows.map((row) => JSON.stringify(row)).sort());
  }
  return result;
}

/** What changed between two snapshots, one line per table and row; empty when nothing did. */
export function snapshotChanges(before: Snapshot, after: Snapshot): string[] {
  const changes: string[] = [];
  const cut = (s: string) => (s.length > 300 ? `${s.slice(0, 300)}… (${s.length} chars)` : s);
  for (const table of new Set([...before.keys(), ...after.keys()])) {
    const was = before.get(table) ?? [];
    const is = after.get(table) ?? [];
    const wasSet = new Set(was);
    const isSet = new Set(is);
    const removed = was.filter((row) => !isSet.has(row));
    const added = is.filter((row) => !wasSet.has(row));
    if (removed.length === 0 && added.length === 0 && was.length === is.length) continue;
    changes.push(`table ${table}: ${was.length} → ${is.length} rows`);
    for (const row of removed.slice(0, 3)) changes.push(`  - ${cut(row)}`);
    for (const row of added.slice(0, 3)) changes.push(`  + ${cut(row)}`);
  }
  return changes;
}

// --- A raw HTTP client ------------------------------------------------------------------------

export interface RawRequest {
  method: string;
  /** The request target exactly as sent, `/v1/…?…`. */
  path: string;
  headers: Record<string, string>;
  body?: Buffer;
}

export interface RawResponse {
  status: number;
  headers: http.IncomingHttpHeaders;
  text: string;
}

export interface RawServer {
  send(request: RawRequest): Promise<RawResponse>;
  close(): Promise<void>;
}

/**
 * Serves the test app on 127.0.0.1 and sends requests with Node's own client, which adds no
 * header of its own beyond Host, Connection and Content-Length.
 */
export async function rawServer(t: TestApp): Promise<RawServer> {
  const server = http.createServer(t.app);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  const agent = new http.Agent({ keepAlive: false });
  return {
    send(request) {
      return new Promise((resolve, reject) => {
        const headers: Record<string, string | number> = { ...request.headers };
        if (request.body !== undefined) headers['Content-Length'] = request.body.length;
        const req = http.request({ host: '127.0.0.1', port, method: request.method, path: request.path, headers, agent }, (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (chunk: Buffer) => chunks.push(chunk));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, text: Buffer.concat(chunks).toString('utf8') }));
          res.on('error', reject);
        });
        req.on('error', reject);
        req.end(request.body);
      });
    },
    async close() {
      agent.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

// --- A fixture of every kind of resource ------------------------------------------------------

/** A value for every path parameter of the contract, each naming a resource of environment A. */
export interface Fixture {
  subscriberId: string;
  workflowId: string;
  topicKey: string;
  integrationId: string;
  notificationId: string;
  transactionId: string;
  messageId: string;
  endpointId: string;
  deliveryId: string;
  [name: string]: string;
}

// Named as in the contract's examples, so that every documented request example fits the fixture.
export const SUBSCRIBERS = [
  { subscriberId: 'user-123', email: 'ada@example.com', firstName: 'Ada', lastName: 'Lovelace', phone: '+447700900123', timezone: 'Europe/London', data: { plan: 'pro' } },
  { subscriberId: 'user-456', email: 'grace@example.com', firstName: 'Grace' },
  { subscriberId: 'user-789', firstName: 'Edsger', locale: 'nl-NL' },
];
export const WORKFLOW = {
  name: 'Comment added',
  workflowId: 'comment-added',
  tags: ['social'],
  // In-app first, so running the jobs once puts a message in the feed; the email waits an hour
  // behind the delay, which the manual clock never reaches, so nothing is ever sent over the network.
  steps: [
    { type: 'in_app', template: { content: '{{actor.firstName}} commented on {{payload.postTitle}}', primaryAction: { label: 'Reply' } } },
    { type: 'delay', amount: 1, unit: 'hours' },
    { type: 'email', template: { subject: 'New comment on {{payload.postTitle}}', content: '<p>{{payload.commentText}}</p>' } },
  ],
  payloadSchema: { type: 'object', required: ['postTitle'], properties: { postTitle: { type: 'string' } } },
};
export const TOPIC = { topicKey: 'project-42-watchers', name: 'Watchers of project 42' };
export const SMTP = {
  providerId: 'smtp',
  name: 'Company mail server',
  identifier: 'company-smtp',
  credentials: { host: 'smtp.example.com', port: 587, user: 'herald', password: 's3cr3t-passw0rd', from: 'notifications@example.com' },
};
export const SLACK = { providerId: 'slack', name: 'Company Slack', identifier: 'company-slack' };
// A webhook endpoint taking only an event the fixture never causes: no delivery is ever sent over the network.
export const ENDPOINT = { url: 'https://api.example.com/herald/webhooks', description: 'Delivery status for the billing service', eventTypes: ['webhook_endpoint.disabled'] };

async function ok(response: Promise<{ status: number; body: unknown }> | { status: number; body: unknown }, ...allowed: number[]) {
  const res = await response;
  if (!allowed.includes(res.status)) throw new Error(`fixture: unexpected ${res.status}: ${JSON.stringify(res.body).slice(0, 500)}`);
  return res as { status: number; body: { data: unknown } & Record<string, unknown> };
}

/**
 * Creates every kind of resource in the environment of `client` (A's development one, normally):
 * subscribers, a workflow, a topic with members, integrations, and a triggered event whose jobs ran
 * once, which leaves a notification, its transactionId and an in-app message.
 */
export async function seedFixture(t: TestApp, client: Client = t.a): Promise<Fixture> {
  const partial = await ensureFixture(t, client, {}, { delivery: false });
  const triggered = await ok(
    client.post('/v1/events/trigger', { name: WORKFLOW.workflowId, to: SUBSCRIBERS[0].subscriberId, actor: SUBSCRIBERS[1].subscriberId, payload: { postTitle: 'Release notes' } }),
    201,
  );
  const transactionId = (triggered.body.data as { transactionId: string }).transactionId;
  // Runs the in-app step; the delay then waits for a clock that tests do not move this far.
  await new JobRunner(t.deps).runUntilIdle();
  const notifications = await ok(client.get(`/v1/notifications?transactionId=${encodeURIComponent(transactionId)}`), 200);
  const notificationId = (notifications.body.data as Array<{ notificationId: string }>)[0].notificationId;
  const feed = await ok(client.get(`/v1/subscribers/${SUBSCRIBERS[0].subscriberId}/messages`), 200);
  const messageId = (feed.body.data as Array<{ messageId: string }>)[0].messageId;
  // A webhook delivery, queued after the jobs ran and never sent (no runner runs again).
  const test = await ok(client.post(`/v1/webhook-endpoints/${partial.endpointId}/test`), 200);
  const deliveryId = (test.body.data as { deliveryId: string }).deliveryId;
  return { ...partial, transactionId, notificationId, messageId, deliveryId } as Fixture;
}

/**
 * Makes sure the fixture's subscribers, workflow, topic and integrations exist (a test may have
 * deleted or changed them), re-creating what is missing. Notifications, their transactionId and
 * in-app messages cannot be re-made without running jobs, so they are left as they are.
 */
export async function ensureFixture(t: TestApp, client: Client, fixture: Partial<Fixture>, options: { delivery?: boolean } = {}): Promise<Fixture> {
  for (const subscriber of SUBSCRIBERS) await ok(client.post('/v1/subscribers', subscriber), 201, 409);
  const workflow = await ok(client.get(`/v1/workflows/${WORKFLOW.workflowId}`), 200, 404);
  const current = workflow.body.data as { name?: string; active?: boolean; steps?: unknown[]; payloadSchema?: unknown } | undefined;
  if (workflow.status === 404) await ok(client.post('/v1/workflows', WORKFLOW), 201);
  else if (current?.name !== WORKFLOW.name || current?.steps?.length !== WORKFLOW.steps.length || JSON.stringify(current?.payloadSchema) !== JSON.stringify(WORKFLOW.payloadSchema)) {
    const { workflowId: _, ...rest } = WORKFLOW;
    await ok(client.put(`/v1/workflows/${WORKFLOW.workflowId}`, rest), 200);
  }
  if (current?.active === false) await ok(client.put(`/v1/workflows/${WORKFLOW.workflowId}/status`, { active: true }), 200);
  await ok(client.post('/v1/topics', TOPIC), 201, 409);
  await ok(client.post(`/v1/topics/${TOPIC.topicKey}/subscribers`, { subscribers: SUBSCRIBERS.map((s) => s.subscriberId) }), 200);

  const integrations = await ok(client.get('/v1/integrations?includeInactive=true&limit=100'), 200);
  const found = integrations.body.data as Array<{ identifier: string; integrationId: string; active: boolean }>;
  const byIdentifier = new Map(found.map((i) => [i.identifier, i]));
  let integrationId = '';
  for (const integration of [SMTP, SLACK]) {
    const existing = byIdentifier.get(integration.identifier);
    let id = existing?.integrationId;
    if (!id) id = ((await ok(client.post('/v1/integrations', integration), 201)).body.data as { integrationId: string }).integrationId;
    else if (!existing!.active) await ok(client.put(`/v1/integrations/${id}/status`, { active: true }), 200);
    if (integration === SMTP) integrationId = id;
  }
  // A subscriber with chat credentials, for the operations that read or replace them.
  const subscriber = await ok(client.get(`/v1/subscribers/${SUBSCRIBERS[0].subscriberId}`), 200);
  const channels = (subscriber.body.data as { channels: Array<{ providerId: string }> }).channels;
  if (!channels.some((c) => c.providerId === 'slack')) {
    await ok(
      client.put(`/v1/subscribers/${SUBSCRIBERS[0].subscriberId}/credentials`, {
        providerId: 'slack',
        credentials: { webhookUrl: 'https://hooks.slack.com/services/T000/B000/XXXX' },
      }),
      200,
    );
  }
  // The webhook endpoint, enabled, and a delivery of it (unless the caller makes its own).
  const endpoints = (await ok(client.get('/v1/webhook-endpoints?limit=100'), 200)).body.data as Array<{ endpointId: string; url: string; disabled: boolean }>;
  let endpoint = endpoints.find((e) => e.url === ENDPOINT.url);
  if (!endpoint) endpoint = (await ok(client.post('/v1/webhook-endpoints', ENDPOINT), 201)).body.data as { endpointId: string; url: string; disabled: boolean };
  else if (endpoint.disabled) await ok(client.patch(`/v1/webhook-endpoints/${endpoint.endpointId}`, { disabled: false }), 200);
  let deliveryId = fixture.deliveryId;
  if ((options.delivery ?? true) && (!deliveryId || endpoint.endpointId !== fixture.endpointId)) {
    deliveryId = ((await ok(client.post(`/v1/webhook-endpoints/${endpoint.endpointId}/test`), 200)).body.data as { deliveryId: string }).deliveryId;
  }
  return {
    ...fixture,
    subscriberId: SUBSCRIBERS[0].subscriberId,
    workflowId: WORKFLOW.workflowId,
    topicKey: TOPIC.topicKey,
    integrationId,
    endpointId: endpoint.endpointId,
    ...(deliveryId ? { deliveryId } : {}),
  } as Fixture;
}
