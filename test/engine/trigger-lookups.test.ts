// What a bulk trigger reads before it decides (db/trigger-store.ts, bulkTriggerStore): the workflow once,
// and on PostgreSQL the subscribers its events name read together. A read that fails must fail the
// events, never pass for subscribers that do not exist.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bulkTriggerStore } from '../../src/db/trigger-store.js';
import { createOrganization } from '../../src/db/repos/accounts.js';
import { insertSubscriber } from '../../src/db/repos/subscribers.js';
import { createTestDb, type TestDb } from '../helpers/db.js';

let testDb: TestDb;
let environmentId: string;
beforeAll(async () => {
  testDb = await createTestDb();
  ({
    environmentIds: { development: environmentId },
  } = await createOrganization(testDb.db, { name: 'Lookups', plan: 'enterprise', environments: ['development'] }));
  await insertSubscriber(testDb.db, environmentId, { subscriberId: 'ada' }, new Date());
});
afterAll(async () => testDb.close());

describe('bulkTriggerStore', () => {
  it('finds the subscribers that exist among those named side by side', async () => {
    const store = bulkTriggerStore(testDb.db, environmentId);
    const [first, second] = await Promise.all([store.read('no-such-workflow', ['ada', 'ghost']), store.read('no-such-workflow', ['ghost', 'ada'])]);
    expect([...first.keys]).toEqual([['ada', expect.any(String)]]);
    expect([...second.keys]).toEqual([['ada', first.keys.get('ada')]]);
    expect(first.workflow).toBeUndefined();
  });

  it('fails when reading the subscribers fails, rather than calling them missing', async () => {
    // In a transaction that is rolled back, the subscribers' table is gone: their read fails.
    await testDb.db
      .transaction(async (trx) => {
        await trx.schema.renameTable('subscribers', 'subscribers_away');
        await expect(bulkTriggerStore(trx as never, environmentId).read('no-such-workflow', ['ada'])).rejects.toThrow(/subscribers/);
        throw new Error('roll back');
      })
      .catch((err: Error) => expect(err.message).toBe('roll back'));
  });
});
