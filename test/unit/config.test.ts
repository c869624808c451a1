import { describe, expect, it } from 'vitest';
import { DEFAULT_INBOX_MAX_STREAMS, DEFAULT_POSTGRES_POOL_MAX, loadConfig, StartError } from '../../src/config.js';
import { checkedDatabaseUrl, createDb } from '../../src/db/knex.js';

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
  it('holds 10,000 streams a process, half of them for one organization, each settable', () => {
    expect(loadConfig({}).inboxStreams).toEqual({ max: DEFAULT_INBOX_MAX_STREAMS, perOrganization: 5_000 });
    expect(DEFAULT_INBOX_MAX_STREAMS).toBe(10_000);
    expect(loadConfig({ HERALD_INBOX_MAX_STREAMS: '301' }).inboxStreams).toEqual({ max: 301, perOrganization: 151 });
    expect(loadConfig({ HERALD_INBOX_MAX_STREAMS: '300', HERALD_INBOX_STREAMS_PER_ORGANIZATION: '300' }).inboxStreams).toEqual({ max: 300, perOrganization: 300 });
    // Its older name still sets it, unless the new one is set too.
    expect(loadConfig({ HERALD_INBOX_MAX_STREAMS: '300', HERALD_INBOX_STREAMS_PER_ENVIRONMENT: '200' }).inboxStreams.perOrganization).toBe(200);
    expect(loadConfig({ HERALD_INBOX_MAX_STREAMS: '300', HERALD_INBOX_STREAMS_PER_ENVIRONMENT: '200', HERALD_INBOX_STREAMS_PER_ORGANIZATION: '100' }).inboxStreams.perOrganization).toBe(100);
    expect(() => loadConfig({ HERALD_INBOX_STREAMS_PER_ENVIRONMENT: 'x' })).toThrow('HERALD_INBOX_STREAMS_PER_ENVIRONMENT must be a positive whole number, not "x"');
    // An organization cannot hold more than the process.
    expect(loadConfig({ HERALD_INBOX_MAX_STREAMS: '300', HERALD_INBOX_STREAMS_PER_ORGANIZATION: '900' }).inboxStreams.perOrganization).toBe(300);
    expect(() => loadConfig({ HERALD_INBOX_MAX_STREAMS: '0' })).toThrow('HERALD_INBOX_MAX_STREAMS must be a positive whole number, not "0"');
  });
});

