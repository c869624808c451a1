// What a process does with the database before it serves: set up an empty one once, however many
// processes start together, and refuse to run with a secret that cannot open what it holds sealed.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import net, { type AddressInfo } from 'node:net';
import { createDb, isReady, type Db } from '../../src/db/knex.js';
import { bootstrap } from '../../src/accounts/bootstrap.js';
import { settleSecret } from '../../src/accounts/secret.js';
import { loadConfig, StartError } from '../../src/config.js';
import { createLogger } from '../../src/logger.js';
import { seal } from '../../src/crypto.js';
import { createTestDb, type TestDb } from '../helpers/db.js';

let testDb: TestDb;
beforeEach(async () => {
  testDb = await createTestDb();
});
afterEach(async () => {
  await testDb.close();
});

/** Another process's handle on the same database: a pool of its own. */
function anotherProcess(): Db {
  return testDb.schema ? createDb(testDb.url, { schema: testDb.schema }) : createDb(testDb.url);
}

describe('bootstrap', () => {
  it('makes one first organization and key when processes start together on an empty database', async () => {
    const others = [anotherProcess(), anotherProcess(), anotherProcess()];
    try {
      // Connected first, so that they start at once.
      await Promise.all(others.map((db) => db.raw('SELECT 1')));
      const results = await Promise.all([testDb.db, ...others].map((db) => bootstrap(db, { plan: 'enterprise' })));
      expect(results.filter((result) => result.createdKey !== undefined)).toHaveLength(1);
      expect(Number((await testDb.db('organizations').count({ n: '*' }).first())!.n)).toBe(1);
      expect(Number((await testDb.db('api_keys').count({ n: '*' }).first())!.n)).toBe(1);
    } finally {
      await Promise.all(others.map((db) => db.destroy()));
    }
  });
});

describe('settleSecret', () => {
  const logger = createLogger('silent');
  // PostgreSQL's URL: no key file stands in for a missing HERALD_SECRET.
  const config = (secret?: string) => ({ ...loadConfig({ DATABASE_URL: 'postgres://nobody@127.0.0.1:1/none' }), secret });

  beforeEach(async () => {
    await bootstrap(testDb.db, { plan: 'enterprise' });
    const environment = await testDb.db('environments').first('id');
    const now = new Date().toISOString();
    await testDb.db('integrations').insert({
      id: 'i1', environment_id: environment.id, provider_id: 'slack', channel: 'chat', name: 'Slack', identifier: 'slack',
      credentials: seal('{}', 'the-right-secret'), active: true, created_at: now, updated_at: now,
    });
  });

  it('refuses to start without HERALD_SECRET, or with another, when the database holds sealed values', async () => {
    await expect(settleSecret(config(), testDb.db, logger)).rejects.toThrow(new StartError('The database holds credentials encrypted with a secret, but HERALD_SECRET is not set: set it to the value they were written with (the same in every process)'));
    await expect(settleSecret(config('a-wrong-secret'), testDb.db, logger)).rejects.toThrow(StartError);
    await expect(settleSecret(config('a-wrong-secret'), testDb.db, logger)).rejects.toThrow(/^HERALD_SECRET cannot decrypt the credentials the database holds/);
    expect(await settleSecret(config('the-right-secret'), testDb.db, logger)).toBe('the-right-secret');
  });
});

describe('a database that cannot be reached', () => {
  it('is not ready when it takes the connection and never answers, said within the bound', async () => {
    // A PostgreSQL server that accepts connections and says nothing.
    const sockets = new Set<net.Socket>();
    const silent = net.createServer((socket) => sockets.add(socket));
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    const db = createDb(`postgres://nobody:x@127.0.0.1:${(silent.address() as AddressInfo).port}/none`);
    try {
      expect(await isReady(db, 200)).toBe(false);
    } finally {
      for (const socket of sockets) socket.destroy();
      silent.close();
      await db.destroy().catch(() => undefined);
    }
  });

  it('names the SQLite file whose folder cannot be made, at once', () => {
    expect(() => createDb('sqlite:/proc/no-such-folder/herald.db')).toThrow(new StartError('cannot make the folder of the SQLite database /proc/no-such-folder/herald.db: ENOENT'));
  });
});
