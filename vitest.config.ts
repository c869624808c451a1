import { defineConfig } from 'vitest/config';

// The suite runs once per database: always on SQLite, and on PostgreSQL too when TEST_POSTGRES_URL
// names a server (CI starts one). Each test file gets its own SQLite file or PostgreSQL schema.
//
// Each database has two projects: the fast one (`sqlite`, `postgres`: everything in-process, under
// test/http, test/compat, test/engine, test/db, test/providers, test/unit) and the end-to-end one (`sqlite-e2e`,
// `postgres-e2e`: test/e2e, the tests that launch Chromium, spawn processes, run the built server or
// fuzz). `npm test` runs every project; `npm run test:fast` only `sqlite`.
//
// The fast projects run their files on threads that share one module graph (`isolate: false`):
// loading the server's modules once per thread instead of once per file is most of what makes
// `test:fast` fast. So a test file must not count on a module's state being fresh; one that mocks
// a module imports it afresh after vi.resetModules() (test/http/security.test.ts).
const databases: Array<{ name: string; url: string }> = [{ name: 'sqlite', url: 'sqlite' }];
if (process.env.TEST_POSTGRES_URL) databases.push({ name: 'postgres', url: process.env.TEST_POSTGRES_URL });

const E2E = 'test/e2e/**/*.test.ts';

export default defineConfig({
  test: {
    projects: databases.flatMap(({ name, url }) => [
      {
        test: {
          name,
          include: ['test/**/*.test.ts'],
          exclude: [E2E],
          pool: 'threads',
          isolate: false,
          env: { HERALD_TEST_DB: url },
          testTimeout: 30_000,
          hookTimeout: 60_000,
        },
      },
      {
        test: {
          name: `${name}-e2e`,
          include: [E2E],
          env: { HERALD_TEST_DB: url },
          testTimeout: 30_000,
          hookTimeout: 60_000,
        },
      },
    ]),
  },
});
