// On PostgreSQL the statements run through preparedRaw (selectRows, insertRows, insertAll, the
// rate limit, the job claim) are named prepared statements, parsed once per connection; a statement
// with many values (an IN list of some length) is not, so varying texts do not pile up on the server.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Knex } from 'knex';
import { selectRows } from '../src/db/knex.js';
import { insertAll } from '../src/db/insert-rows.js';
import { createTestDb, testDatabaseUrl, type TestDb } from './helpers/db.js';

let testDb: TestDb;
beforeAll(async () => {
  if (testDatabaseUrl()) testDb = await createTestDb();
});
afterAll(async () => testDb?.close());

/** The statements prepared on the transaction's connection, by their text. */
async function preparedOn(trx: Knex.Transaction): Promise<string[]> {
  const { rows } = await trx.raw('SELECT statement FROM pg_prepared_statements');
  return rows.map((row: { statement: string }) => row.statement);
}

describe.runIf(testDatabaseUrl())('prepared statements on PostgreSQL', () => {
  it('prepares a statement with few values once, and reuses it', async () => {
    await testDb.db.transaction(async (trx) => {
      const sql = 'SELECT id FROM environments WHERE id = ? AND id <> ?';
      expect(await selectRows(trx, sql, ['none', 'other'])).toEqual([]);
      expect(await selectRows(trx, sql, ['still none', 'other'])).toEqual([]);
      const prepared = (await preparedOn(trx)).filter((text) => text.includes('id <> $2'));
      expect(prepared).toHaveLength(1);
    });
  });

  it('prepares the one statement of a multi-table insert', async () => {
    await testDb.db.transaction(async (trx) => {
      const now = new Date().toISOString();
      await insertAll(trx, [{ table: 'organizations', rows: [{ id: 'org-prepared', name: 'Prepared', plan: 'free', created_at: now }] }]);
      expect((await preparedOn(trx)).some((text) => text.includes('json_populate_recordset(NULL::"organizations"'))).toBe(true);
      await trx('organizations').where({ id: 'org-prepared' }).delete();
    });
  });

  it('does not prepare a statement with more than 16 values', async () => {
    await testDb.db.transaction(async (trx) => {
      const ids = Array.from({ length: 17 }, (_, i) => `nobody-${i}`);
      await selectRows(trx, `SELECT id FROM environments WHERE id IN (${ids.map(() => '?').join(', ')})`, ids);
      expect((await preparedOn(trx)).filter((text) => text.includes('$17'))).toEqual([]);
    });
  });

  it('does not name a statement that reads every column, so a column added later does not break it', async () => {
    const db = testDb.db;
    await db.raw('CREATE TABLE prepared_probe (a integer)');
    await db.raw('INSERT INTO prepared_probe (a) VALUES (1)');
    // Side by side, so the statement runs on several of the pool's connections.
    const readAll = () => Promise.all(Array.from({ length: 8 }, () => selectRows(db, 'SELECT * FROM prepared_probe WHERE a = ?', [1])));
    expect(await readAll()).toEqual(Array(8).fill([{ a: 1 }]));
    await db.raw('ALTER TABLE prepared_probe ADD COLUMN b integer DEFAULT 2');
    expect(await readAll()).toEqual(Array(8).fill([{ a: 1, b: 2 }]));
    await db.raw('DROP TABLE prepared_probe');
  });
});
