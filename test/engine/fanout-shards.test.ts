// The shards of a fan-out: together they hold every member once, whatever its id ends in.
import { beforeAll, describe, expect, it } from 'vitest';
import type { Db } from '../../src/db/knex.js';
import { isPostgres } from '../../src/db/knex.js';
import { fanoutShards, whereInShard } from '../../src/db/fanout-shards.js';
import { useTestDb } from '../helpers/db.js';

let db: Db;
const IDS = [...'0123456789abcdef', 'z', 'G', '-'].map((last, i) => `01a2${String(i).padStart(19, '0')}${last}`);

const database = useTestDb({
  tables: async (db) => {
    await db.schema.createTable('shard_members', (table) => table.string('id').primary());
    await db('shard_members').insert(IDS.map((id) => ({ id })));
  },
});
beforeAll(() => {
  db = database.db;
});

async function membersOf(shard: { index: number; of: number } | undefined): Promise<string[]> {
  const query = db('shard_members').select('id').orderBy('id');
  whereInShard(query, 'id', shard);
  return (await query).map((row: { id: string }) => row.id);
}

describe('fan-out shards', () => {
  it('split the members by the last digit of their id, and leave none out', async () => {
    for (const of of [2, 3]) {
      const shards = await Promise.all(Array.from({ length: of }, (_, index) => membersOf({ index, of })));
      expect(shards.flat().sort(), `${of} shards`).toEqual([...IDS].sort());
      expect(new Set(shards.flat()).size, `${of} shards`).toBe(IDS.length);
      // Each shard but the first holds only ids ending in its own hex digits.
      for (const [index, ids] of shards.entries()) {
        if (index > 0) for (const id of ids) expect(parseInt(id.at(-1)!, 16) % of).toBe(index);
      }
    }
    expect((await membersOf(undefined)).sort()).toEqual([...IDS].sort());
  });

  it('are two on PostgreSQL and one (all members) on SQLite', () => {
    expect(fanoutShards(db)).toEqual(isPostgres(db) ? [{ index: 0, of: 2 }, { index: 1, of: 2 }] : [undefined]);
  });
});
