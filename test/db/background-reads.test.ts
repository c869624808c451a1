// Reads that scan whole tables (GET /notifications/stats) leave the event
// loop free: on a SQLite file they run on a thread of their own (background-reader.ts), and on
// PostgreSQL the server scans. Either way they read what selectRows reads.
import { beforeAll, describe, expect, it } from 'vitest';
import { selectBuiltPage, selectPage, selectRows, selectRowsInBackground, type Db } from '../../src/db/knex.js';
import { BackgroundReader } from '../../src/db/background-reader.js';
import { SLICE_CHARS } from '../../src/db/chunks.js';
import { countTurns } from '../helpers/turns.js';
import { testDatabaseUrl, useTestDb } from '../helpers/db.js';

let db: Db;
const database = useTestDb({
  tables: async (db) => {
    await db.schema.createTable('br_items', (table) => {
      table.string('id').primary();
      table.string('kind');
    });
  },
  // Written again before each test: no test sees another's changes.
  rows: async (db) => {
    await db('br_items').insert(['a', 'b', 'c', 'd', 'e'].map((id, i) => ({ id, kind: i % 2 ? 'odd' : 'even' })));
  },
  emptied: ['br_items'],
});
beforeAll(() => {
  db = database.db;
});

const BY_KIND = 'SELECT kind, count(*) AS n FROM br_items WHERE id <> ? GROUP BY kind ORDER BY kind';

describe('selectRowsInBackground', () => {
  it('reads what selectRows reads, committed writes included', async () => {
    expect(await selectRowsInBackground(db, BY_KIND, ['e'])).toEqual([{ kind: 'even', n: 2 }, { kind: 'odd', n: 2 }]);
    await db('br_items').insert({ id: 'f', kind: 'odd' });
    const rows = await selectRowsInBackground<{ kind: string; n: number }>(db, BY_KIND, ['e']);
    expect(rows).toEqual(await selectRows(db, BY_KIND, ['e']));
    expect(rows).toEqual([{ kind: 'even', n: 2 }, { kind: 'odd', n: 3 }]);
  });

  it('names the statement when it fails', async () => {
    await expect(selectRowsInBackground(db, 'SELECT nope FROM br_items', [])).rejects.toThrow(/SELECT nope FROM br_items/);
  });

  it.runIf(!testDatabaseUrl())('lets the event loop turn while SQLite reads', async () => {
    // better-sqlite3 reads on the thread that calls it: run there, a read would be over before
    // the next turn of the event loop. A million rows made by a recursive query, counted.
    const MILLION = 'WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?) SELECT count(*) AS n FROM n';
    const turns = countTurns();
    const rows = await selectRowsInBackground(db, MILLION, [1_000_000]);
    expect(turns.stop()).toBeGreaterThan(0);
    expect(rows).toEqual([{ n: 1_000_000 }]);
  });
});

describe('selectPage and selectBuiltPage', () => {
  // 40 rows of 120,000 characters: more than a slice, read on the background reader's thread on SQLite.
  const LARGE = 'WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?) SELECT i, kind, ? AS text FROM n JOIN br_items ON br_items.id = ? ORDER BY i';
  const largeBindings = [40, 'y'.repeat(120_000), 'a'];

  it('answers a small page as selectRows does', async () => {
    const sql = 'SELECT id, kind FROM br_items WHERE id <> ? ORDER BY id LIMIT 3';
    expect(await selectPage(db, sql, ['a'])).toEqual(await selectRows(db, sql, ['a']));
    const built = db('br_items').select('id', 'kind').whereNot('id', 'a').orderBy('id').limit(3);
    expect(await selectBuiltPage(built.clone())).toEqual(await built);
  });

  it('answers a large page as selectRows does, off the event loop on SQLite', async () => {
    const turns = countTurns();
    const rows = await selectPage<{ i: number; kind: string; text: string }>(db, LARGE, largeBindings);
    const turned = turns.stop();
    expect(rows).toEqual(await selectRows(db, LARGE, largeBindings));
    expect(rows.map((row) => row.i)).toEqual(Array.from({ length: 40 }, (_, i) => i + 1));
    expect(40 * 120_000).toBeGreaterThan(SLICE_CHARS);
    // Read where it was asked, the page would be over before the event loop's next turn.
    if (!testDatabaseUrl()) expect(turned).toBeGreaterThan(0);
  });

  it('answers a large built page as the plain query does', async () => {
    const built = () => db('br_items').select('id', db.raw('? AS text', ['z'.repeat(400_000)])).orderBy('id');
    expect(await selectBuiltPage(built())).toEqual(await built());
  });
});

describe.runIf(!testDatabaseUrl())('BackgroundReader', () => {
  it('starts a new thread for a read after it was closed, and fails reads of a file it cannot open', async () => {
    const reader = new BackgroundReader(database.testDb.url.replace(/^sqlite:/, ''));
    expect(await reader.read('SELECT count(*) AS n FROM br_items', [])).toEqual([{ n: 5 }]);
    await reader.close();
    expect(await reader.read('SELECT count(*) AS n FROM br_items', [])).toEqual([{ n: 5 }]);
    await reader.close();

    const missing = new BackgroundReader('/nonexistent/herald.db');
    await expect(missing.read('SELECT 1', [])).rejects.toThrow(/SELECT 1 - /);
  });

  it('answers a large read whole and in order, a slice at a time, answering a small read between its slices', async () => {
    const reader = new BackgroundReader(database.testDb.url.replace(/^sqlite:/, ''));
    // 40 rows of 120,000 characters: several slices of SLICE_CHARS.
    const LARGE = 'WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?) SELECT i, hex(zeroblob(60000)) AS text FROM n';
    const answered: string[] = [];
    const large = reader.read<{ i: number; text: string }>(LARGE, [40]).then((rows) => (answered.push('large'), rows));
    const small = reader.read('SELECT count(*) AS n FROM br_items', []).then((rows) => (answered.push('small'), rows));
    const [rows, counted] = await Promise.all([large, small]);
    expect(rows.map((row) => row.i)).toEqual(Array.from({ length: 40 }, (_, i) => i + 1));
    expect(rows.every((row) => row.text.length === 120_000 && /^0+$/.test(row.text))).toBe(true);
    expect(40 * 120_000).toBeGreaterThan(3 * SLICE_CHARS);
    expect(counted).toEqual([{ n: 5 }]);
    // Asked for after the large read, the small one is answered while the large one's slices are taken.
    expect(answered).toEqual(['small', 'large']);
    await reader.close();
  });
});
