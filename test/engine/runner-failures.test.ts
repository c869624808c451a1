// The job runner while its database fails every query: each loop logs the run of failures once,
// not once a try, backs off, says when it works again, and stops at once meanwhile.
import { Writable } from 'node:stream';
import { afterEach, describe, expect, it } from 'vitest';
import { JobRunner } from '../../src/engine/runner.js';
import { loadConfig } from '../../src/config.js';
import { createLogger } from '../../src/logger.js';
import { systemClock } from '../../src/clock.js';
import { createTestDb, type TestDb } from '../helpers/db.js';

let testDb: TestDb | undefined;
afterEach(async () => {
  await testDb?.close();
  testDb = undefined;
});

/** A logger whose lines the test reads. */
function loggedLines() {
  const lines: Array<{ level: number; msg: string; lane?: string; failures?: number }> = [];
  const logger = createLogger('info', new Writable({ write: (chunk, _encoding, done) => done(void lines.push(JSON.parse(String(chunk)))) }));
  return { lines, logger };
}

describe('a job runner whose database fails', () => {
  it('logs each loop’s failures once, and once more when it works again', { timeout: 30_000 }, async () => {
    testDb = await createTestDb();
    const { db } = testDb;
    const { lines, logger } = loggedLines();
    const runner = new JobRunner({ db, clock: systemClock, config: loadConfig({}), logger }, { maxIdleMs: 20 });
    runner.start();
    try {
      // Every claim and every look for due work reads the jobs table: without it, every try fails.
      await db.raw('ALTER TABLE jobs RENAME TO jobs_away');
      await new Promise((resolve) => setTimeout(resolve, 1_500));
      const failed = lines.filter((line) => line.level === 50);
      // One line a loop (in-app, control, sends), where each failure was one: a try every 20 ms is 75 in 1.5 s.
      expect(failed.map((line) => `${line.msg} ${line.lane ?? ''}`.trim()).sort()).toEqual([
        'job runner: claiming sends failed',
        'job runner: local work failed control',
        'job runner: local work failed in_app',
      ]);

      await db.raw('ALTER TABLE jobs_away RENAME TO jobs');
      const again = () => lines.filter((line) => line.level === 30 && line.msg.endsWith('it works again'));
      await expect.poll(() => again().length, { timeout: 10_000 }).toBe(3);
      // Backing off, each loop tried fewer times than it would have at one try every 20 ms.
      for (const line of again()) expect(line.failures).toBeLessThan(1_500 / 20 / 2);
    } finally {
      await runner.stop();
    }
  });

  it('stops at once while it waits to try again', { timeout: 30_000 }, async () => {
    testDb = await createTestDb();
    const { db } = testDb;
    const runner = new JobRunner({ db, clock: systemClock, config: loadConfig({}), logger: loggedLines().logger }, { maxIdleMs: 20 });
    runner.start();
    await db.raw('ALTER TABLE jobs RENAME TO jobs_away');
    // Failing for 3 s, each loop now waits over 2 s before its next try.
    await new Promise((resolve) => setTimeout(resolve, 3_000));
    const asked = Date.now();
    await runner.stop();
    expect(Date.now() - asked).toBeLessThan(1_000);
    await db.raw('ALTER TABLE jobs_away RENAME TO jobs');
  });
});
