// What a process does with the database before it serves: set up an empty one once, however many
// processes start together, and refuse to run with a secret that cannot open what it holds sealed.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import net, { type AddressInfo } from 'node:net';
import { createDb, isReady, migrate, type Db } from '../../src/db/knex.js';
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

describe('migrations', () => {
  it('refuses a database a newer Herald migrated, naming what it ran, and changes nothing', async () => {
    // createTestDb migrated it; a newer version then ran one more. This version's last migration
    // is made to look pending, so that there is something it could wrongly run.
    const names = async () => (await testDb.db('knex_migrations').orderBy('id').select('name')).map((row: { name: string }) => row.name);
    const latest = (await names()).at(-1)!;
    await testDb.db('knex_migrations').where({ name: latest }).delete();
    await testDb.db('knex_migrations').insert({ name: '20991231_01_from_the_future', batch: 99, migration_time: new Date() });
    const before = await names();
    const refused = await migrate(testDb.db).catch((err: unknown) => err);
    expect(refused).toBeInstanceOf(StartError);
    expect((refused as Error).message).toBe(
      'This database was migrated by a newer Herald (it ran 20991231_01_from_the_future, which this version does not know): run that version or a newer one; a database is never migrated back',
    );
    expect(await names()).toEqual(before);
    expect(before).not.toContain(latest);
  });
});

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

  it('starts, saying so, when only some sealed values are of another secret: the latest open', async () => {
    const environment = await testDb.db('environments').first('id');
    const old = new Date(Date.now() - 86_400_000).toISOString();
    await testDb.db('integrations').insert({
      id: 'i0', environment_id: environment.id, provider_id: 'discord', channel: 'chat', name: 'Old', identifier: 'old',
      credentials: seal('{}', 'a-secret-of-old'), active: false, created_at: old, updated_at: old,
    });
    const lines: string[] = [];
    const listening = createLogger('warn', new Writable({ write: (chunk, _encoding, done) => done(void lines.push(String(chunk))) }));
    expect(await settleSecret(config('the-right-secret'), testDb.db, listening)).toBe('the-right-secret');
    expect(lines.join('')).toMatch(/"unopened":1,"of":2.*encrypted with another secret/);
  });

  it('names the key file when a SQLite database\'s herald.key is missing, and leaves no new one to be taken for it', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'herald-lost-key-'));
    try {
      const databaseUrl = `sqlite:${path.join(dir, 'herald.db')}`;
      await expect(settleSecret({ ...config(), databaseUrl }, testDb.db, logger)).rejects.toThrow(
        `The key file ${path.join(dir, 'herald.key')} is missing, and the database holds credentials encrypted with it`,
      );
      expect(fs.existsSync(path.join(dir, 'herald.key'))).toBe(false);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
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
