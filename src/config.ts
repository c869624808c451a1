import path from 'node:path';
import { DEFAULT_PROVIDER_TIMEOUTS, parseNetworks, type OutboundPolicy } from './outbound-guard.js';

export type Plan = 'free' | 'pro' | 'enterprise';
export const PLANS: readonly Plan[] = ['free', 'pro', 'enterprise'];

/** Novu keeps notifications 30 days (its messages of other channels too; in-app ones a year). */
export const DEFAULT_RETENTION_DAYS = 30;
/** Ten years: the longest retention a server or an environment may set (0 keeps for ever). */
export const MAX_RETENTION_DAYS = 3_650;

/** Inbox streams a process holds: each is a socket, so a file descriptor, and `ulimit -n` must leave room for them. */
export const DEFAULT_INBOX_MAX_STREAMS = 10_000;

export interface Config {
  /** `postgres://…` for PostgreSQL, `sqlite:<path>` or nothing for a SQLite file. */
  databaseUrl: string;
  port: number;
  host: string;
  /** A key the server makes sure exists at start (scripted setups, tests). */
  apiKey?: string;
  /** The plan of the organization created on first start. */
  defaultPlan: Plan;
  /**
   * Seals what grants access at rest (crypto.ts): integration credentials, subscribers' webhook
   * URLs, webhook endpoints' and the inbox's signing secrets. On a SQLite file without it, a key
   * file beside the database serves (accounts/secret.ts).
   */
  secret?: string;
  logLevel: string;
  /** How long a worker holds a claimed job before another worker may take it over. */
  jobLeaseMs: number;
  /** How long an API key's owner, revocation and plan are remembered by each process (0: not at all). */
  keyCacheMs: number;
  /** PostgreSQL: the most connections each process opens. */
  postgresPoolMax: number;
  /** PostgreSQL: keep statements prepared on each connection (HERALD_PG_PREPARED_STATEMENTS). */
  postgresPreparedStatements: boolean;
  /**
   * HERALD_RETENTION_DAYS: days an environment keeps its notifications, their jobs, execution
   * details, messages and events (engine/retention.ts); 0 keeps them for ever. An environment's own
   * setting (`npm run plans -- retention`) wins.
   */
  retentionDays: number;
  /**
   * Where providers may send (public addresses, plus HERALD_ALLOWED_NETWORKS) and how long a send may
   * take (HERALD_PROVIDER_CONNECT_TIMEOUT_MS, _FIRST_BYTE_TIMEOUT_MS, _SEND_TIMEOUT_MS).
   */
  outbound: OutboundPolicy;
  /** The bearer token /metrics asks for; without one, /metrics is not served (404). */
  metricsToken?: string;
  /** SQLite: `full` syncs every commit before it is acknowledged; `normal` only at checkpoints (db/knex.ts, DbOptions). */
  sqliteSynchronous: 'full' | 'normal';
  /** How the job runner delivers: see README, "How delivery works". */
  delivery: DeliveryConfig;
  /** Inbox streams one process holds open at most, and of those one organization's environments together (each is a socket). */
  inboxStreams: { max: number; perOrganization: number };
  /**
   * The memory the large pages a process is answering may hold together (HERALD_LARGE_ANSWERS_MB),
   * and how long one waits for it before it is refused with a 503 (answer-memory.ts).
   */
  largeAnswers: { bytes: number; waitMs: number };
  /**
   * HERALD_TRUST_PROXY: the reverse proxies in front of Herald, whose `X-Forwarded-For` and
   * `X-Forwarded-Proto` it believes (Express's `trust proxy`): how many hops, or their addresses.
   * Unset, none: the client is the connection's address.
   */
  trustProxy?: number | string[];
}

/** The job runner's knobs (README, "How delivery works"), each from an environment variable. */
export interface DeliveryConfig {
  /** HERALD_SEND_SLOTS: sends in flight at once, per process. */
  sendSlots: number;
  /** HERALD_SEND_SLOTS_PER_ORGANIZATION: of those, the most one organization's environments hold together (default: half). */
  sendSlotsPerOrganization: number;
  /** HERALD_SENDS_PER_DESTINATION: sends in flight at once to one destination, per process. */
  sendsPerDestination: number;
  /** HERALD_BREAKER_FAILURES: timeouts or 5xx in a row that open a destination's circuit breaker. */
  breakerFailures: number;
  /** HERALD_BREAKER_COOLDOWN_MS: how long an open breaker defers its destination's jobs before a probe. */
  breakerCooldownMs: number;
  /** HERALD_BREAKER_MAX_COOLDOWN_MS: the longest that wait grows to as probes keep failing. */
  breakerMaxCooldownMs: number;
  /** HERALD_RUNNER_COALESCE_MS: the longest a woken runner waits for more work before it claims, while work comes more often than that. */
  coalesceMs: number;
  /** HERALD_RUNNER_BATCH: in-app jobs, or control steps (delay, digest, throttle, fan-out), claimed and settled at a time. */
  localBatch: number;
}

