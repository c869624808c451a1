import express from 'express';
import { afterAll, afterEach, beforeAll, beforeEach } from 'vitest';
import supertest from 'supertest';
import type { Express } from 'express';
import { createApp } from '../../src/app.js';
import { loadConfig, type Config } from '../../src/config.js';
import { LOCAL_PEERS_ENV } from './peers.js';
import { createLogger } from '../../src/logger.js';
import type { Clock } from '../../src/clock.js';
import type { Deps } from '../../src/deps.js';
import { createApiKey, createOrganization } from '../../src/db/repos/accounts.js';
import { contractRecorder } from './contract.js';
import { createTestDb, type TestDb } from './db.js';

/** A clock tests move by hand. */
export class ManualClock implements Clock {
  constructor(private current = new Date('2026-11-22T09:00:00.000Z')) {}
  now(): Date {
    return new Date(this.current);
  }
  advance(ms: number): void {
    this.current = new Date(this.current.getTime() + ms);
  }
}

/** Requests authenticated with one key, the way an API consumer sends them. */
export class Client {
  constructor(
    private readonly http: supertest.Agent | ReturnType<typeof supertest>,
    readonly key: string,
    private readonly scheme: 'Bearer' | 'ApiKey' = 'Bearer',
  ) {}
  private auth(test: supertest.Test): supertest.Test {
    return test.set('Authorization', `${this.scheme} ${this.key}`);
  }
  get(path: string) {
    return this.auth(this.http.get(path));
  }
  post(path: string, body?: object) {
    const test = this.auth(this.http.post(path));
    return body === undefined ? test : test.send(body);
  }
  put(path: string, body?: object) {
    const test = this.auth(this.http.put(path));
    return body === undefined ? test : test.send(body);
  }
  patch(path: string, body?: object) {
    const test = this.auth(this.http.patch(path));
    return body === undefined ? test : test.send(body);
  }
  delete(path: string) {
    return this.auth(this.http.delete(path));
  }
  head(path: string) {
    return this.auth(this.http.head(path));
  }
  withScheme(scheme: 'Bearer' | 'ApiKey'): Client {
    return new Client(this.http, this.key, scheme);
  }
}

export interface TestApp {
  /** Unauthenticated requests. */
  http: ReturnType<typeof supertest>;
  /** The app with the contract recorder in front, for other HTTP clients. */
  app: Express;
  /** A key of organization A's development environment, and one of its production environment. */
  a: Client;
  aProduction: Client;
  /** A key of another organization. */
  b: Client;
  db: TestDb['db'];
  testDb: TestDb;
  clock: ManualClock;
  deps: Deps;
  environments: { a: string; aProduction: string; b: string };
  /**
   * Gives `a`, `aProduction` and `b` organizations made just now, with keys of their own (and
   * `environments` their ids): call it in a `beforeEach` so that each test starts from empty
   * environments, whatever the tests before it made, on the same app and database.
   */
  renew(): Promise<void>;
  /** Fails the test when any response so far broke the contract. */
  assertContract(): Promise<void>;
  close(): Promise<void>;
}

/** What a test file changes in its app's configuration (e.g. `outbound`, to refuse even the local peers). */
export interface TestAppOptions {
  config?: Partial<Config>;
  /** Compile every operation's validators in the background at start, as `npm start` does. */
  precompile?: boolean;
}

export async function startTestApp(options: TestAppOptions = {}): Promise<TestApp> {
  const testDb = await createTestDb();
  const { db } = testDb;
  const clock = new ManualClock();
  const config: Config = { ...loadConfig(LOCAL_PEERS_ENV), ...options.config };
  const deps: Deps = { db, clock, config, logger: createLogger('silent') };
  const violations: string[] = [];
  const pending = new Set<Promise<void>>();
  const app = express();
  app.use(contractRecorder(violations, pending));
  const herald = await createApp(deps, { precompile: options.precompile });
  // What the app keeps in its locals (its metrics, its inbox hub) is reachable from the test's app
  // (only those: the locals also hold express's own settings).
  for (const key of ['metrics', 'inboxHub']) app.locals[key] = herald.locals[key];
  app.use(herald);
  const http = supertest(app);

  const tenants = async () => {
    const orgA = await createOrganization(db, { name: 'A', plan: 'enterprise', environments: ['development', 'production'] });
    const orgB = await createOrganization(db, { name: 'B', plan: 'enterprise', environments: ['development'] });
    const environments = {
      a: orgA.environmentIds.development,
      aProduction: orgA.environmentIds.production,
      b: orgB.environmentIds.development,
    };
    const keyOf = async (environmentId: string) => new Client(http, (await createApiKey(db, { environmentId, name: 'test' })).key);
    return { environments, a: await keyOf(environments.a), aProduction: await keyOf(environments.aProduction), b: await keyOf(environments.b) };
  };

  const t: TestApp = {
    http,
    app,
    ...(await tenants()),
    db,
    testDb,
    clock,
    deps,
    async renew() {
      Object.assign(t, await tenants());
    },
    async assertContract() {
      await Promise.all(pending);
      const found = violations.splice(0);
      if (found.length > 0) throw new Error(`Responses broke the contract:\n${found.join('\n')}`);
    },
    async close() {
      await Promise.all(pending);
      await testDb.close();
    },
  };
  return t;
}

/**
 * The test file's app: started once, renewed before each test (organizations of its own, so none
 * sees what another made), every response it gave checked against the contract after each, and
 * closed at the end. Read it only inside hooks and tests.
 */
export function useTestApp(options: TestAppOptions = {}): TestApp {
  let app: TestApp | undefined;
  beforeAll(async () => {
    app = await startTestApp(options);
  });
  beforeEach(async () => {
    await app!.renew();
  });
  afterEach(async () => app?.assertContract());
  afterAll(async () => app?.close());
  return new Proxy({} as TestApp, {
    get(_target, key) {
      if (!app) throw new Error('useTestApp: the app exists only inside hooks and tests');
      // Read afresh each time: renew() replaces the clients and environments.
      return (app as unknown as Record<PropertyKey, unknown>)[key];
    },
  });
}

/** Sends `n` requests one after another with `client`, answering their statuses (rate-limit tests). */
export async function spend(client: Client, n: number): Promise<number[]> {
  const statuses: number[] = [];
  for (let i = 0; i < n; i++) statuses.push((await client.get('/v1/subscribers')).status);
  return statuses;
}
