// selectRows and selectBuiltPage: the same rows as knex reads, on either database. On SQLite, outside a
// transaction, they run on the read connection, whose statements are kept and whose rows are read
// as arrays and named from each statement's columns (knex.ts, readRows).
import { beforeAll, describe, expect, it } from 'vitest';
import { selectBuiltPage, selectRows, type Db } from '../../src/db/knex.js';
import { testDatabaseUrl, useTestDb } from '../helpers/db.js';
import { createOrganization } from '../../src/db/repos/accounts.js';
import { listSubscribers, insertSubscriber } from '../../src/db/repos/subscribers.js';

let db: Db;
const database = useTestDb({
  tables: async (db) => {
    await db.schema.createTable('sr_items', (table) => {
      table.string('id').primary();
      table.string('name');
      table.integer('rank');
      table.float('score');
      table.boolean('active');
      table.bigInteger('at_ms');
    });
    await db('sr_items').insert([
      { id: 'a', name: 'Ann', rank: 1, score: 1.5, active: true, at_ms: 1000 },
      { id: 'b', name: null, rank: 2, score: null, active: false, at_ms: 2000 },
    ]);
  },
});
beforeAll(() => {
  db = database.db;
});

describe('selectRows and selectBuiltPage', () => {
  it('read the rows knex reads: every column by name, nulls, numbers, aliases', async () => {
    const columns = ['i.id', 'i.name', 'i.rank', 'i.score', 'i.active', 'i.at_ms'];
    const built = (select: unknown[]) => db('sr_items as i').select(select).whereIn('i.id', ['a', 'b']).orderBy('i.id');
    const expected = await built([...columns, db.raw('i.rank * 2 AS doubled')]);
    expect(expected).toHaveLength(2);
    expect(expected[0]).toMatchObject({ id: 'a', name: 'Ann', rank: 1, score: 1.5, doubled: 2 });
    // Columns named in the text (read as arrays and named once on SQLite), and every column.
    for (const select of [`${columns.join(', ')}, i.rank * 2 AS doubled`, 'i.*, i.rank * 2 AS doubled']) {
      const sql = `SELECT ${select} FROM sr_items i WHERE i.id IN (?, ?) ORDER BY i.id`;
      expect(await selectRows(db, sql, ['a', 'b'])).toEqual(expected);
      // Read again, with its names kept.
      expect(await selectRows(db, sql, ['a', 'b'])).toEqual(expected);
      expect(await selectRows(db, sql, ['none', 'nobody'])).toEqual([]);
    }
    expect(await selectBuiltPage(built([...columns, db.raw('i.rank * 2 AS doubled')]))).toEqual(expected);
    expect(await selectBuiltPage(built(['i.*', db.raw('i.rank * 2 AS doubled')]))).toEqual(expected);
  });

  it('bind a boolean as knex does', async () => {
    expect(await selectBuiltPage(db('sr_items').select('id').where('active', true))).toEqual([{ id: 'a' }]);
    expect(await selectBuiltPage(db('sr_items').select('id').where('active', false))).toEqual([{ id: 'b' }]);
  });

  it.runIf(!testDatabaseUrl())('bind a date as knex does on SQLite: its milliseconds', async () => {
    const query = () => db('sr_items').select('id').where('at_ms', '<', new Date(1500));
    expect(await query()).toEqual([{ id: 'a' }]);
    expect(await selectBuiltPage(query())).toEqual([{ id: 'a' }]);
  });

  it.runIf(!testDatabaseUrl())('name two columns of one name as better-sqlite3 does: the last wins', async () => {
    const sql = 'SELECT id AS x, name AS x FROM sr_items WHERE id = ?';
    expect(await selectRows(db, sql, ['a'])).toEqual(await db.raw(sql, ['a']));
    expect(await selectRows(db, sql, ['a'])).toEqual([{ x: 'Ann' }]);
  });

  it('read a kept statement that reads every column after a column is added and one renamed', async () => {
    const sql = 'SELECT * FROM sr_changing WHERE id = ?';
    await db.schema.createTable('sr_changing', (table) => {
      table.string('id').primary();
      table.integer('a');
    });
    await db('sr_changing').insert({ id: 'x', a: 1 });
    expect(await selectRows(db, sql, ['x'])).toEqual([{ id: 'x', a: 1 }]);
    await db.raw('ALTER TABLE sr_changing ADD COLUMN b integer DEFAULT 2');
    expect(await selectRows(db, sql, ['x'])).toEqual([{ id: 'x', a: 1, b: 2 }]);
    // A qualified star, as knex quotes it.
    const built = () => db('sr_changing as t').select('t.*').where('t.id', 'x');
    expect(await selectBuiltPage(built())).toEqual([{ id: 'x', a: 1, b: 2 }]);
    await db.raw('ALTER TABLE sr_changing RENAME COLUMN b TO c');
    expect(await selectRows(db, sql, ['x'])).toEqual([{ id: 'x', a: 1, c: 2 }]);
    expect(await selectBuiltPage(built())).toEqual([{ id: 'x', a: 1, c: 2 }]);
    await db.schema.dropTable('sr_changing');
  });

  it('know a star however the text is written, and follow a column dropped under it', async () => {
    await db.schema.createTable('sr_dropping', (table) => {
      table.string('id').primary();
      table.integer('a');
      table.integer('b');
      table.integer('c');
    });
    await db('sr_dropping').insert({ id: 'x', a: 1, b: 2, c: 3 });
    const texts = ['SELECT id,t.* FROM sr_dropping t WHERE id = ?', 'SELECT id, "t".* FROM sr_dropping t WHERE id = ?'];
    for (const sql of texts) expect(await selectRows(db, sql, ['x'])).toEqual([{ id: 'x', a: 1, b: 2, c: 3 }]);
    await db.raw('ALTER TABLE sr_dropping DROP COLUMN a');
    for (const sql of texts) expect(await selectRows(db, sql, ['x'])).toEqual([{ id: 'x', b: 2, c: 3 }]);
    await db.schema.dropTable('sr_dropping');
  });

  it("leave to knex a builder made in a transaction, which sees the transaction's writes, and one whose answer knex shapes", async () => {
    const ids = async (query: ReturnType<typeof db>) => (await selectBuiltPage<{ id: string }>(query)).map((row) => row.id);
    let seenInTransaction: string[][] = [];
    await db.transaction(async (trx) => {
      await trx('sr_items').insert({ id: 'c', name: 'Uncommitted' });
      seenInTransaction = [await ids(trx('sr_items').select('id').orderBy('id')), await ids(db('sr_items').select('id').orderBy('id').transacting(trx))];
      await trx.rollback();
    }).catch(() => undefined);
    expect(seenInTransaction).toEqual([['a', 'b', 'c'], ['a', 'b', 'c']]);
    expect(await ids(db('sr_items').select('id').orderBy('id'))).toEqual(['a', 'b']);
    expect(await selectBuiltPage(db('sr_items').where('id', 'a').first('name'))).toEqual({ name: 'Ann' });
    expect(await selectBuiltPage(db('sr_items').orderBy('id').pluck('id'))).toEqual(['a', 'b']);
  });

  it('fail, as knex would, once a column a statement names is renamed, rather than answer under the old name', async () => {
    const sql = 'SELECT id, a FROM sr_renamed WHERE id = ?';
    await db.schema.createTable('sr_renamed', (table) => {
      table.string('id').primary();
      table.integer('a');
    });
    await db('sr_renamed').insert({ id: 'x', a: 1 });
    expect(await selectRows(db, sql, ['x'])).toEqual([{ id: 'x', a: 1 }]);
    await db.raw('ALTER TABLE sr_renamed RENAME COLUMN a TO c');
    await expect(db.raw(sql, ['x'])).rejects.toThrow(/column/);
    await expect(selectRows(db, sql, ['x'])).rejects.toThrow(/column/);
    await db.schema.dropTable('sr_renamed');
  });
});

