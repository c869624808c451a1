import { defineConfig } from 'vitest/config';

// The suite runs once per database: always on SQLite, and on PostgreSQL too when TEST_POSTGRES_URL
// names a server (CI starts one). Each test file gets its own SQLite file or PostgreSQL schema.
const databases: Array<{ name: string; url: string }> = [{ name: 'sqlite', url: 'sqlite' }];
if (process.env.TEST_POSTGRES_URL) databases.push({ name: 'postgres', url: process.env.TEST_POSTGRES_URL });

export default defineConfig({
  test: {
    projects: databases.map(({ name, url }) => ({
      test: {
        name,
        include: ['test/**/*.test.ts'],
        env: { HERALD_TEST_DB: url },
        testTimeout: 30_000,
        hookTimeout: 60_000,
      },
    })),
  },
});
