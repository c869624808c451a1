import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { countTurns } from '../helpers/turns.js';
import { createTestDb, testDatabaseUrl, type TestDb } from '../helpers/db.js';
import { createDb, type Db } from '../../src/db/knex.js';
import { writeTransaction } from '../../src/db/group-commit.js';
import { createOrganization } from '../../src/db/repos/accounts.js';
import { insertSubscriber, subscriberKey } from '../../src/db/repos/subscribers.js';
import { CHANGED_AT_ONCE, eventsAfter, eventsAfterMany, readCounts } from '../../src/db/repos/inbox.js';
import { listenInbox, originOf } from '../../src/db/inbox-bus.js';
import { startInboxListener } from '../../src/db/inbox-listener.js';
import { changeInboxMessages, deliverInboxMessages } from '../../src/engine/inbox.js';
import { newId } from '../../src/ids.js';
import type { NewMessage } from '../../src/db/repos/messages.js';

let testDb: TestDb;
let env: string;
const keys: string[] = [];
beforeAll(async () => {
  testDb = await createTestDb();
  env = (await createOrganization(testDb.db, { name: 'Inbox', plan: 'enterprise', environments: ['development'] })).environmentIds.development;
  for (const id of ['s0', 's1', 's2']) {
    await insertSubscriber(testDb.db, env, { subscriberId: id }, new Date());
    keys.push((await subscriberKey(testDb.db, env, id))!);
  }
});
afterAll(async () => testDb?.close());

const message = (i: number, n = 0): NewMessage => ({
  environmentId: env,
  subscriberKey: keys[i],
  subscriberId: `s${i}`,
  notificationId: newId(),
  jobId: `${newId()}${n}`.slice(0, 24),
  transactionId: 'tx',
  workflowKey: 'wf',
  content: `m${n}`,
});

const deliver = (db: Db, messages: NewMessage[]) => writeTransaction(db, (trx) => deliverInboxMessages(trx, messages, new Date()));

