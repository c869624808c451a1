// Every resource lives in exactly one environment. For each operation of the contract whose path
// names a resource, a key of another organization, and a key of the same organization's other
// environment, get 404 and change nothing; the owning environment's key is served. The operations
// come from openapi/v1.yaml, so a new one is swept as soon as it is in the contract.
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type Client, type TestApp } from '../helpers/app.js';
import { JobRunner } from '../../src/engine/runner.js';
import {
  ensureFixture,
  fillPath,
  seedFixture,
  snapshot,
  snapshotChanges,
  specOperations,
  type Fixture,
  type SpecOperation,
  SUBSCRIBERS,
  WORKFLOW,
} from '../helpers/hostile.js';

const operations = await specOperations();
// Deletes go last, so that the resources they remove (and the in-app messages that go with a
// subscriber) are still there for every other operation.
// The inbox's operations take a subscriber token, not a key: they have a sweep of their own below.
const addressed = operations
  .filter((op) => op.pathParams.length > 0 && !op.inbox)
  .sort((a, b) => Number(a.method === 'DELETE') - Number(b.method === 'DELETE'));
const lists = operations.filter((op) => op.pathParams.length === 0 && op.method === 'GET' && !op.inbox);
const inboxAddressed = operations
  .filter((op) => op.inbox && op.pathParams.includes('messageId'))
  .sort((a, b) => Number(a.method === 'DELETE') - Number(b.method === 'DELETE'));

let t: TestApp;
let fixture: Fixture;
// One fixture for the file: tests only read it, and the one that changes it (serves the owning
// environment's key: a delete, an update) puts it back, so any test may run alone or in any order.
beforeAll(async () => {
  t = await startTestApp();
  fixture = await seedFixture(t);
});
afterEach(async () => t.assertContract());
afterAll(async () => t?.close());

/** The operation's documented request, aimed at environment A's resources. */
function requestOf(op: SpecOperation) {
  const missing = op.pathParams.filter((name) => !(name in fixture));
  if (missing.length > 0) throw new Error(`${op.operationId}: the fixture has no resource for {${missing.join('}, {')}}; add one to test/helpers/hostile.ts`);
  if (op.body?.required && op.body.examples.length === 0) throw new Error(`${op.operationId}: the contract has no request example to send`);
  return { path: fillPath(op.path, fixture), body: op.body?.examples[0] as object | undefined };
}

function send(client: Client, op: SpecOperation) {
  const { path, body } = requestOf(op);
  switch (op.method) {
    case 'GET':
      return client.get(path);
    case 'POST':
      return client.post(path, body);
    case 'PUT':
      return client.put(path, body);
    case 'PATCH':
      return client.patch(path, body);
    case 'DELETE':
      return client.delete(path);
    default:
      throw new Error(`${op.operationId}: no client method for ${op.method}`);
  }
}

