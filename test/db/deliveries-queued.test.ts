// The send loop hears of webhook deliveries queued in this process once they are committed
// (db/deliveries-queued.ts): never before the commit (its claim would not see them), never for a
// rollback, and once for a transaction however many it queued.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDb, type TestDb } from '../helpers/db.js';
import { writeTransaction } from '../../src/db/group-commit.js';
import { listenDeliveriesQueued, tellDeliveriesQueued } from '../../src/db/deliveries-queued.js';

let testDb: TestDb;
beforeAll(async () => {
  testDb = await createTestDb();
});
afterAll(async () => testDb?.close());

const settled = () => new Promise((resolve) => setTimeout(resolve, 20));

describe('the deliveries-queued signal', () => {
  it('tells after the commit, once a transaction, never for a rollback, and at once outside a transaction', async () => {
    let heard = 0;
    const stop = listenDeliveriesQueued(testDb.db, () => heard++);
    try {
      let heardInside = -1;
      await writeTransaction(testDb.db, async (trx) => {
        tellDeliveriesQueued(trx);
        await trx.transaction(async (nested) => tellDeliveriesQueued(nested));
        heardInside = heard;
      });
      await settled();
      expect(heardInside).toBe(0);
      expect(heard).toBe(1);

      await expect(
        writeTransaction(testDb.db, async (trx) => {
          tellDeliveriesQueued(trx);
          throw new Error('rolled back');
        }),
      ).rejects.toThrow('rolled back');
      await settled();
      expect(heard).toBe(1);

      tellDeliveriesQueued(testDb.db);
      expect(heard).toBe(2);
    } finally {
      stop();
    }
    tellDeliveriesQueued(testDb.db);
    expect(heard).toBe(2);
  });
});
