// SQLite: LIMIT and OFFSET are written into the statement's text instead of bound (sqlite.ts,
// inlineLimits), a patch of knex's query compiler. Whatever the builder asks, the rows must be the
// ones plain knex reads from the same file.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import knexFactory, { type Knex } from 'knex';
import { selectBuiltPage, type Db } from '../../src/db/knex.js';
import { testDatabaseUrl, useTestDb } from '../helpers/db.js';

let db: Db;
let plain: Knex;
const database = useTestDb({
  tables: async (db) => {
    await db.schema.createTable('il_ranked', (table) => {
      table.string('id').primary();
      table.integer('rank');
    });
    await db('il_ranked').insert(Array.from({ length: 12 }, (_, i) => ({ id: `r${String(i).padStart(2, '0')}`, rank: i % 5 })));
  },
});
beforeAll(() => {
  db = database.db;
  if (!testDatabaseUrl()) plain = knexFactory({ client: 'better-sqlite3', connection: { filename: database.testDb.url.replace(/^sqlite:/, '') }, useNullAsDefault: true });
});
afterAll(async () => plain?.destroy());

describe.skipIf(testDatabaseUrl())('inline LIMIT and OFFSET on SQLite', () => {
  const shapes: Array<[string, (q: Knex.QueryBuilder) => Knex.QueryBuilder]> = [
    ['a limit', (q) => q.limit(3)],
    ['an offset alone', (q) => q.offset(10)],
    ['a limit and an offset', (q) => q.limit(4).offset(5)],
    ['a limit of zero', (q) => q.limit(0)],
    ['an offset past the end', (q) => q.limit(5).offset(50)],
    ['a limit with a where and a bound value', (q) => q.where('rank', '>', 1).limit(2).offset(1)],
  ];

  it.each(shapes)('reads the rows plain knex reads for %s', async (_name, shape) => {
    const query = (k: Knex) => shape(k('il_ranked').select('id', 'rank').orderBy('id'));
    const expected = await query(plain);
    expect(await query(db)).toEqual(expected);
    expect(await selectBuiltPage(query(db))).toEqual(expected);
  });

  it('writes the numbers into the text, and binds every other value', () => {
    const { sql, bindings } = db('il_ranked').where('rank', '>', 1).limit(2).offset(1).toSQL();
    expect(sql).toMatch(/limit 2 offset 1/i);
    expect(bindings).toEqual([1]);
    expect(plain('il_ranked').where('rank', '>', 1).limit(2).offset(1).toSQL().bindings).toEqual([1, 2, 1]);
  });

  it('answers .first() as plain knex does', async () => {
    expect(await db('il_ranked').orderBy('id', 'desc').first('id')).toEqual(await plain('il_ranked').orderBy('id', 'desc').first('id'));
  });
});
