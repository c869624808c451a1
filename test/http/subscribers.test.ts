import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { countTurns } from '../helpers/turns.js';
import { startTestApp, type TestApp, useTestApp } from '../helpers/app.js';
import { createSubscriber } from '../helpers/factories.js';
import { writeTransaction } from '../../src/db/group-commit.js';
import { DELETED_AT_ONCE } from '../../src/db/delete-in-parts.js';
import { subscriberKey } from '../../src/db/repos/subscribers.js';
import { deliverInboxMessages } from '../../src/engine/inbox.js';
import { deleteSubscriber } from '../../src/engine/subscribers.js';
import { newId } from '../../src/ids.js';

const t = useTestApp();

const ada = {
  subscriberId: 'ada',
  email: 'ada@example.com',
  firstName: 'Ada',
  lastName: 'Lovelace',
  phone: '+447700900123',
  avatar: 'https://example.com/ada.png',
  locale: 'en-GB',
  timezone: 'Europe/London',
  data: { plan: 'pro', tags: ['math'] },
};

describe('POST /subscribers (createSubscriber)', () => {
  it('creates a subscriber with every profile field and answers 201 with it', async () => {
    const res = await t.a.post('/v1/subscribers', ada).expect(201);
    expect(res.body.data).toMatchObject({ ...ada, channels: [], deleted: false, _environmentId: t.environments.a });
    expect(res.body.data.createdAt).toBe(t.clock.now().toISOString());
  });

  it('creates a subscriber from its id alone, leaving absent fields out rather than null', async () => {
    const res = await t.a.post('/v1/subscribers', { subscriberId: 'bare' }).expect(201);
    expect(res.body.data).not.toHaveProperty('email');
    expect(res.body.data).not.toHaveProperty('firstName');
    expect(res.body.data.data).toEqual({});
  });

  it('rejects a subscriberId that already exists with 409 and leaves the first one unchanged', async () => {
    await createSubscriber(t.a, ada);
    const res = await t.a.post('/v1/subscribers', { subscriberId: 'ada', firstName: 'Impostor' }).expect(409);
    expect(res.body.message).toBe('Subscriber ada already exists');
    expect((await t.a.get('/v1/subscribers/ada').expect(200)).body.data.firstName).toBe('Ada');
  });

  it('rejects a malformed email with 400 naming the field', async () => {
    const res = await t.a.post('/v1/subscribers', { subscriberId: 'x1', email: 'not-an-email' }).expect(400);
    expect(res.body.details).toEqual([{ field: 'body/email', message: 'must match format "email"' }]);
  });

  it('rejects unknown fields, a missing subscriberId and a phone not in E.164 form with 400', async () => {
    const res = await t.a.post('/v1/subscribers', { nickname: 'x', phone: '0770 090' }).expect(400);
    const fields = res.body.details.map((d: { field: string }) => d.field);
    expect(fields).toEqual(expect.arrayContaining(['body/nickname', 'body/subscriberId', 'body/phone']));
  });

  it('rejects an unknown time zone with 422', async () => {
    const res = await t.a.post('/v1/subscribers', { subscriberId: 'x2', timezone: 'Mars/Olympus_Mons' }).expect(422);
    expect(res.body.details[0].field).toBe('body/timezone');
    await t.a.get('/v1/subscribers/x2').expect(404);
  });

  it('accepts the same subscriberId in another environment', async () => {
    await t.aProduction.post('/v1/subscribers', { subscriberId: 'ada' }).expect(201);
  });
});

