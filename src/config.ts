import path from 'node:path';
import { DEFAULT_PROVIDER_TIMEOUTS, parseNetworks, type OutboundPolicy } from './outbound-guard.js';

export type Plan = 'free' | 'pro' | 'enterprise';
export const PLANS: readonly Plan[] = ['free', 'pro', 'enterprise'];

export interface Config {
  /** `postgres://…` for PostgreSQL, `sqlite:<path>` or nothing for a SQLite file. */
  databaseUrl: string;
  port: number;
  host: string;
  /** A key the server makes sure exists at start (scripted setups, tests). */
  apiKey?: string;
  /** The plan of the organization created on first start. */
  defaultPlan: Plan;
  /** Encrypts integration credentials at rest when set. */
  secret?: string;
  logLevel: string;
  /** How long a worker holds a claimed job before another worker may take it over. */
  jobLeaseMs: number;
  /** How long an API key's owner, revocation and plan are remembered by each process (0: not at all). */
  keyCacheMs: number;
  /** PostgreSQL: the most connections each process opens. */
  postgresPoolMax: number;
  /**
   * Where providers may send (public addresses, plus HERALD_ALLOWED_NETWORKS) and how long a send may
   * take (HERALD_PROVIDER_CONNECT_TIMEOUT_MS, _FIRST_BYTE_TIMEOUT_MS, _SEND_TIMEOUT_MS).
   */
  outbound: OutboundPolicy;
  /** The bearer token /metrics asks for; without one, /metrics is not served (404). */
  metricsToken?: string;
  /** SQLite: `full` syncs every commit before it is acknowledged; `normal` only at checkpoints (db/knex.ts, DbOptions). */
  sqliteSynchronous: 'full' | 'normal';
}

/**
 * Connections a process opens to PostgreSQL at most. On a small machine (API, PostgreSQL and load
 * sharing its cores) more connections only add contention; `npm run bench` picked this one.
 */
export const DEFAULT_POSTGRES_POOL_MAX = 20;

function wholeNumber(value: string | undefined, fallback: number, name: string, { allowZero = false } = {}): number {
  if (value === undefined || value === '') return fallback;
  const number = Number(value);
  if (!Number.isInteger(number) || number < (allowZero ? 0 : 1)) {
    throw new Error(`${name} must be a ${allowZero ? 'whole number, 0 or more' : 'positive whole number'}, not "${value}"`);
  }
  return number;
}

export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const defaultPlan = (env.HERALD_DEFAULT_PLAN ?? 'enterprise') as Plan;
  if (!PLANS.includes(defaultPlan)) {
    throw new Error(`HERALD_DEFAULT_PLAN must be one of ${PLANS.join(', ')}, not "${defaultPlan}"`);
  }
  const sqliteSynchronous = (env.HERALD_SQLITE_SYNCHRONOUS || 'full').toLowerCase();
  if (sqliteSynchronous !== 'full' && sqliteSynchronous !== 'normal') {
    throw new Error(`HERALD_SQLITE_SYNCHRONOUS must be full or normal, not "${env.HERALD_SQLITE_SYNCHRONOUS}"`);
  }
  const port = Number(env.PORT ?? 3000);
  if (!Number.isInteger(port) || port < 0 || port > 65535) {
    throw new Error(`PORT must be a port number, not "${env.PORT}"`);
  }
  return {
    databaseUrl: env.DATABASE_URL || `sqlite:${path.join('data', 'herald.db')}`,
    port,
    host: env.HOST ?? '0.0.0.0',
    apiKey: env.HERALD_API_KEY || undefined,
    defaultPlan,
    secret: env.HERALD_SECRET || undefined,
    logLevel: env.LOG_LEVEL ?? 'info',
    jobLeaseMs: wholeNumber(env.HERALD_JOB_LEASE_MS, 60_000, 'HERALD_JOB_LEASE_MS'),
    keyCacheMs: wholeNumber(env.HERALD_KEY_CACHE_MS, 5_000, 'HERALD_KEY_CACHE_MS', { allowZero: true }),
    postgresPoolMax: wholeNumber(env.HERALD_PG_POOL_MAX, DEFAULT_POSTGRES_POOL_MAX, 'HERALD_PG_POOL_MAX'),
    outbound: {
      allowedNetworks: parseNetworks(env.HERALD_ALLOWED_NETWORKS),
      timeouts: {
        connectMs: wholeNumber(env.HERALD_PROVIDER_CONNECT_TIMEOUT_MS, DEFAULT_PROVIDER_TIMEOUTS.connectMs, 'HERALD_PROVIDER_CONNECT_TIMEOUT_MS'),
        firstByteMs: wholeNumber(env.HERALD_PROVIDER_FIRST_BYTE_TIMEOUT_MS, DEFAULT_PROVIDER_TIMEOUTS.firstByteMs, 'HERALD_PROVIDER_FIRST_BYTE_TIMEOUT_MS'),
        sendMs: wholeNumber(env.HERALD_PROVIDER_SEND_TIMEOUT_MS, DEFAULT_PROVIDER_TIMEOUTS.sendMs, 'HERALD_PROVIDER_SEND_TIMEOUT_MS'),
      },
    },
    metricsToken: env.HERALD_METRICS_TOKEN || undefined,
    sqliteSynchronous,
  };
}
