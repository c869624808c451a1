// The prepared statements a SQLite connection keeps (statement-cache.ts): a text from its second
// use on, within a budget of text, the least recently used out first. A prepared statement's memory
// grows with its text, and texts vary with the rows an insert writes and the values an IN list
// holds: a text used once is not kept.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Knex } from 'knex';
import { inList, selectRows, type Db } from '../../src/db/knex.js';
import { statementCacheOf, STATEMENT_CACHE_CHARS } from '../../src/db/sqlite.js';
import { insertRows } from '../../src/db/insert-rows.js';
import { StatementCache } from '../../src/db/statement-cache.js';
import { createTestDb, testDatabaseUrl, type TestDb } from '../helpers/db.js';

describe('StatementCache', () => {
  /** A cache of `budget` characters whose statements are numbered in the order they were prepared. */
  const numbered = (budget: number) => {
    let prepared = 0;
    const cache = new StatementCache<number>(budget);
    return { cache, get: (sql: string) => cache.get(sql, () => ++prepared) };
  };
  /** Uses each text twice, so that it is kept. */
  const keep = (get: (sql: string) => number, ...texts: string[]) => texts.forEach((sql) => (get(sql), get(sql)));

  it('keeps a text from its second use on', () => {
    const { cache, get } = numbered(100);
    expect(get('SELECT 1')).toBe(1);
    expect(cache.has('SELECT 1')).toBe(false);
    expect(get('SELECT 1')).toBe(2);
    expect(get('SELECT 1')).toBe(2);
    expect(get('SELECT 1')).toBe(2);
    expect(cache.chars).toBe(8);
  });

  it('lets the least recently used texts go once the texts kept pass the budget', () => {
    const { cache, get } = numbered(30);
    keep(get, 'SELECT 1', 'SELECT 2', 'SELECT 3'); // 8 characters each
    get('SELECT 1'); // used again: now the most recent
    keep(get, 'SELECT 4'); // 32 characters: SELECT 2 goes
    expect(['SELECT 1', 'SELECT 2', 'SELECT 3', 'SELECT 4'].map((sql) => cache.has(sql))).toEqual([true, false, true, true]);
    expect(cache.chars).toBe(24);
  });

  it('never keeps a text longer than the budget, and leaves the rest alone', () => {
    const { cache, get } = numbered(10);
    keep(get, 'SELECT 1');
    const long = `SELECT ${'9'.repeat(20)}`;
    keep(get, long);
    expect(get(long)).toBe(5);
    expect(cache.has(long)).toBe(false);
    expect(cache.has('SELECT 1')).toBe(true);
  });

  it('holds no more than its budget however many texts pass through it, the last one kept', () => {
    const { cache, get } = numbered(1000);
    for (let i = 0; i < 500; i++) {
      const sql = `SELECT ${'x, '.repeat(i % 97)}${i}`;
      keep(get, sql);
      expect(cache.chars).toBeLessThanOrEqual(1000);
      expect(cache.has(sql)).toBe(true);
    }
  });

  it('forgets the texts used once all together when they pass the budget', () => {
    const { cache, get } = numbered(10);
    get('SELECT 1');
    get('SELECT 2'); // 16 characters seen: SELECT 1 is forgotten
    get('SELECT 1');
    expect(cache.has('SELECT 1')).toBe(false);
  });

  it('counts a text that is kept out of those used once', () => {
    const { cache, get } = numbered(16);
    keep(get, 'SELECT A'); // no longer among those used once
    get('SELECT B');
    get('SELECT C'); // 16 characters seen, not 24: SELECT B is remembered
    get('SELECT B');
    expect(cache.has('SELECT B')).toBe(true);
  });

  it('keeps a text it let go again at its next use', () => {
    const { cache, get } = numbered(16);
    keep(get, 'SELECT 1', 'SELECT 2', 'SELECT 3'); // SELECT 1 goes
    expect(cache.has('SELECT 1')).toBe(false);
    const again = get('SELECT 1');
    expect(cache.has('SELECT 1')).toBe(true);
    expect(get('SELECT 1')).toBe(again);
  });
});

