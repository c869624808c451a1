// SQLite writers (db/sqlite.ts): a transaction begins as a writer (BEGIN IMMEDIATE), and while
// another process holds the file's write lock it waits on a timer, not in SQLite's busy handler,
// which sleeps on the event loop: an API process beside a busy worker would stop answering.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { createDb, type Db } from '../../src/db/knex.js';
import { testDatabaseUrl } from '../helpers/db.js';

const opened: Array<{ db: Db; other: Database.Database; dir: string }> = [];
afterEach(async () => {
  for (const { db, other, dir } of opened.splice(0)) {
    if (other.inTransaction) other.exec('ROLLBACK');
    other.close();
    await db.destroy();
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

/** A database with a table, and a second connection to its file, as another process has. */
async function databaseAndAnotherWriter(): Promise<{ db: Db; other: Database.Database }> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'herald-writers-'));
  const file = path.join(dir, 'herald.db');
  const db = createDb(`sqlite:${file}`);
  await db.schema.createTable('w_rows', (table) => {
    table.increments('id');
    table.text('body').notNullable();
  });
  const other = new Database(file);
  opened.push({ db, other, dir });
  return { db, other };
}

describe.runIf(!testDatabaseUrl())('SQLite writers', () => {
  it('wait for another connection’s write lock with the event loop free, then commit', async () => {
    const { db, other } = await databaseAndAnotherWriter();
    other.exec('BEGIN IMMEDIATE');
    other.prepare('INSERT INTO w_rows (body) VALUES (?)').run('theirs');

    // The longest the event loop went without running a timer meanwhile.
    let last = performance.now();
    let longestGapMs = 0;
    const ticking = setInterval(() => {
      longestGapMs = Math.max(longestGapMs, performance.now() - last);
      last = performance.now();
    }, 5);
    const ours = db.transaction((trx) => trx('w_rows').insert({ body: 'ours' }));
    // The other writer lets go after 200 ms, on a timer that a blocked event loop could not run
    // (SQLite's busy handler would sleep through its whole 5 s and fail).
    await new Promise((resolve) => setTimeout(resolve, 200));
    other.exec('COMMIT');
    await ours;
    clearInterval(ticking);

    expect(longestGapMs).toBeLessThan(1000);
    expect(await db('w_rows').orderBy('id').pluck('body')).toEqual(['theirs', 'ours']);
  });

  it('give the connection its busy timeout back after waiting on a timer', async () => {
    const { db, other } = await databaseAndAnotherWriter();
    other.exec('BEGIN IMMEDIATE');
    const busy = db.transaction((trx) => trx('w_rows').insert({ body: 'waits' }));
    await new Promise((resolve) => setTimeout(resolve, 50));
    other.exec('ROLLBACK');
    await busy;
    // After the wait on a timer, the writing connection's own busy timeout is back.
    expect(await db.raw('PRAGMA busy_timeout')).toEqual([{ timeout: 5000 }]);
  });
});
