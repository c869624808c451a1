// inList: `column IN (…)` for a list of values. SQLite gets a placeholder a value; PostgreSQL one
// JSON parameter, so that one text serves every length.
import { beforeAll, describe, expect, it } from 'vitest';
import { inList, selectRows, type Db } from '../../src/db/knex.js';
import { insertRows } from '../../src/db/insert-rows.js';
import { testDatabaseUrl, useTestDb } from '../helpers/db.js';
import { recordQueries } from '../helpers/queries.js';

let db: Db;

const ODD_VALUES = ["it's", 'a "quoted" one', 'back\\slash', 'ünïcødé ✓', '[1,2]', ''];
const MANY = Array.from({ length: 500 }, (_, i) => `v${String(i).padStart(3, '0')}`);

const database = useTestDb({
  tables: async (db) => {
    await db.schema.createTable('il_items', (table) => {
      table.string('id').primary();
    });
    await insertRows(db, 'il_items', [...ODD_VALUES, ...MANY].map((id) => ({ id })));
  },
});
beforeAll(() => {
  db = database.db;
});

const idsIn = async (values: string[]) => {
  const list = inList(db, 'id', values);
  const rows = await selectRows<{ id: string }>(db, `SELECT id FROM il_items WHERE ${list.sql}`, list.bindings);
  return rows.map((row) => row.id).sort();
};

describe('inList', () => {
  it('matches exactly the values listed, whatever characters they hold', async () => {
    expect(await idsIn([...ODD_VALUES, 'not there'])).toEqual([...ODD_VALUES].sort());
    expect(await idsIn(["it's"])).toEqual(["it's"]);
    expect(await idsIn([])).toEqual([]);
  });

  it('reads hundreds of values at once', async () => {
    expect(await idsIn(MANY)).toEqual(MANY);
  });

  it('reads a list of 20,000 values, each bound once', async () => {
    const values = [...MANY, ...Array.from({ length: 19_500 }, (_, i) => `absent-${i}`)];
    expect(await idsIn(values)).toEqual(MANY);
    if (!testDatabaseUrl()) expect(inList(db, 'id', values).bindings).toHaveLength(20_000);
  });

  it.runIf(testDatabaseUrl())('is one text on PostgreSQL, whatever the length', async () => {
    const recording = recordQueries(db, /FROM il_items/);
    await idsIn(['v001']);
    await idsIn(MANY);
    const statements = recording.stop();
    expect(statements).toHaveLength(2);
    expect(statements[0].sql).toBe(statements[1].sql);
  });
});

