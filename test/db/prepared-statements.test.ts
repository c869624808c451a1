// On PostgreSQL, selectRows, changeRows and the inserts run their statements without knex's runner
// (queryPostgres), on a pool connection or on the transaction's own: the same statements, errors and
// query events as knex. Each is kept prepared on its connection (a named prepared statement), unless
// it reads `*`, carries many values, or the database was opened with preparedStatements off (for a
// pooler in transaction mode that cannot keep them).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Knex } from 'knex';
import { createDb, selectRows, type Db } from '../../src/db/knex.js';
import { isUniqueViolation } from '../../src/db/errors.js';
import { insertAll } from '../../src/db/insert-rows.js';
import { createTestDb, processDatabaseUrl, testDatabaseUrl, type TestDb } from '../helpers/db.js';
import { recordQueries } from '../helpers/queries.js';

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
  it('keeps a statement prepared on its connection, but not one that reads * or carries many values', async () => {
    await testDb.db.transaction(async (trx) => {
      const now = new Date().toISOString();
      const sql = 'SELECT id FROM environments WHERE id = ? AND id <> ?';
      expect(await selectRows(trx, sql, ['none', 'other'])).toEqual([]);
      expect(await selectRows(trx, sql, ['still none', 'other'])).toEqual([]);
      const many = Array.from({ length: 17 }, (_, i) => `v${i}`);
      expect(await selectRows(trx, `SELECT id FROM environments WHERE id IN (${many.map(() => '?').join(', ')})`, many)).toEqual([]);
      expect(await selectRows(trx, 'SELECT * FROM environments WHERE id = ? AND id <> ?', ['none', 'every column'])).toEqual([]);
      await insertAll(trx, [{ table: 'organizations', rows: [{ id: 'org-named', name: 'Named', plan: 'free', created_at: now }] }]);
      expect(await selectRows(trx, 'SELECT name FROM organizations WHERE id = ?', ['org-named'])).toEqual([{ name: 'Named' }]);
      const prepared = await preparedOn(trx);
      expect(prepared).toContain('SELECT id FROM environments WHERE id = $1 AND id <> $2');
      expect(prepared).toContain('SELECT name FROM organizations WHERE id = $1');
      expect(prepared.filter((text) => text.includes('$17') || text.includes('*'))).toEqual([]);
      await trx('organizations').where({ id: 'org-named' }).delete();
    });
  });

  it('keeps none prepared when the database is opened with preparedStatements off', async () => {
    const db = createDb(processDatabaseUrl(testDb), { preparedStatements: false });
    try {
      await db.transaction(async (trx) => {
        expect(await selectRows(trx, 'SELECT id FROM environments WHERE id = ? AND id <> ? AND 1 = 1', ['none', 'other'])).toEqual([]);
        expect(await preparedOn(trx)).toEqual([]);
      });
    } finally {
      await db.destroy();
    }
  });

  it('reads every column of a table a column was added to meanwhile', async () => {
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

  it("runs on the transaction's connection without knex's runner, and refuses to run once it has ended", async () => {
    const sql = 'SELECT id FROM organizations WHERE id = ? AND id <> ?';
    const now = new Date().toISOString();
    const seenByTransaction: Array<{ sql: string; __knexQueryUid: string }> = [];
    let ended!: Knex.Transaction;
    await testDb.db.transaction(async (trx) => {
      trx.on('query', (query: { sql: string; __knexQueryUid: string }) => seenByTransaction.push(query));
      await trx('organizations').insert({ id: 'org-in-trx', name: 'Uncommitted', plan: 'free', created_at: now });
      // Only the transaction's own connection sees the row it has not committed.
      expect(await selectRows(trx, sql, ['org-in-trx', 'other'])).toEqual([{ id: 'org-in-trx' }]);
      expect(await selectRows(testDb.db, sql, ['org-in-trx', 'other'])).toEqual([]);
      ended = trx;
      await trx.rollback();
    }).catch(() => undefined);
    // Told to the transaction's listeners, under queryPostgres's own query ids rather than knex's.
    expect(seenByTransaction.filter((query) => query.sql.includes('id <> $2')).map((query) => query.__knexQueryUid)).toEqual([expect.stringMatching(/^herald-/)]);
    await expect(selectRows(ended, sql, ['org-in-trx', 'other'])).rejects.toThrow(/Transaction query already complete/);
  });

  describe('outside a transaction', () => {
    let db: Db;
    beforeAll(() => {
      db = createDb(processDatabaseUrl(testDb));
    });
    afterAll(async () => db?.destroy());

    it('runs the statement on a pool connection, kept prepared there, and tells knex of it', async () => {
      const sql = 'SELECT id FROM environments WHERE id = ? AND id <> ? AND id <> ?';
      const recording = recordQueries(db, /id <> \$3/);
      const answered: unknown[] = [];
      const onResponse = (_response: unknown, query: { sql: string; __knexQueryUid: string }) => {
        if (query.sql.includes('id <> $3')) answered.push(query.__knexQueryUid);
      };
      db.on('query-response', onResponse);
      // One after another, the pool hands out its one idle connection each time.
      expect(await selectRows(db, sql, ['none', 'a', 'b'])).toEqual([]);
      expect(await selectRows(db, sql, ['still none', 'a', 'b'])).toEqual([]);
      const prepared = await selectRows<{ statement: string }>(db, 'SELECT statement FROM pg_prepared_statements WHERE statement LIKE ?', ['%id <> $3']);
      expect(prepared).toEqual([{ statement: sql.replace(/\?/g, (_, i) => `$${sql.slice(0, i).split('?').length}`) }]);
      expect(recording.stop().map((query) => query.bindings)).toEqual([['none', 'a', 'b'], ['still none', 'a', 'b']]);
      db.off('query-response', onResponse);
      // Answered once each, under a query id of its own (scripts/bench/queries.ts times them by it).
      expect(new Set(answered).size).toBe(2);
    });

    it("fails as knex does: the database's error code, and the statement in the message", async () => {
      const failure = await selectRows(db, 'SELECT id FROM no_such_table WHERE id = ?', ['x']).catch((err: unknown) => err);
      expect(failure).toMatchObject({ code: '42P01', message: expect.stringContaining('SELECT id FROM no_such_table WHERE id = ?') });
      const now = new Date().toISOString();
      const organization = { id: 'org-twice', name: 'Twice', plan: 'free', created_at: now };
      await insertAll(db, [{ table: 'organizations', rows: [organization] }]);
      const duplicate = await insertAll(db, [{ table: 'organizations', rows: [organization] }]).catch((err: unknown) => err);
      expect(isUniqueViolation(duplicate)).toBe(true);
      await db('organizations').where({ id: 'org-twice' }).delete();
    });

    it("leaves a text with knex's own placeholders (?? for a name) to knex", async () => {
      expect(await selectRows(db, 'SELECT ?? FROM environments WHERE id = ?', ['id', 'none'])).toEqual([]);
    });
  });
});