describe('the inbox counts and events', () => {
  it('numbers each subscriber’s events without a gap under concurrent writers, with exact counts', async () => {
    await Promise.all(Array.from({ length: 20 }, (_, n) => deliver(testDb.db, [message(0, n), message(1, n)])));
    for (const key of keys.slice(0, 2)) {
      const events = await eventsAfter(testDb.db, key, 0, 100);
      expect(events.map((e) => e.seq)).toEqual(Array.from({ length: 20 }, (_, i) => i + 1));
      // Each event carries the counts as they were after it, so they rise with the numbers.
      expect(events.map((e) => JSON.parse(e.payload).counts.total)).toEqual(Array.from({ length: 20 }, (_, i) => i + 1));
      expect(await readCounts(testDb.db, key)).toEqual({ unread: 20, unseen: 20, total: 20, archived: 0, seq: 20 });
    }
  });

  it('stores a job’s message once however often it is delivered, and counts it once', async () => {
    const once = message(2, 99);
    await deliver(testDb.db, [once]);
    await deliver(testDb.db, [once]);
    expect((await readCounts(testDb.db, keys[2])).total).toBe(1);
    expect(await eventsAfter(testDb.db, keys[2], 0, 10)).toHaveLength(1);
  });

  it('answers eventsAfterMany as one eventsAfter per subscriber does', async () => {
    const cursors = [
      { subscriberKey: keys[0], seq: 17 },
      { subscriberKey: keys[1], seq: 3 },
      { subscriberKey: keys[2], seq: 0 },
    ];
    const many = await eventsAfterMany(testDb.db, cursors);
    const one = (await Promise.all(cursors.map((c) => eventsAfter(testDb.db, c.subscriberKey, c.seq, 1000)))).flat();
    const order = (e: { subscriberKey: string; seq: number }) => `${e.subscriberKey}:${String(e.seq).padStart(6, '0')}`;
    expect(many.map(order).sort()).toEqual(one.map(order).sort());
    expect(many.length).toBe(3 + 17 + 1);
  });

  it('counts a bulk change once per message even when two run at once', async () => {
    await Promise.all([0, 1].map(() => writeTransaction(testDb.db, (trx) => changeInboxMessages(trx, env, keys[0], { read: true }, undefined, new Date()))));
    expect(await readCounts(testDb.db, keys[0])).toMatchObject({ unread: 0, unseen: 0, total: 20 });
  });

  it('changes thousands of messages a part at a time, letting the event loop turn between the parts, with the counts and one event of a single change', async () => {
    const parts = 10;
    await insertSubscriber(testDb.db, env, { subscriberId: 'crowd' }, new Date());
    const key = (await subscriberKey(testDb.db, env, 'crowd'))!;
    const of = (n: number): NewMessage => ({ ...message(0, n), subscriberKey: key, subscriberId: 'crowd' });
    await deliver(testDb.db, Array.from({ length: parts * CHANGED_AT_ONCE }, (_, n) => of(n)));
    const [upTo] = await testDb.db('messages').where('subscriber_key', key).orderBy([{ column: 'created_at', order: 'desc' }, { column: 'id', order: 'desc' }]).limit(1).select('created_at', 'id');
    await deliver(testDb.db, [of(-1), of(-2)]); // newer than the cursor: left alone
    const { seq } = await readCounts(testDb.db, key);

    // Counts the loop's turns while the change runs: one statement for every message (SQLite runs
    // it on the loop) lets none happen in between.
    const turns = countTurns();
    const seen = await writeTransaction(testDb.db, (trx) => changeInboxMessages(trx, env, key, { seen: true }, { createdAt: upTo.created_at, id: upTo.id }, new Date()));
    const turnsTaken = turns.stop();

    expect(turnsTaken).toBeGreaterThanOrEqual(parts - 1);
    const total = parts * CHANGED_AT_ONCE + 2;
    expect(seen).toEqual({ updated: parts * CHANGED_AT_ONCE, counts: { unread: total, unseen: 2, total, archived: 0 } });
    expect((await testDb.db('messages').where({ subscriber_key: key, seen: false }).pluck('content')).sort()).toEqual(['m-1', 'm-2']);
    const read = await writeTransaction(testDb.db, (trx) => changeInboxMessages(trx, env, key, { read: true }, undefined, new Date()));
    expect(read).toEqual({ updated: total, counts: { unread: 0, unseen: 0, total, archived: 0 } });
    const events = await eventsAfter(testDb.db, key, seq, 100);
    expect(events.map((e) => [e.type, JSON.parse(e.payload).counts])).toEqual([
      ['counts', seen.counts],
      ['counts', read.counts],
    ]);
  });
});

describe('the inbox bus', () => {
  it('tells its listeners after the commit, never for a rollback', async () => {
    const heard: Array<string[] | '*'> = [];
    const stop = listenInbox(testDb.db, (k) => heard.push(k));
    let seenInside = -1;
    await writeTransaction(testDb.db, async (trx) => {
      await deliverInboxMessages(trx, [message(2, 1)], new Date());
      seenInside = heard.length;
    });
    await new Promise((resolve) => setImmediate(resolve));
    expect(seenInside).toBe(0);
    expect(heard).toEqual([[keys[2]]]);
    await expect(
      writeTransaction(testDb.db, async (trx) => {
        await deliverInboxMessages(trx, [message(2, 2)], new Date());
        throw new Error('rolled back');
      }),
    ).rejects.toThrow('rolled back');
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(heard).toHaveLength(1);
    stop();
  });
});

describe.runIf(testDatabaseUrl())('the LISTEN connection of another process', () => {
  it('hears the subscribers a transaction committed through another database handle changed, in one notification', async () => {
    const other = createDb(testDb.url, { schema: testDb.schema });
    const heard: Array<string[] | '*'> = [];
    const stop = listenInbox(other, (k) => heard.push(k));
    const listener = startInboxListener(other, originOf(other));
    try {
      // The listener says `*` once it listens: everything committed before it is to be read.
      await expect.poll(() => heard.includes('*'), { timeout: 5000 }).toBe(true);
      heard.length = 0;
      await deliver(testDb.db, [message(0, 300), message(1, 300), message(2, 300)]);
      await expect.poll(() => heard.length, { timeout: 5000 }).toBe(1);
      expect([...(heard[0] as string[])].sort()).toEqual([...keys].sort());
    } finally {
      stop();
      await listener.close();
      await other.destroy();
    }
  });
});