/** The defaults; an organization's share of the send slots, half of them, is worked out from `sendSlots`. */
export const DEFAULT_DELIVERY: Omit<DeliveryConfig, 'sendSlotsPerOrganization'> = {
  sendSlots: 64,
  sendsPerDestination: 16,
  breakerFailures: 5,
  breakerCooldownMs: 30_000,
  breakerMaxCooldownMs: 600_000,
  coalesceMs: 30,
  localBatch: 500,
};

/**
 * Connections a process opens to PostgreSQL at most. On a small machine (API, PostgreSQL and load
 * sharing its cores) more connections only add contention; `npm run bench` picked this one.
 */
export const DEFAULT_POSTGRES_POOL_MAX = 20;

/** A reason the process cannot start, for the operator: said as it is, without a stack trace (main.ts). */
export class StartError extends Error {
  override readonly name = 'StartError';
}

/** Node's timers hold at most this many ms; a longer one fires after 1 ms instead. */
const MAX_TIMER_MS = 2_147_483_647;

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];

/** Digits only: `Number` would also read `1e3`, `0x10` and ` 7 `, which nobody means as a count. */
function wholeNumber(value: string | undefined, fallback: number, name: string, { allowZero = false, max = Number.MAX_SAFE_INTEGER } = {}): number {
  if (value === undefined || value === '') return fallback;
  const number = /^\d{1,15}$/.test(value) ? Number(value) : NaN;
  const lowest = allowZero ? 0 : 1;
  if (!(number >= lowest && number <= max)) {
    const what = max < Number.MAX_SAFE_INTEGER ? `a whole number from ${lowest} to ${max}` : allowZero ? 'a whole number, 0 or more' : 'a positive whole number';
    throw new StartError(`${name} must be ${what}, not "${value}"`);
  }
  return number;
}

/** A duration in ms, which a timer holds: at most MAX_TIMER_MS (about 24.8 days). */
function milliseconds(value: string | undefined, fallback: number, name: string, { allowZero = false } = {}): number {
  return wholeNumber(value, fallback, name, { allowZero, max: MAX_TIMER_MS });
}

/** One of `choices` (any case), the fallback when unset or empty. */
function oneOf<T extends string>(value: string | undefined, fallback: T, name: string, choices: readonly T[]): T {
  if (value === undefined || value === '') return fallback;
  const choice = value.toLowerCase() as T;
  if (!choices.includes(choice)) {
    const what = choices.length === 2 ? choices.join(' or ') : `one of ${choices.join(', ')}`;
    throw new StartError(`${name} must be ${what}, not "${value}"`);
  }
  return choice;
}

function onOff(value: string | undefined, fallback: boolean, name: string): boolean {
  return oneOf(value, fallback ? 'on' : 'off', name, ['on', 'off']) === 'on';
}

/** Express's names for address ranges, besides addresses and CIDRs. */
const PROXY_RANGES = ['loopback', 'linklocal', 'uniquelocal'];

/**
 * A number of hops, or proxies' addresses, CIDRs and Express's range names. Not `true` (every
 * address): then any client could name its own address in X-Forwarded-For and pass the limits.
 */
function trustProxy(value: string | undefined): Config['trustProxy'] {
  if (value === undefined || value.trim() === '') return undefined;
  if (/^\d+$/.test(value.trim())) return wholeNumber(value.trim(), 0, 'HERALD_TRUST_PROXY', { max: 10 });
  return value.split(',').map((entry) => {
    const proxy = entry.trim();
    if (PROXY_RANGES.includes(proxy)) return proxy;
    try {
      if (parseNetworks(proxy).length === 0) throw new Error('empty');
    } catch {
      throw new StartError(`HERALD_TRUST_PROXY must be a number of hops (1 to 10), or comma-separated addresses, CIDRs and ${PROXY_RANGES.join(', ')}, not "${proxy}"`);
    }
    return proxy;
  });
}

/** A check's refusal, which names its variable, as a reason the process cannot start. */
function asStartError<T>(check: () => T): T {
  try {
    return check();
  } catch (err) {
    throw err instanceof Error && !(err instanceof StartError) ? new StartError(err.message) : err;
  }
}