describe.runIf(process.env.HERALD_TEST_DB === 'sqlite')('HERALD_LARGE_ANSWERS_MB', () => {
  it('lets large pages hold 256 MiB together unless set, waiting 30 s for it, and refuses what is no positive whole number', () => {
    expect(loadConfig({}).largeAnswers).toEqual({ bytes: 256 * 1024 * 1024, waitMs: 30_000 });
    expect(loadConfig({ HERALD_LARGE_ANSWERS_MB: '64' }).largeAnswers.bytes).toBe(64 * 1024 * 1024);
    expect(() => loadConfig({ HERALD_LARGE_ANSWERS_MB: '0' })).toThrow('HERALD_LARGE_ANSWERS_MB must be a positive whole number, not "0"');
    expect(() => loadConfig({ HERALD_LARGE_ANSWERS_MB: '1.5' })).toThrow('HERALD_LARGE_ANSWERS_MB');
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

describe.runIf(process.env.HERALD_TEST_DB === 'sqlite')('durations, the database, the port and the log level', () => {
  it('refuses a duration longer than a timer holds (Node fires one of 2^31 ms or more after 1 ms)', () => {
    expect(loadConfig({ HERALD_PROVIDER_SEND_TIMEOUT_MS: '2147483647' }).outbound.timeouts.sendMs).toBe(2_147_483_647);
    for (const name of ['HERALD_PROVIDER_SEND_TIMEOUT_MS', 'HERALD_PROVIDER_CONNECT_TIMEOUT_MS', 'HERALD_PROVIDER_FIRST_BYTE_TIMEOUT_MS', 'HERALD_JOB_LEASE_MS', 'HERALD_KEY_CACHE_MS', 'HERALD_BREAKER_COOLDOWN_MS', 'HERALD_BREAKER_MAX_COOLDOWN_MS', 'HERALD_RUNNER_COALESCE_MS']) {
      expect(() => loadConfig({ [name]: '3000000000' })).toThrow(new RegExp(`^${name} must be a whole number from [01] to 2147483647, not "3000000000"$`));
    }
  });

  it('takes postgres://, sqlite:<file> or a path, and refuses any other scheme and a database gone at exit', () => {
    expect(loadConfig({}).databaseUrl).toBe('sqlite:data/herald.db');
    for (const url of ['postgres://u:p@db/herald', 'postgresql://db/herald', 'sqlite:/var/lib/herald.db', 'data/other.db', './x.db']) {
      expect(checkedDatabaseUrl(loadConfig({ DATABASE_URL: url }).databaseUrl)).toBe(url);
    }
    for (const url of ['mysql://x@y/z', 'postgress://db/herald', 'sqlite:', 'sqlite::memory:', ':memory:', 'file:x.db', 'sqlite:file:x.db', 'SQLite:/x.db']) {
      expect(() => checkedDatabaseUrl(url)).toThrow(StartError);
      expect(() => checkedDatabaseUrl(url)).toThrow(`DATABASE_URL must be postgres://… (PostgreSQL), or sqlite:<file> or a file's path (SQLite), not "${url}"`);
    }
  });

  it('reads PORT as digits from 0 to 65535, 3000 when unset or empty', () => {
    expect(loadConfig({}).port).toBe(3000);
    expect(loadConfig({ PORT: '' }).port).toBe(3000);
    expect(loadConfig({ PORT: '0' }).port).toBe(0);
    for (const value of ['1e3', '65536', '-1', 'http']) expect(() => loadConfig({ PORT: value })).toThrow(`PORT must be a whole number from 0 to 65535, not "${value}"`);
  });

  it('names LOG_LEVEL and HERALD_DEFAULT_PLAN when they are not one of theirs, and takes empty as unset', () => {
    expect(loadConfig({ LOG_LEVEL: '' }).logLevel).toBe('info');
    expect(loadConfig({ LOG_LEVEL: 'DEBUG' }).logLevel).toBe('debug');
    expect(() => loadConfig({ LOG_LEVEL: 'verbose' })).toThrow('LOG_LEVEL must be one of fatal, error, warn, info, debug, trace, silent, not "verbose"');
    expect(loadConfig({ HERALD_DEFAULT_PLAN: '' }).defaultPlan).toBe('enterprise');
    expect(() => loadConfig({ HERALD_DEFAULT_PLAN: 'gold' })).toThrow('HERALD_DEFAULT_PLAN must be one of free, pro, enterprise, not "gold"');
  });

  it('reads HERALD_METRICS_TOKEN trimmed, as a request sends it, and blank as unset', () => {
    expect(loadConfig({ HERALD_METRICS_TOKEN: ' s3cret ' }).metricsToken).toBe('s3cret');
    expect(loadConfig({ HERALD_METRICS_TOKEN: ' ' }).metricsToken).toBeUndefined();
  });
});

describe.runIf(process.env.HERALD_TEST_DB === 'sqlite')('HERALD_TRUST_PROXY', () => {
  it('names the proxies in front by hops or by address, and never every address', () => {
    expect(loadConfig({}).trustProxy).toBeUndefined();
    expect(loadConfig({ HERALD_TRUST_PROXY: '1' }).trustProxy).toBe(1);
    expect(loadConfig({ HERALD_TRUST_PROXY: 'loopback, 10.0.0.0/8,192.168.1.7' }).trustProxy).toEqual(['loopback', '10.0.0.0/8', '192.168.1.7']);
    for (const value of ['true', '*', '10.0.0.0/99', '0', '11', 'loopback,', ',10.0.0.1']) {
      expect(() => loadConfig({ HERALD_TRUST_PROXY: value })).toThrow(StartError);
    }
  });
});

describe.runIf(process.env.HERALD_TEST_DB === 'sqlite')('HERALD_ALLOWED_NETWORKS', () => {
  it('is refused as a reason not to start, naming the variable', () => {
    expect(() => loadConfig({ HERALD_ALLOWED_NETWORKS: '10.0.0.0/8,nope' })).toThrow(new StartError('HERALD_ALLOWED_NETWORKS must be comma-separated CIDRs (e.g. 10.0.0.0/8,fd00::/8), not "nope"'));
  });
});
