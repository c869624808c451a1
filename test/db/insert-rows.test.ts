// insertRows and insertAll: many rows in few statements, on SQLite (a VALUES list run on the
// transaction's own connection, or through knex outside one) and PostgreSQL (one JSON parameter).
// Values come back as they went in, a column a row lacks is NULL, conflicts can be skipped, and
// more rows than one statement can bind are split across statements.
import { beforeAll, describe, expect, it } from 'vitest';
import type { Db } from '../../src/db/knex.js';
import { insertAll, insertRows } from '../../src/db/insert-rows.js';
import { useTestDb } from '../helpers/db.js';

let db: Db;
const database = useTestDb({
  tables: async (db) => {
    await db.schema.createTable('ir_items', (table) => {
      table.string('id').primary();
      table.string('name');
      table.integer('size');
      table.boolean('flag');
      table.text('note');
    });
    await db.schema.createTable('ir_parts', (table) => {
      table.string('id').primary();
      table.string('item_id').notNullable().references('ir_items.id');
    });
  },
});
beforeAll(() => {
  db = database.db;
});

interface Item {
  id: string;
  name: string | null;
  size: number | null;
  flag: boolean | number | null;
  note: string | null;
}

/** The items whose id starts with `prefix`; SQLite's 0/1 flags read as booleans. */
const stored = async (prefix: string) =>
  (await db<Item>('ir_items').where('id', 'like', `${prefix}%`).orderBy('id')).map((row) => ({ ...row, flag: row.flag === null ? null : Boolean(row.flag) }));

describe('insertRows', () => {
  it('stores each value as given, in a transaction and outside one, with a missing column as NULL', async () => {
    const rows = [
      { id: 'a1', name: 'first', size: 3, flag: true, note: 'x' },
      { id: 'a2', name: 'second', size: 0, flag: false, note: null },
      { id: 'a3', name: 'third', size: 7, flag: false },
    ];
    await db.transaction((trx) => insertRows(trx, 'ir_items', rows.slice(0, 2)));
    await insertRows(db, 'ir_items', rows.slice(2));
    expect(await stored('a')).toEqual([
      { id: 'a1', name: 'first', size: 3, flag: true, note: 'x' },
      { id: 'a2', name: 'second', size: 0, flag: false, note: null },
      { id: 'a3', name: 'third', size: 7, flag: false, note: null },
    ]);
  });

  it('skips rows that break the unique key and returns only the rows it inserted', async () => {
    await insertRows(db, 'ir_items', [{ id: 'b1', name: 'kept' }]);
    const returned = await db.transaction((trx) =>
      insertRows<{ id: string; name: string }>(trx, 'ir_items', [{ id: 'b1', name: 'again' }, { id: 'b2', name: 'new' }], { skipConflictsOn: ['id'], returning: ['id', 'name'] }),
    );
    expect(returned).toEqual([{ id: 'b2', name: 'new' }]);
    expect((await stored('b')).map((row) => row.name)).toEqual(['kept', 'new']);
  });

  it('splits more rows than one statement can bind across several', async () => {
    const rows = Array.from({ length: 7_000 }, (_, i) => ({ id: `c${String(i).padStart(5, '0')}`, name: `n${i}`, size: i, flag: i % 2 === 0, note: 'y' }));
    await db.transaction((trx) => insertRows(trx, 'ir_items', rows));
    const back = await stored('c');
    expect(back).toHaveLength(7_000);
    expect(back[6_999]).toEqual({ id: 'c06999', name: 'n6999', size: 6999, flag: false, note: 'y' });
  });

  it('fails the whole statement on a bad row, leaving nothing of it', async () => {
    await expect(db.transaction((trx) => insertRows(trx, 'ir_parts', [{ id: 'p1', item_id: 'a1' }, { id: 'p2', item_id: 'nobody' }]))).rejects.toThrow();
    expect(await db('ir_parts').select('id')).toEqual([]);
  });
});

describe('insertAll', () => {
  it('writes parents before children, all or none', async () => {
    await insertAll(db, [
      { table: 'ir_items', rows: [{ id: 'd1', name: 'parent' }] },
      { table: 'ir_parts', rows: [{ id: 'd1-part', item_id: 'd1' }] },
    ]);
    expect(await db('ir_parts').where({ id: 'd1-part' }).first('item_id')).toEqual({ item_id: 'd1' });

    await expect(
      insertAll(db, [
        { table: 'ir_items', rows: [{ id: 'd2', name: 'parent' }] },
        { table: 'ir_parts', rows: [{ id: 'd2-part', item_id: 'nobody' }] },
      ]),
    ).rejects.toThrow();
    expect(await stored('d2')).toEqual([]);
  });
});