describe('inbox operations that address a message, with subscriber tokens', () => {
  // A message of its own, so that the inbox's delete takes nothing from the sweep below.
  let inbox: Record<string, string>;
  const tokens: Record<string, string> = {};
  beforeAll(async () => {
    await t.a.post('/v1/events/trigger', { name: WORKFLOW.workflowId, to: SUBSCRIBERS[0].subscriberId, payload: { postTitle: 'Inbox' } }).expect(201);
    await new JobRunner(t.deps).runUntilIdle();
    const [newest] = (await t.a.get(`/v1/subscribers/${SUBSCRIBERS[0].subscriberId}/messages`).expect(200)).body.data;
    inbox = { ...fixture, messageId: newest.messageId, actionType: 'primary' };
    // The same subscriberId in the other environments: their tokens name the same id, and still see nothing of A's.
    for (const [name, client] of [['a', t.a], ['b', t.b], ['aProduction', t.aProduction]] as const) {
      if (name !== 'a') await client.post('/v1/subscribers', SUBSCRIBERS[0]);
      tokens[name] = (await client.post(`/v1/subscribers/${SUBSCRIBERS[0].subscriberId}/inbox-tokens`, {}).expect(201)).body.data.token;
    }
  });
  // The other environments' subscriber goes again, so the sweep below finds nothing there.
  afterAll(async () => {
    for (const client of [t.b, t.aProduction]) await client.delete(`/v1/subscribers/${SUBSCRIBERS[0].subscriberId}`).expect(200);
  });
  const sendAs = (token: string, op: SpecOperation) => {
    const path = fillPath(op.path, inbox);
    const body = op.body?.examples[0] as object | undefined;
    const req = t.http[op.method.toLowerCase() as 'get' | 'post' | 'patch' | 'delete'](path).set('Authorization', `Bearer ${token}`);
    return body === undefined ? req : req.send(body);
  };

  describe.each(inboxAddressed.map((op) => [`${op.method} ${op.path} (${op.operationId})`, op] as const))('%s', (_name, op) => {
    it('answers 404 to the token of the same subscriberId in another organization or environment, and changes nothing', async () => {
      for (const other of ['b', 'aProduction']) {
        const before = await snapshot(t.db);
        const res = await sendAs(tokens[other], op);
        expect(res.status, JSON.stringify(res.body)).toBe(404);
        expect(snapshotChanges(before, await snapshot(t.db))).toEqual([]);
      }
    });

    it('serves the owning subscriber’s token', async () => {
      const res = await sendAs(tokens.a, op);
      expect(res.status, JSON.stringify(res.body)).toBeGreaterThanOrEqual(200);
      expect(res.status, JSON.stringify(res.body)).toBeLessThan(300);
    });
  });
});

describe('operations that address a resource', () => {
  it('cover every kind of resource the contract has', () => {
    const kinds = new Set(addressed.flatMap((op) => op.pathParams));
    expect([...kinds].sort()).toEqual(['deliveryId', 'endpointId', 'integrationId', 'messageId', 'notificationId', 'subscriberId', 'topicKey', 'transactionId', 'workflowId']);
  });

  describe.each(addressed.map((op) => [`${op.method} ${op.path} (${op.operationId})`, op] as const))('%s', (_name, op) => {
    it('answers 404 to a key of another organization and changes nothing', async () => {
      const before = await snapshot(t.db);
      const res = await send(t.b, op);
      expect(res.status, JSON.stringify(res.body)).toBe(404);
      expect(snapshotChanges(before, await snapshot(t.db))).toEqual([]);
    });

    it("answers 404 to a key of the same organization's other environment and changes nothing", async () => {
      const before = await snapshot(t.db);
      const res = await send(t.aProduction, op);
      expect(res.status, JSON.stringify(res.body)).toBe(404);
      expect(snapshotChanges(before, await snapshot(t.db))).toEqual([]);
    });

    it("serves the owning environment's key", async () => {
      const res = await send(t.a, op);
      expect(res.status, JSON.stringify(res.body)).toBeGreaterThanOrEqual(200);
      expect(res.status, JSON.stringify(res.body)).toBeLessThan(300);
      // Put back what a delete or an update took away, for the operations after this one.
      fixture = await ensureFixture(t, t.a, fixture);
    });
  });
});

describe('lists', () => {
  it.each(lists.map((op) => [`${op.path} (${op.operationId})`, op] as const))(
    "%s shows another environment nothing of environment A's",
    async (_name, op) => {
      const own = JSON.stringify((await send(t.a, op).expect(200)).body);
      const generated = [fixture.notificationId, fixture.transactionId, fixture.messageId, fixture.integrationId];
      for (const client of [t.b, t.aProduction]) {
        const text = JSON.stringify((await send(client, op).expect(200)).body);
        for (const id of [...generated, fixture.subscriberId, fixture.workflowId, fixture.topicKey]) {
          if (own.includes(id) || generated.includes(id)) expect(text).not.toContain(id);
        }
      }
    },
  );
});
