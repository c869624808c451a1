// What a process remembers of an environment's webhook endpoints is forgotten when another process
// changes them: on PostgreSQL through NOTIFY, heard on a LISTEN connection of its own (pg-listen.ts).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDb, testDatabaseUrl, type TestDb } from '../helpers/db.js';
import { createOrganization } from '../../src/db/repos/accounts.js';
import { insertEndpoint } from '../../src/db/repos/webhook-endpoints.js';
import { listenForSubscriptionChanges, SUBSCRIPTIONS_TTL_MS, subscriptionsChanged, subscriptionsFor } from '../../src/db/webhook-subscriptions.js';

describe.runIf(testDatabaseUrl())('webhook endpoints changed by another process', () => {
  let testDb: TestDb;
  let environmentId: string;
  beforeAll(async () => {
    testDb = await createTestDb();
    environmentId = (await createOrganization(testDb.db, { name: 'Endpoints', plan: 'enterprise', environments: ['development'] })).environmentIds.development;
  });
  afterAll(async () => testDb?.close());

  it('are read again once its NOTIFY arrives, well before the memo expires', async () => {
    const stop = await listenForSubscriptionChanges(testDb.db, () => undefined);
    try {
      expect(await subscriptionsFor(testDb.db, environmentId)).toEqual([]);
      // Another process adds an endpoint: its NOTIFY is all this process learns of it.
      const started = Date.now();
      await testDb.db.transaction(async (trx) => {
        await insertEndpoint(trx, environmentId, { url: 'https://example.com/hook' }, 'whsec_c2VjcmV0', undefined, new Date());
        await trx.raw('SELECT pg_notify(?, ?)', ['herald_webhook_endpoints', environmentId]);
      });
      await expect.poll(async () => (await subscriptionsFor(testDb.db, environmentId)).length, { timeout: 3_000, interval: 20 }).toBe(1);
      expect(Date.now() - started).toBeLessThan(SUBSCRIPTIONS_TTL_MS);
    } finally {
      await stop();
    }
  });

  it('sends that NOTIFY with a change made here, at its commit', async () => {
    const heard: string[] = [];
    const client = await testDb.db.client.acquireRawConnection();
    try {
      client.on('notification', (message: { payload?: string }) => heard.push(message.payload ?? ''));
      await client.query('LISTEN herald_webhook_endpoints');
      await testDb.db.transaction((trx) => subscriptionsChanged(trx, environmentId));
      await expect.poll(() => heard, { timeout: 3_000 }).toEqual([environmentId]);
    } finally {
      await client.end();
    }
  });
});
