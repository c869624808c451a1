// SQLite checkpoints on a thread of their own (db/checkpointer.ts): what a process that runs jobs
// commits reaches the database file without any commit doing the copying, and the thread ends with
// the database.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { createDb, type Db } from '../../src/db/knex.js';
import { BACKSTOP_PAGES, type LogReading } from '../../src/db/checkpointer.js';
import { startThread } from '../../src/db/threads.js';
import { testDatabaseUrl } from '../helpers/db.js';

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) fs.rmSync(dir, { recursive: true, force: true });
});

/** A fresh SQLite database with a table, and about 2 MB committed to its log: fewer pages than any commit checkpoints at. */
async function databaseWithCommittedRows(checkpointInBackground: boolean): Promise<{ db: Db; file: string }> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'herald-checkpoint-'));
  dirs.push(dir);
  const file = path.join(dir, 'herald.db');
  const db = createDb(`sqlite:${file}`, { checkpointInBackground });
  await db.schema.createTable('cp_rows', (table) => {
    table.increments('id');
    table.text('body').notNullable();
  });
  const body = 'x'.repeat(2000);
  await db.transaction(async (trx) => {
    for (let i = 0; i < 1000; i += 100) await trx('cp_rows').insert(Array.from({ length: 100 }, () => ({ body })));
  });
  return { db, file };
}

const size = (file: string) => fs.statSync(file).size;

describe.runIf(!testDatabaseUrl())('SQLite checkpoints in the background', () => {
  it('copies committed pages into the database file while no commit does', async () => {
    const { db, file } = await databaseWithCommittedRows(true);
    try {
      await expect.poll(() => size(file), { timeout: 5000, interval: 50 }).toBeGreaterThan(2_000_000);
      expect(await db('cp_rows').count({ n: '*' }).first()).toEqual({ n: 1000 });
    } finally {
      await db.destroy();
    }
  });

  it('leaves them in the log without the thread, below the commits’ own threshold', async () => {
    const { db, file } = await databaseWithCommittedRows(false);
    try {
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect(size(file)).toBeLessThan(200_000);
      expect(size(`${file}-wal`)).toBeGreaterThan(2_000_000);
    } finally {
      await db.destroy();
    }
  });

  it('is destroyed with the database while running, leaving every committed row in the file', async () => {
    const { db, file } = await databaseWithCommittedRows(true);
    await db.destroy();
    expect(size(file)).toBeGreaterThan(2_000_000);
    // Reopened without the thread, everything committed is there.
    const again = createDb(`sqlite:${file}`);
    try {
      expect(await again('cp_rows').count({ n: '*' }).first()).toEqual({ n: 1000 });
    } finally {
      await again.destroy();
    }
  });

  it('starts the log over under writes that never pause, long before the commits’ own checkpoint', async () => {
    const { db, file } = await databaseWithCommittedRows(true);
    try {
      // Each transaction about 25 pages, a millisecond apart: 12,000 pages in all, more than the
      // backstop. A copy that ends between two transactions is rare, so the log starts over because
      // a transaction waited for the copy to end (checkpointer.ts). The thread's reading of the log
      // comes every 100 ms, so the log may pass the wait's 2,000 pages by what 100 ms of writes add;
      // without the wait it reaches the backstop.
      const body = 'y'.repeat(2000);
      for (let i = 0; i < 480; i++) {
        await db.transaction((trx) => trx('cp_rows').insert(Array.from({ length: 50 }, () => ({ body }))));
        await new Promise((resolve) => setTimeout(resolve, 1));
      }
      expect(size(`${file}-wal`)).toBeLessThan(BACKSTOP_PAGES * 0.75 * 4096);
      expect(await db('cp_rows').count({ n: '*' }).first()).toEqual({ n: 1000 + 480 * 50 });
    } finally {
      await db.destroy();
    }
  }, 30_000);

  it('tells a reading once: the turn after a writer asked does not tell the same log again', async () => {
    // The writer that asked starts the log over at its next transaction. The same reading told again
    // by the thread's next turn, which may come before that transaction, made it wait once more.
    const { db, file } = await databaseWithCommittedRows(false);
    const thread = startThread(new URL('../../src/db/checkpointer-thread', import.meta.url), { workerData: { file, intervalMs: 300 } });
    const readings: Array<LogReading & { asked?: boolean }> = [];
    thread.on('message', (reading: LogReading & { asked?: boolean }) => readings.push(reading));
    try {
      await expect.poll(() => readings.length, { timeout: 5000, interval: 10 }).toBeGreaterThan(0);
      // Right after a turn: the next is 300 ms away.
      await db('cp_rows').insert(Array.from({ length: 100 }, () => ({ body: 'z'.repeat(2000) })));
      thread.postMessage('now');
      await expect.poll(() => readings.some((reading) => reading.asked), { timeout: 5000, interval: 5 }).toBe(true);
      const asked = readings.findIndex((reading) => reading.asked);
      // Two turns of the thread, with nothing written meanwhile.
      await new Promise((resolve) => setTimeout(resolve, 700));
      expect(readings.slice(asked + 1)).toEqual([]);
    } finally {
      thread.postMessage('stop');
      await new Promise((resolve) => thread.once('exit', resolve));
      await db.destroy();
    }
  });
});
