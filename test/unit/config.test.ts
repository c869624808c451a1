import { describe, expect, it } from 'vitest';
import { DEFAULT_INBOX_MAX_STREAMS, DEFAULT_POSTGRES_POOL_MAX, loadConfig } from '../../src/config.js';
import { createDb } from '../../src/db/knex.js';

describe.runIf(process.env.HERALD_TEST_DB === 'sqlite')('HERALD_PG_POOL_MAX', () => {
  it('sets the most connections a process opens to PostgreSQL, 20 when unset', async () => {
    expect(loadConfig({}).postgresPoolMax).toBe(DEFAULT_POSTGRES_POOL_MAX);
    expect(DEFAULT_POSTGRES_POOL_MAX).toBe(20);
    expect(loadConfig({ HERALD_PG_POOL_MAX: '5' }).postgresPoolMax).toBe(5);
    // The pool is made without connecting: nothing needs to listen at this address.
    for (const [options, max] of [[{ poolMax: 5 }, 5], [{}, 20]] as const) {
      const db = createDb('postgres://nobody@127.0.0.1:1/none', options);
      expect((db.client as { pool: { max: number } }).pool.max).toBe(max);
      await db.destroy();
    }
  });

  it('refuses a value that is not a positive whole number', () => {
    for (const value of ['0', '-1', '2.5', 'many', '1e3', '0x10', ' 7']) {
      expect(() => loadConfig({ HERALD_PG_POOL_MAX: value })).toThrow(`HERALD_PG_POOL_MAX must be a positive whole number, not "${value}"`);
    }
  });
});

describe.runIf(process.env.HERALD_TEST_DB === 'sqlite')('HERALD_PG_PREPARED_STATEMENTS', () => {
  it('is on unless set off, and refuses anything but on or off', () => {
    expect(loadConfig({}).postgresPreparedStatements).toBe(true);
    expect(loadConfig({ HERALD_PG_PREPARED_STATEMENTS: 'OFF' }).postgresPreparedStatements).toBe(false);
    expect(loadConfig({ HERALD_PG_PREPARED_STATEMENTS: 'on' }).postgresPreparedStatements).toBe(true);
    expect(() => loadConfig({ HERALD_PG_PREPARED_STATEMENTS: 'no' })).toThrow('HERALD_PG_PREPARED_STATEMENTS must be on or off, not "no"');
  });
});

describe.runIf(process.env.HERALD_TEST_DB === 'sqlite')('HERALD_INBOX_MAX_STREAMS', () => {
  it('holds 10,000 streams a process, half of them for one environment, each settable', () => {
    expect(loadConfig({}).inboxStreams).toEqual({ max: DEFAULT_INBOX_MAX_STREAMS, perEnvironment: 5_000 });
    expect(DEFAULT_INBOX_MAX_STREAMS).toBe(10_000);
    expect(loadConfig({ HERALD_INBOX_MAX_STREAMS: '301' }).inboxStreams).toEqual({ max: 301, perEnvironment: 151 });
    expect(loadConfig({ HERALD_INBOX_MAX_STREAMS: '300', HERALD_INBOX_STREAMS_PER_ENVIRONMENT: '300' }).inboxStreams).toEqual({ max: 300, perEnvironment: 300 });
    // An environment cannot hold more than the process.
    expect(loadConfig({ HERALD_INBOX_MAX_STREAMS: '300', HERALD_INBOX_STREAMS_PER_ENVIRONMENT: '900' }).inboxStreams.perEnvironment).toBe(300);
    expect(() => loadConfig({ HERALD_INBOX_MAX_STREAMS: '0' })).toThrow('HERALD_INBOX_MAX_STREAMS must be a positive whole number, not "0"');
  });
});

describe.runIf(process.env.HERALD_TEST_DB === 'sqlite')('HERALD_RETENTION_DAYS', () => {
  it('keeps 30 days unless set, 0 for ever, and refuses what the CLI refuses an environment', () => {
    expect(loadConfig({}).retentionDays).toBe(30);
    expect(loadConfig({ HERALD_RETENTION_DAYS: '0' }).retentionDays).toBe(0);
    expect(loadConfig({ HERALD_RETENTION_DAYS: '3650' }).retentionDays).toBe(3650);
    for (const value of ['3651', '99999999999', '1e3', '0x10', '-1']) {
      expect(() => loadConfig({ HERALD_RETENTION_DAYS: value })).toThrow(`HERALD_RETENTION_DAYS must be a whole number from 0 to 3650, not "${value}"`);
    }
  });
});
