// changeRows: a plain-SQL UPDATE or DELETE on either database, outside a transaction or inside one
// (on SQLite the transaction's own connection, on PostgreSQL straight on its connection), answering
// how many rows it changed; inside a transaction the change is the transaction's, undone with it.
import { beforeAll, describe, expect, it } from 'vitest';
import { changeRows, type Db } from '../../src/db/knex.js';
import { useTestDb } from '../helpers/db.js';

let db: Db;
const database = useTestDb({
  tables: async (db) => {
    await db.schema.createTable('cr_items', (table) => {
      table.string('id').primary();
      table.string('status').notNullable();
    });
  },
  // Written again before each test: no test sees another's changes.
  rows: async (db) => {
    await db('cr_items').insert([
      { id: 'a', status: 'new' },
      { id: 'b', status: 'new' },
      { id: 'c', status: 'done' },
    ]);
  },
  emptied: ['cr_items'],
});
beforeAll(() => {
  db = database.db;
});

const statuses = async () => Object.fromEntries((await db('cr_items').orderBy('id')).map((row: { id: string; status: string }) => [row.id, row.status]));

describe('changeRows', () => {
  it('answers how many rows it changed, outside a transaction', async () => {
    expect(await changeRows(db, 'UPDATE cr_items SET status = ? WHERE status = ?', ['seen', 'new'])).toBe(2);
    expect(await changeRows(db, 'UPDATE cr_items SET status = ? WHERE id = ?', ['seen', 'nobody'])).toBe(0);
    expect(await statuses()).toEqual({ a: 'seen', b: 'seen', c: 'done' });
  });

  it('changes rows in the transaction it is given, kept when it commits', async () => {
    const changed = await db.transaction(async (trx) => {
      const count = await changeRows(trx, 'UPDATE cr_items SET status = ? WHERE id IN (?, ?)', ['kept', 'a', 'c']);
      // The transaction sees its own change before it commits.
      expect((await trx('cr_items').where({ status: 'kept' }).orderBy('id')).map((row: { id: string }) => row.id)).toEqual(['a', 'c']);
      return count;
    });
    expect(changed).toBe(2);
    expect(await statuses()).toEqual({ a: 'kept', b: 'new', c: 'kept' });
  });

  it('undoes its change with the transaction', async () => {
    await expect(
      db.transaction(async (trx) => {
        expect(await changeRows(trx, 'DELETE FROM cr_items WHERE id = ?', ['b'])).toBe(1);
        throw new Error('changed my mind');
      }),
    ).rejects.toThrow('changed my mind');
    expect(await statuses()).toEqual({ a: 'new', b: 'new', c: 'done' });
  });
});