describe('GET /subscribers/{subscriberId} (getSubscriber)', () => {
  beforeEach(async () => {
    await createSubscriber(t.a, ada);
  });

  it('returns the subscriber', async () => {
    const res = await t.a.get('/v1/subscribers/ada').expect(200);
    expect(res.body.data.subscriberId).toBe('ada');
  });

  it('answers a conditional request 200 with the subscriber: the contract lists no 304 and gives no ETag', async () => {
    const first = await t.a.get('/v1/subscribers/ada').expect(200);
    expect(first.headers.etag).toBeUndefined();
    // Express would answer 304 with no body to these, the first one for any response at all.
    for (const condition of ['*', 'W/"anything"']) {
      const res = await t.a.get('/v1/subscribers/ada').set('If-None-Match', condition).expect(200);
      expect(res.body).toEqual(first.body);
    }
  });

  it('answers 404 for an unknown subscriberId', async () => {
    const res = await t.a.get('/v1/subscribers/nobody').expect(404);
    expect(res.body.message).toBe('Subscriber nobody not found');
  });

  it('reads ids with reserved characters when they are URL-encoded', async () => {
    const id = 'user@example.com/with space?&#';
    await t.a.post('/v1/subscribers', { subscriberId: id }).expect(201);
    const res = await t.a.get(`/v1/subscribers/${encodeURIComponent(id)}`).expect(200);
    expect(res.body.data.subscriberId).toBe(id);
  });

  it('rejects an id longer than 255 characters with 400', async () => {
    await t.a.get(`/v1/subscribers/${'x'.repeat(256)}`).expect(400);
  });

  it("gives a key of another environment 404 for this environment's subscriber", async () => {
    await t.aProduction.post('/v1/subscribers', { subscriberId: 'only-in-production' }).expect(201);
    await t.a.get('/v1/subscribers/only-in-production').expect(404);
    await t.b.get('/v1/subscribers/only-in-production').expect(404);
  });
});

describe('PUT /subscribers/{subscriberId} (updateSubscriber)', () => {
  beforeEach(async () => {
    await createSubscriber(t.a, ada);
  });

  it('changes the given fields, keeps the others, and moves updatedAt', async () => {
    t.clock.advance(60_000);
    const res = await t.a.put('/v1/subscribers/ada', { firstName: 'Augusta', data: { plan: 'free' } }).expect(200);
    expect(res.body.data).toMatchObject({ firstName: 'Augusta', lastName: 'Lovelace', email: ada.email, data: { plan: 'free' } });
    expect(res.body.data.updatedAt).toBe(t.clock.now().toISOString());
    expect(res.body.data.createdAt).not.toBe(res.body.data.updatedAt);
  });

  it('clears a field given as null', async () => {
    expect((await t.a.get('/v1/subscribers/ada').expect(200)).body.data.phone).toBe(ada.phone);
    const res = await t.a.put('/v1/subscribers/ada', { phone: null }).expect(200);
    expect(res.body.data).not.toHaveProperty('phone');
  });

  it('rejects an empty body and an attempt to change subscriberId with 400', async () => {
    await t.a.put('/v1/subscribers/ada', {}).expect(400);
    await t.a.put('/v1/subscribers/ada', { subscriberId: 'other' }).expect(400);
  });

  it('answers 404 for an unknown subscriber, and for one of another environment', async () => {
    await t.a.put('/v1/subscribers/nobody', { firstName: 'X' }).expect(404);
    await t.b.put('/v1/subscribers/ada', { firstName: 'X' }).expect(404);
    expect((await t.a.get('/v1/subscribers/ada')).body.data.firstName).toBe('Ada');
  });

  it('rejects an unknown time zone with 422 and changes nothing', async () => {
    await t.a.put('/v1/subscribers/ada', { firstName: 'Nope', timezone: 'Nowhere/Land' }).expect(422);
    expect((await t.a.get('/v1/subscribers/ada')).body.data.firstName).toBe('Ada');
  });
});