describe.runIf(!testDatabaseUrl())('a page of a list on SQLite', () => {
  it('is read while a transaction holds the writing connection, and sees what is committed', async () => {
    const now = new Date();
    const { environmentIds } = await createOrganization(db, { name: 'Pages', plan: 'free', environments: ['development'] });
    const environmentId = environmentIds.development;
    await insertSubscriber(db, environmentId, { subscriberId: 'committed' }, now);
    let releaseWriter!: () => void;
    const writerHeld = new Promise<void>((resolve) => (releaseWriter = resolve));
    let writerOpen!: () => void;
    const opened = new Promise<void>((resolve) => (writerOpen = resolve));
    const writer = db.transaction(async (trx) => {
      await insertSubscriber(trx as unknown as Db, environmentId, { subscriberId: 'uncommitted' }, now);
      writerOpen();
      await writerHeld;
    });
    await opened;
    try {
      // knex's only SQLite connection is the transaction's until it ends: a page read through knex
      // would wait for it.
      const page = await Promise.race([
        listSubscribers(db, environmentId, { page: 0, limit: 10 }),
        new Promise<never>((_, reject) => setTimeout(() => reject(new Error('the page waited for the writer')), 2000)),
      ]);
      expect(page.data.map((subscriber) => subscriber.subscriberId)).toEqual(['committed']);
      expect(page.totalCount).toBe(1);
    } finally {
      releaseWriter();
      await writer;
    }
    expect((await listSubscribers(db, environmentId, { page: 0, limit: 10 })).totalCount).toBe(2);
  });
});
