// How a SQLite commit reaches the disk: by default each acknowledged commit is synced (FULL), as
// the README promises; HERALD_SQLITE_SYNCHRONOUS=normal trades that for fewer syncs.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { createDb } from '../../src/db/knex.js';
import { loadConfig } from '../../src/config.js';

/** PRAGMA synchronous on the writing connection: 1 is NORMAL, 2 is FULL. */
async function synchronousOf(options: Parameters<typeof createDb>[1]): Promise<number> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'herald-durability-'));
  const db = createDb(`sqlite:${path.join(dir, 'herald.db')}`, options);
  try {
    const [row] = (await db.raw('PRAGMA synchronous')) as Array<{ synchronous: number }>;
    return row.synchronous;
  } finally {
    await db.destroy();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

describe.runIf(process.env.HERALD_TEST_DB === 'sqlite')('SQLite durability', () => {
  it('syncs every commit by default, and only at checkpoints when asked', async () => {
    expect(await synchronousOf({})).toBe(2);
    expect(await synchronousOf({ synchronous: loadConfig({}).sqliteSynchronous })).toBe(2);
    expect(await synchronousOf({ synchronous: loadConfig({ HERALD_SQLITE_SYNCHRONOUS: 'NORMAL' }).sqliteSynchronous })).toBe(1);
  });

  it('refuses any other setting at start', () => {
    expect(() => loadConfig({ HERALD_SQLITE_SYNCHRONOUS: 'off' })).toThrow('HERALD_SQLITE_SYNCHRONOUS must be full or normal, not "off"');
  });
});