export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  return {
    // Checked where databases are opened (checkedDatabaseUrl, db/knex.ts).
    databaseUrl: env.DATABASE_URL || `sqlite:${path.join('data', 'herald.db')}`,
    port: wholeNumber(env.PORT, 3000, 'PORT', { allowZero: true, max: 65_535 }),
    host: env.HOST || '0.0.0.0',
    apiKey: env.HERALD_API_KEY || undefined,
    defaultPlan: oneOf(env.HERALD_DEFAULT_PLAN, 'enterprise', 'HERALD_DEFAULT_PLAN', PLANS),
    secret: env.HERALD_SECRET || undefined,
    logLevel: oneOf(env.LOG_LEVEL, 'info', 'LOG_LEVEL', LOG_LEVELS),
    jobLeaseMs: milliseconds(env.HERALD_JOB_LEASE_MS, 60_000, 'HERALD_JOB_LEASE_MS'),
    keyCacheMs: milliseconds(env.HERALD_KEY_CACHE_MS, 5_000, 'HERALD_KEY_CACHE_MS', { allowZero: true }),
    postgresPoolMax: wholeNumber(env.HERALD_PG_POOL_MAX, DEFAULT_POSTGRES_POOL_MAX, 'HERALD_PG_POOL_MAX'),
    postgresPreparedStatements: onOff(env.HERALD_PG_PREPARED_STATEMENTS, true, 'HERALD_PG_PREPARED_STATEMENTS'),
    retentionDays: wholeNumber(env.HERALD_RETENTION_DAYS, DEFAULT_RETENTION_DAYS, 'HERALD_RETENTION_DAYS', { allowZero: true, max: MAX_RETENTION_DAYS }),
    outbound: {
      allowedNetworks: asStartError(() => parseNetworks(env.HERALD_ALLOWED_NETWORKS)),
      timeouts: {
        connectMs: milliseconds(env.HERALD_PROVIDER_CONNECT_TIMEOUT_MS, DEFAULT_PROVIDER_TIMEOUTS.connectMs, 'HERALD_PROVIDER_CONNECT_TIMEOUT_MS'),
        firstByteMs: milliseconds(env.HERALD_PROVIDER_FIRST_BYTE_TIMEOUT_MS, DEFAULT_PROVIDER_TIMEOUTS.firstByteMs, 'HERALD_PROVIDER_FIRST_BYTE_TIMEOUT_MS'),
        sendMs: milliseconds(env.HERALD_PROVIDER_SEND_TIMEOUT_MS, DEFAULT_PROVIDER_TIMEOUTS.sendMs, 'HERALD_PROVIDER_SEND_TIMEOUT_MS'),
      },
    },
    // The token a request sends is read trimmed: a token with spaces around it could never match.
    metricsToken: env.HERALD_METRICS_TOKEN?.trim() || undefined,
    sqliteSynchronous: oneOf(env.HERALD_SQLITE_SYNCHRONOUS, 'full', 'HERALD_SQLITE_SYNCHRONOUS', ['full', 'normal']),
    delivery: loadDeliveryConfig(env),
    inboxStreams: loadInboxStreams(env),
    largeAnswers: { bytes: wholeNumber(env.HERALD_LARGE_ANSWERS_MB, 256, 'HERALD_LARGE_ANSWERS_MB') * 1024 * 1024, waitMs: 30_000 },
    trustProxy: trustProxy(env.HERALD_TRUST_PROXY),
  };
}

/**
 * The whole number `<prefix>_PER_ORGANIZATION` sets, or, unset, its older name
 * `<prefix>_PER_ENVIRONMENT` (from when the share was an environment's, and one tenant's two
 * environments could hold everything), or `fallback`.
 */
function perOrganization(env: NodeJS.ProcessEnv, prefix: string, fallback: number): number {
  const name = `${prefix}_PER_ORGANIZATION`;
  const older = `${prefix}_PER_ENVIRONMENT`;
  return env[name] === undefined || env[name] === '' ? wholeNumber(env[older], fallback, older) : wholeNumber(env[name], fallback, name);
}

function loadInboxStreams(env: NodeJS.ProcessEnv): Config['inboxStreams'] {
  const max = wholeNumber(env.HERALD_INBOX_MAX_STREAMS, DEFAULT_INBOX_MAX_STREAMS, 'HERALD_INBOX_MAX_STREAMS');
  // An organization can hold no more than the process: a larger setting means all of them.
  return { max, perOrganization: Math.min(max, perOrganization(env, 'HERALD_INBOX_STREAMS', Math.ceil(max / 2))) };
}

function loadDeliveryConfig(env: NodeJS.ProcessEnv): DeliveryConfig {
  const d = DEFAULT_DELIVERY;
  const sendSlots = wholeNumber(env.HERALD_SEND_SLOTS, d.sendSlots, 'HERALD_SEND_SLOTS');
  return {
    sendSlots,
    sendSlotsPerOrganization: Math.min(sendSlots, perOrganization(env, 'HERALD_SEND_SLOTS', Math.max(1, Math.ceil(sendSlots / 2)))),
    sendsPerDestination: wholeNumber(env.HERALD_SENDS_PER_DESTINATION, d.sendsPerDestination, 'HERALD_SENDS_PER_DESTINATION'),
    breakerFailures: wholeNumber(env.HERALD_BREAKER_FAILURES, d.breakerFailures, 'HERALD_BREAKER_FAILURES'),
    breakerCooldownMs: milliseconds(env.HERALD_BREAKER_COOLDOWN_MS, d.breakerCooldownMs, 'HERALD_BREAKER_COOLDOWN_MS'),
    breakerMaxCooldownMs: milliseconds(env.HERALD_BREAKER_MAX_COOLDOWN_MS, d.breakerMaxCooldownMs, 'HERALD_BREAKER_MAX_COOLDOWN_MS'),
    coalesceMs: milliseconds(env.HERALD_RUNNER_COALESCE_MS, d.coalesceMs, 'HERALD_RUNNER_COALESCE_MS', { allowZero: true }),
    localBatch: wholeNumber(env.HERALD_RUNNER_BATCH, d.localBatch, 'HERALD_RUNNER_BATCH'),
  };
}