describe('DELETE /subscribers/{subscriberId} (deleteSubscriber)', () => {
  beforeEach(async () => {
    await createSubscriber(t.a, ada);
  });

  it('deletes the subscriber and answers with an acknowledgement', async () => {
    await t.a.post('/v1/subscribers', { subscriberId: 'short-lived' }).expect(201);
    const res = await t.a.delete('/v1/subscribers/short-lived').expect(200);
    expect(res.body).toEqual({ data: { acknowledged: true, status: 'deleted' } });
    await t.a.get('/v1/subscribers/short-lived').expect(404);
  });

  it('deletes a subscriber of a large inbox a part at a time, letting the event loop turn between the parts, and leaves other inboxes alone', async () => {
    const parts = 10;
    await createSubscriber(t.a, { subscriberId: 'reader' });
    const inboxOf = async (subscriberId: string, messages: number) => {
      const key = (await subscriberKey(t.db, t.environments.a, subscriberId))!;
      const message = () => ({ environmentId: t.environments.a, subscriberKey: key, subscriberId, notificationId: newId(), jobId: newId(), transactionId: 'tx', workflowKey: 'wf', content: 'hello' });
      // An event each for the inbox streams, as many as the messages.
      await writeTransaction(t.db, (trx) => deliverInboxMessages(trx, Array.from({ length: messages }, message), t.clock.now()));
      return key;
    };
    const reader = await inboxOf('reader', parts * DELETED_AT_ONCE);
    const other = await inboxOf('ada', 3);
    expect(await t.db('inbox_events').where('subscriber_key', reader).count({ n: '*' })).toEqual([{ n: parts * DELETED_AT_ONCE }]);

    // Counts the loop's turns while the delete runs: one statement for the whole inbox (SQLite
    // runs it on the loop) lets none happen in between.
    const turns = countTurns();
    await deleteSubscriber(t.deps, t.environments.a, 'reader');
    const turnsTaken = turns.stop();

    expect(turnsTaken).toBeGreaterThanOrEqual(parts - 1);
    await t.a.get('/v1/subscribers/reader').expect(404);
    for (const table of ['messages', 'inbox_events', 'inbox_counts']) {
      expect(await t.db(table).where('subscriber_key', reader).count({ n: '*' })).toEqual([{ n: 0 }]);
    }
    expect(await t.db('messages').where('subscriber_key', other).count({ n: '*' })).toEqual([{ n: 3 }]);
    expect(await t.db('inbox_events').where('subscriber_key', other).count({ n: '*' })).toEqual([{ n: 3 }]);
  });

  it('answers 404 the second time, and for a subscriber of another environment', async () => {
    await createSubscriber(t.a, { subscriberId: 'short-lived' });
    await t.a.delete('/v1/subscribers/short-lived').expect(200);
    await t.a.delete('/v1/subscribers/short-lived').expect(404);
    await t.b.delete('/v1/subscribers/ada').expect(404);
    await t.a.get('/v1/subscribers/ada').expect(200);
  });
});