describe.skipIf(testDatabaseUrl())('the statements a SQLite connection keeps', () => {
  let testDb: TestDb;
  let db: Db;

  beforeAll(async () => {
    testDb = await createTestDb();
    db = testDb.db;
    await db.schema.createTable('sc_items', (table) => {
      table.string('id').primary();
      for (const column of ['a', 'b', 'c', 'd', 'e', 'f', 'g', 'h', 'i', 'j']) table.string(column);
    });
  });
  afterAll(async () => {
    await testDb?.close();
  });

  /** Runs `work` on the transaction's connection, recording the texts it prepares. */
  async function preparedBy(work: (trx: Knex.Transaction) => Promise<unknown>): Promise<string[]> {
    const texts: string[] = [];
    await db.transaction(async (trx) => {
      const connection = (await trx.client.acquireConnection()) as { prepare(sql: string): unknown };
      const prepare = connection.prepare;
      connection.prepare = (sql: string) => {
        texts.push(sql);
        return prepare(sql);
      };
      try {
        await work(trx);
      } finally {
        connection.prepare = prepare;
      }
    });
    return texts;
  }

  const row = (id: string) => ({ id, a: 'x'.repeat(20), b: 'x'.repeat(20), c: null, d: 'd', e: 'e', f: 'f', g: 'g', h: 'h', i: 'i', j: 'j' });

  it('keeps none of the texts of inserts of 1 to 300 rows made once, and keeps one made again', async () => {
    let connection!: object;
    const texts = await preparedBy(async (trx) => {
      connection = await trx.client.acquireConnection();
      for (let count = 1; count <= 300; count++) {
        await insertRows(trx, 'sc_items', Array.from({ length: count }, (_, i) => row(`r${count}-${i}`)));
      }
      await insertRows(trx, 'sc_items', Array.from({ length: 300 }, (_, i) => row(`again-${i}`)));
    });
    const inserts = texts.filter((sql) => sql.startsWith('INSERT INTO "sc_items"'));
    expect(inserts).toHaveLength(301);
    const cache = statementCacheOf(connection)!;
    expect(inserts.slice(0, 299).filter((sql) => cache.has(sql))).toEqual([]);
    expect(cache.has(inserts[300])).toBe(true);
    expect(await db('sc_items').count({ n: '*' })).toEqual([{ n: (300 * 301) / 2 + 300 }]);
    expect(await db('sc_items').where({ id: 'r300-299' }).first()).toEqual(row('r300-299'));
  });

  it('reads IN lists of 1 to 300 values, each matching exactly the values listed, keeping none of the texts used once', async () => {
    let connection!: object;
    const texts = await preparedBy(async (trx) => {
      connection = await trx.client.acquireConnection();
      for (let count = 1; count <= 300; count++) {
        const ids = Array.from({ length: count }, (_, i) => `r300-${i}`);
        const list = inList(trx, 'id', ids);
        const rows = await selectRows<{ id: string }>(trx, `SELECT id FROM sc_items WHERE ${list.sql}`, list.bindings);
        expect(rows.map((found) => found.id).sort()).toEqual([...ids].sort());
      }
    });
    expect(new Set(texts).size).toBe(300);
    expect(texts.filter((sql) => statementCacheOf(connection)!.has(sql))).toEqual([]);
  });

  it('keeps no more text than its budget however many long texts pass through it, the last used among them', async () => {
    const connection = (await db.client.acquireConnection()) as { prepare(sql: string): unknown };
    try {
      // About 3,000 characters each: a hundred of them are past the budget.
      const texts = Array.from({ length: 100 }, (_, i) => `SELECT ${i} WHERE ? IN (${Array(1000).fill('?').join(', ')})`);
      for (const sql of texts) connection.prepare(sql), connection.prepare(sql);
      const cache = statementCacheOf(connection)!;
      expect(cache.chars).toBeLessThanOrEqual(STATEMENT_CACHE_CHARS);
      expect(cache.has(texts[0])).toBe(false);
      expect(cache.has(texts[99])).toBe(true);
      expect(connection.prepare(texts[99])).toBe(connection.prepare(texts[99]));
    } finally {
      await db.client.releaseConnection(connection);
    }
  });
});
