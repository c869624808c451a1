import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, beforeEach } from 'vitest';
import { createDb, isPostgresUrl, migrate, type Db } from '../../src/db/knex.js';

/** Which database this test run uses: the vitest project sets HERALD_TEST_DB. */
export function testDatabaseUrl(): string | undefined {
  const url = process.env.HERALD_TEST_DB;
  return url && isPostgresUrl(url) ? url : undefined;
}

export interface TestDb {
  db: Db;
  /** A URL another process can open to reach the same data (with `schema` on PostgreSQL). */
  url: string;
  schema?: string;
  close(): Promise<void>;
}

/**
 * A fresh, migrated database of the kind under test: a real SQLite file in a temporary folder, or
 * a schema of its own on the PostgreSQL server, so test files can run side by side.
 */
export async function createTestDb(): Promise<TestDb> {
  const pgUrl = testDatabaseUrl();
  if (pgUrl) {
    const schema = `t_${randomBytes(6).toString('hex')}`;
    const admin = createDb(pgUrl);
    await admin.raw(`CREATE SCHEMA ${schema}`);
    await admin.destroy();
    const db = createDb(pgUrl, { schema });
    await migrate(db);
    return {
      db,
      url: pgUrl,
      schema,
      async close() {
        await db.raw(`DROP SCHEMA ${schema} CASCADE`);
        await db.destroy();
      },
    };
  }
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'herald-test-'));
  const file = path.join(dir, 'herald.db');
  // Without the fsync of every commit that the server's default (FULL) makes: a test cannot lose
  // power, and test:fast spent much of its time waiting for them. test/db/durability.test.ts checks the default.
  const db = createDb(`sqlite:${file}`, { synchronous: 'normal' });
  await migrate(db);
  return {
    db,
    url: `sqlite:${file}`,
    async close() {
      await db.destroy();
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** The URL a child process (the server, the keys CLI) uses to open this same test database. */
export function processDatabaseUrl(testDb: TestDb): string {
  if (!testDb.schema) return testDb.url;
  const separator = testDb.url.includes('?') ? '&' : '?';
  return `${testDb.url}${separator}options=${encodeURIComponent(`-c search_path=${testDb.schema}`)}`;
}

/**
 * The setup the dialect tests share: one fresh database for the file (created before its first
 * test, closed after its last), with the file's own tables made once by `tables`, and `rows` written
 * again before EACH test after emptying those tables, so that no test sees what another changed.
 * Read `db` and `testDb` inside hooks and tests, not at the top of the file.
 */
export function useTestDb(setup: { tables?: (db: Db) => Promise<unknown>; rows?: (db: Db) => Promise<unknown>; emptied?: string[] } = {}): {
  readonly db: Db;
  readonly testDb: TestDb;
} {
  let testDb: TestDb | undefined;
  beforeAll(async () => {
    testDb = await createTestDb();
    await setup.tables?.(testDb.db);
  });
  beforeEach(async () => {
    if (!testDb) return;
    // Children before parents: the tables are emptied in the reverse of the order they are listed.
    for (const table of [...(setup.emptied ?? [])].reverse()) await testDb.db(table).delete();
    await setup.rows?.(testDb.db);
  });
  afterAll(async () => {
    await testDb?.close();
  });
  return {
    get db() {
      if (!testDb) throw new Error('useTestDb: the database exists only inside hooks and tests');
      return testDb.db;
    },
    get testDb() {
      if (!testDb) throw new Error('useTestDb: the database exists only inside hooks and tests');
      return testDb;
    },
  };
}