describe('GET /subscribers (listSubscribers)', () => {
  let list: TestApp;
  beforeAll(async () => {
    list = await startTestApp();
    for (let i = 0; i < 23; i++) {
      list.clock.advance(1000);
      await list.a.post('/v1/subscribers', { subscriberId: `s${String(i).padStart(2, '0')}` }).expect(201);
    }
    await list.b.post('/v1/subscribers', { subscriberId: 'other-org' }).expect(201);
  });
  afterEach(async () => list.assertContract());
  afterAll(async () => list?.close());

  it('answers the envelope with the first 10, oldest first, and the exact total', async () => {
    const res = await list.a.get('/v1/subscribers').expect(200);
    expect(res.body).toMatchObject({ totalCount: 23, page: 0, pageSize: 10, hasMore: true });
    expect(res.body.data.map((s: { subscriberId: string }) => s.subscriberId)).toEqual(
      Array.from({ length: 10 }, (_, i) => `s${String(i).padStart(2, '0')}`),
    );
  });

  it('walks every page without gaps or repeats', async () => {
    const seen: string[] = [];
    for (let page = 0; ; page++) {
      const res = await list.a.get(`/v1/subscribers?page=${page}&limit=7`).expect(200);
      seen.push(...res.body.data.map((s: { subscriberId: string }) => s.subscriberId));
      if (!res.body.hasMore) break;
    }
    expect(seen).toHaveLength(23);
    expect(new Set(seen).size).toBe(23);
  });

  it('answers the last page with hasMore false', async () => {
    const res = await list.a.get('/v1/subscribers?page=2&limit=10').expect(200);
    expect(res.body).toMatchObject({ totalCount: 23, page: 2, pageSize: 10, hasMore: false });
    expect(res.body.data).toHaveLength(3);
  });

  it('answers a page past the end with no items and hasMore false', async () => {
    const res = await list.a.get('/v1/subscribers?page=50').expect(200);
    expect(res.body).toEqual({ data: [], totalCount: 23, page: 50, pageSize: 10, hasMore: false });
  });

  it('accepts limit 1 and 100, and pageSize as another name for limit', async () => {
    expect((await list.a.get('/v1/subscribers?limit=1').expect(200)).body.data).toHaveLength(1);
    expect((await list.a.get('/v1/subscribers?limit=100').expect(200)).body.data).toHaveLength(23);
    expect((await list.a.get('/v1/subscribers?pageSize=5').expect(200)).body.pageSize).toBe(5);
  });

  it('rejects limit 0, limit 101, a negative page and a non-number with 400 naming the parameter', async () => {
    expect((await list.a.get('/v1/subscribers?limit=0').expect(400)).body.details[0].field).toBe('query/limit');
    expect((await list.a.get('/v1/subscribers?limit=101').expect(400)).body.details[0].field).toBe('query/limit');
    expect((await list.a.get('/v1/subscribers?page=-1').expect(400)).body.details[0].field).toBe('query/page');
    expect((await list.a.get('/v1/subscribers?page=two').expect(400)).body.details[0].field).toBe('query/page');
  });

  it.each(['0x1', '1e1', '1.0', '%201', '1%20', '+1', '', '0b1'])('rejects a page or limit written as %j, which is no whole number in digits, with 400', async (spelling) => {
    for (const name of ['page', 'limit', 'pageSize']) {
      const res = await list.a.get(`/v1/subscribers?${name}=${spelling}`).expect(400);
      expect(res.body.details).toContainEqual({ field: `query/${name}`, message: expect.stringContaining('digits') });
    }
  });

  it('takes a page and limit written with a leading zero as the number', async () => {
    expect((await list.a.get('/v1/subscribers?page=00&limit=01').expect(200)).body).toMatchObject({ page: 0, pageSize: 1 });
  });

  it("lists only the key's own environment", async () => {
    const res = await list.b.get('/v1/subscribers').expect(200);
    expect(res.body.totalCount).toBe(1);
    expect(res.body.data[0].subscriberId).toBe('other-org');
    expect((await list.aProduction.get('/v1/subscribers').expect(200)).body.totalCount).toBe(0);
  });
});

describe('GET /subscribers (listSubscribers) of large subscribers', () => {
  it('answers a page whose subscribers carry large data whole, in order, in pieces', async () => {
    // Each about 700 KB: the page is read, made and written a slice at a time (db/chunks.ts SLICE_CHARS, http/send-json.ts).
    const data = (i: number) => ({ index: i, items: Array.from({ length: 20_000 }, (_, j) => ({ j, text: 'abcdefghijklmnopqrstu' })) });
    for (let i = 0; i < 4; i++) {
      t.clock.advance(1000);
      await t.a.post('/v1/subscribers', { subscriberId: `large-${i}`, data: data(i) }).expect(201);
    }
    const res = await t.a.get('/v1/subscribers?limit=100').expect(200);
    expect(res.headers['transfer-encoding']).toBe('chunked');
    expect(res.body).toMatchObject({ totalCount: 4, page: 0, pageSize: 100, hasMore: false });
    expect(res.body.data.map((s: { subscriberId: string }) => s.subscriberId)).toEqual(['large-0', 'large-1', 'large-2', 'large-3']);
    res.body.data.forEach((s: { data: unknown }, i: number) => expect(s.data).toEqual(data(i)));
    // Alone, with its topics after it, and as an update answers it: its stored text spliced in.
    await t.a.post('/v1/topics', { key: 'large-topic', name: 'Large' }).expect(201);
    await t.a.post('/v1/topics/large-topic/subscribers', { subscribers: ['large-2'] }).expect(200);
    const alone = await t.a.get('/v1/subscribers/large-2?includeTopics=true').expect(200);
    expect(alone.body.data).toMatchObject({ subscriberId: 'large-2', data: data(2), topics: ['large-topic'] });
    const updated = await t.a.put('/v1/subscribers/large-2', { firstName: 'Ada' }).expect(200);
    expect(updated.body.data).toMatchObject({ subscriberId: 'large-2', firstName: 'Ada', data: data(2) });
  });
});
