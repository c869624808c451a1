import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDb, processDatabaseUrl, testDatabaseUrl, type TestDb } from '../helpers/db.js';
import { startScript } from '../helpers/process.js';

// The server as a user starts it without HERALD_SECRET: on SQLite it makes a key file beside the
// database and says so once; on PostgreSQL it warns at every start that credentials are in clear.
let testDb: TestDb;
let env: Record<string, string>;
beforeAll(async () => {
  testDb = await createTestDb();
  env = { DATABASE_URL: processDatabaseUrl(testDb), PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'info', HERALD_SECRET: '' };
});
afterAll(async () => testDb?.close());

async function startOnce(): Promise<string> {
  const server = await startScript('src/main.ts', { env, ready: [/"msg":"Herald is listening"/] });
  server.child.kill('SIGTERM');
  expect(await server.exited).toBe(0);
  return server.output();
}

describe('npm start without HERALD_SECRET', () => {
  it.skipIf(testDatabaseUrl() !== undefined)('on SQLite: creates herald.key (mode 0600) beside the database once, and says so once', async () => {
    const keyFile = path.join(path.dirname(testDb.url.slice('sqlite:'.length)), 'herald.key');
    expect(fs.existsSync(keyFile)).toBe(false);
    const first = await startOnce();
    expect(first.match(/created a secret key file/g)).toHaveLength(1);
    expect(fs.statSync(keyFile).mode & 0o777).toBe(0o600);
    const key = fs.readFileSync(keyFile, 'utf8');
    const second = await startOnce();
    expect(second).not.toContain('created a secret key file');
    expect(fs.readFileSync(keyFile, 'utf8')).toBe(key);
  });

  it.skipIf(testDatabaseUrl() === undefined)('on PostgreSQL: warns at start that credentials are stored in clear', async () => {
    const output = await startOnce();
    expect(output).toMatch(/"level":40.*HERALD_SECRET is not set.*IN CLEAR/);
  });
});
