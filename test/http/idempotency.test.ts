import { beforeEach, describe, expect, it } from 'vitest';
import { type TestApp, useTestApp } from '../helpers/app.js';
import { IDEMPOTENCY_LEASE_MS, IDEMPOTENCY_TTL_MS, idempotent, requestFingerprint } from '../../src/http/idempotency.js';
import { ApiError } from '../../src/errors.js';
import { writeTransaction } from '../../src/db/group-commit.js';
import { isPostgres } from '../../src/db/knex.js';
import { recordQueries } from '../helpers/queries.js';

const t = useTestApp();
// Made again before each test, in its fresh organizations.
beforeEach(async () => {
  await t.a.post('/v1/workflows', { name: 'Welcome', steps: [{ type: 'in_app', template: { content: 'Hi {{subscriber.firstName}}' } }] }).expect(201);
  await t.a.post('/v1/subscribers', { subscriberId: 'ada', firstName: 'Ada' }).expect(201);
});
beforeEach(() => t.clock.advance(1000));

const count = async (table: string, where: Record<string, unknown> = {}) =>
  Number((await t.db(table).where(where).count({ n: '*' }).first())!.n);
const keyRows = (key: string) => t.db('idempotency_keys').where({ key });

describe('Idempotency-Key on a write', () => {
  it('replays a create: the same status and body, marked as a replay, and nothing created twice', async () => {
    const first = await t.a.post('/v1/subscribers', { subscriberId: 'grace', firstName: 'Grace' }).set('Idempotency-Key', 'create-grace').expect(201);
    expect(first.headers['idempotency-replay']).toBeUndefined();
    // Changed since: the replay still answers what the first request answered.
    await t.a.put('/v1/subscribers/grace', { firstName: 'Grace H.' }).expect(200);
    t.clock.advance(60_000);

    const again = await t.a.post('/v1/subscribers', { subscriberId: 'grace', firstName: 'Grace' }).set('Idempotency-Key', 'create-grace').expect(201);
    expect(again.headers['idempotency-replay']).toBe('true');
    expect(again.body).toEqual(first.body);
    expect(await count('subscribers', { subscriber_id: 'grace' })).toBe(1);
    const [row] = await keyRows('create-grace');
    expect(row).toMatchObject({ environment_id: t.environments.a, state: 'done', response_status: 201 });
  });

  it('matches the body whatever the order of its fields', async () => {
    await t.a.post('/v1/subscribers', { subscriberId: 'kay', firstName: 'Kay', data: { a: 1, b: 2 } }).set('Idempotency-Key', 'order').expect(201);
    const again = await t.a.post('/v1/subscribers', { data: { b: 2, a: 1 }, firstName: 'Kay', subscriberId: 'kay' }).set('Idempotency-Key', 'order').expect(201);
    expect(again.headers['idempotency-replay']).toBe('true');
  });

  it('replays an error answer too, even once its cause is gone', async () => {
    const first = await t.a.post('/v1/subscribers', { subscriberId: 'ada' }).set('Idempotency-Key', 'dup-ada').expect(409);
    expect(first.body.message).toBe('Subscriber ada already exists');
    await t.a.post('/v1/subscribers', { subscriberId: 'temp' }).expect(201);
    await t.a.delete('/v1/subscribers/temp').expect(200);

    const again = await t.a.post('/v1/subscribers', { subscriberId: 'ada' }).set('Idempotency-Key', 'dup-ada').expect(409);
    expect(again.headers['idempotency-replay']).toBe('true');
    expect(again.body).toEqual(first.body);
  });

  it('rolls back what a rejected request wrote, and records the rejection', async () => {
    // An unknown time zone is a 422; the subscriber must not exist afterwards.
    await t.a.post('/v1/subscribers', { subscriberId: 'mars', timezone: 'Mars/Base' }).set('Idempotency-Key', 'mars').expect(422);
    await t.a.get('/v1/subscribers/mars').expect(404);
    const again = await t.a.post('/v1/subscribers', { subscriberId: 'mars', timezone: 'Mars/Base' }).set('Idempotency-Key', 'mars').expect(422);
    expect(again.headers['idempotency-replay']).toBe('true');
  });

  it('records a 400 for a body that breaks the schema: replayed, and the key not used again for another body', async () => {
    const first = await t.a.post('/v1/events/trigger', { name: 'welcome' }).set('Idempotency-Key', 'no-to').expect(400);
    expect(first.headers['idempotency-replay']).toBeUndefined();
    const again = await t.a.post('/v1/events/trigger', { name: 'welcome' }).set('Idempotency-Key', 'no-to').expect(400);
    expect(again.headers['idempotency-replay']).toBe('true');
    expect(again.body).toEqual(first.body);
    await t.a.post('/v1/events/trigger', { name: 'welcome', to: 'ada' }).set('Idempotency-Key', 'no-to').expect(422);
    expect(await count('events', { transaction_id: 'no-to' })).toBe(0);
    expect(await keyRows('no-to')).toMatchObject([{ state: 'done', response_status: 400 }]);
  });

  it('records nothing for a request refused before it is looked at: an invalid key, or a body that cannot be stored', async () => {
    const long = 'k'.repeat(256);
    await t.a.post('/v1/events/trigger', { name: 'welcome', to: 'ada' }).set('Idempotency-Key', long).expect(400);
    await t.a.post('/v1/subscribers', { subscriberId: 'nul', firstName: 'a\u0000b' }).set('Idempotency-Key', 'nul').expect(400);
    expect(await t.db('idempotency_keys').whereIn('key', [long, 'nul']).select('key')).toEqual([]);
  });

  it('replays a bodiless answer (a topic deleted twice is 204 both times)', async () => {
    await t.a.post('/v1/topics', { topicKey: 'brief', name: 'Brief' }).expect(201);
    await t.a.delete('/v1/topics/brief').set('Idempotency-Key', 'del-brief').expect(204);
    const again = await t.a.delete('/v1/topics/brief').set('Idempotency-Key', 'del-brief').expect(204);
    expect(again.headers['idempotency-replay']).toBe('true');
    await t.a.delete('/v1/topics/brief').expect(404);
  });

  it('answers 422 naming the key when it comes back with another body or path, and acts on neither', async () => {
    await t.a.post('/v1/subscribers', { subscriberId: 'linus' }).set('Idempotency-Key', 'k-linus').expect(201);
    const otherBody = await t.a.post('/v1/subscribers', { subscriberId: 'linus2' }).set('Idempotency-Key', 'k-linus').expect(422);
    expect(otherBody.body.message).toContain('Idempotency-Key "k-linus"');
    // Named as a schema's refusal of the header names it: headers are case-insensitive, and lower case.
    expect(otherBody.body.details).toEqual([{ field: 'header/idempotency-key', message: 'was already used for a different request' }]);
    expect(otherBody.headers['idempotency-replay']).toBeUndefined();
    await t.a.put('/v1/subscribers/linus', { firstName: 'L' }).set('Idempotency-Key', 'k-linus').expect(422);
    await t.a.get('/v1/subscribers/linus2').expect(404);
    expect((await t.a.get('/v1/subscribers/linus').expect(200)).body.data).not.toHaveProperty('firstName');
  });

  it('answers 409 with Retry-After while the first request runs, and lets a retry take over an abandoned one', async () => {
    const body = { subscriberId: 'busy' };
    const now = t.clock.now();
    await t.db('idempotency_keys').insert({
      environment_id: t.environments.a,
      key: 'in-flight',
      fingerprint: requestFingerprint({ method: 'POST', path: '/v1/subscribers', body }),
      token: 'another-request',
      state: 'running',
      created_at: now.toISOString(),
      locked_until: new Date(now.getTime() + IDEMPOTENCY_LEASE_MS).toISOString(),
      expires_at: new Date(now.getTime() + IDEMPOTENCY_TTL_MS).toISOString(),
    });
    const res = await t.a.post('/v1/subscribers', body).set('Idempotency-Key', 'in-flight').expect(409);
    expect(res.headers['retry-after']).toBe('1');
    expect(res.body.message).toContain('Idempotency-Key "in-flight"');
    await t.a.get('/v1/subscribers/busy').expect(404);

    // Its process died: once the claim has run out, a retry runs the request.
    t.clock.advance(IDEMPOTENCY_LEASE_MS);
    const retry = await t.a.post('/v1/subscribers', body).set('Idempotency-Key', 'in-flight').expect(201);
    expect(retry.headers['idempotency-replay']).toBeUndefined();
    expect((await keyRows('in-flight'))[0]).toMatchObject({ state: 'done', response_status: 201 });
  });

  it('keeps keys per environment: the same key elsewhere is unrelated', async () => {
    await t.a.post('/v1/subscribers', { subscriberId: 'env-1' }).set('Idempotency-Key', 'shared').expect(201);
    const production = await t.aProduction.post('/v1/subscribers', { subscriberId: 'env-2' }).set('Idempotency-Key', 'shared').expect(201);
    expect(production.headers['idempotency-replay']).toBeUndefined();
    const other = await t.b.post('/v1/subscribers', { subscriberId: 'env-1' }).set('Idempotency-Key', 'shared').expect(201);
    expect(other.headers['idempotency-replay']).toBeUndefined();
    await t.aProduction.get('/v1/subscribers/env-2').expect(200);
    await t.b.get('/v1/subscribers/env-1').expect(200);
    expect(await keyRows('shared')).toHaveLength(3);
  });

  it('forgets a key after 24 hours, deleting the expired record', async () => {
    // Records an earlier day left: one of this environment, one of another organization's.
    await t.a.post('/v1/subscribers', { subscriberId: 'grace', firstName: 'Grace' }).set('Idempotency-Key', 'create-grace').expect(201);
    await t.b.post('/v1/subscribers', { subscriberId: 'env-1' }).set('Idempotency-Key', 'shared').expect(201);
    t.clock.advance(1000);
    await t.a.post('/v1/subscribers', { subscriberId: 'day-1' }).set('Idempotency-Key', 'daily').expect(201);
    t.clock.advance(IDEMPOTENCY_TTL_MS - 2000);
    await t.a.post('/v1/subscribers', { subscriberId: 'day-1' }).set('Idempotency-Key', 'daily').expect(201);
    await t.a.post('/v1/subscribers', { subscriberId: 'day-2' }).set('Idempotency-Key', 'daily').expect(422);

    t.clock.advance(2000);
    const fresh = await t.a.post('/v1/subscribers', { subscriberId: 'day-2' }).set('Idempotency-Key', 'daily').expect(201);
    expect(fresh.headers['idempotency-replay']).toBeUndefined();
    // Records of this environment that expired meanwhile (every key above is older than a day) are gone.
    const expired = () => t.db('idempotency_keys').where('expires_at', '<=', t.clock.now().toISOString());
    expect(await expired().where({ environment_id: t.environments.a })).toHaveLength(0);
    expect(await expired().where({ environment_id: t.environments.b })).toHaveLength(1);
    expect(await keyRows('create-grace').where({ environment_id: t.environments.a })).toHaveLength(0);
  });

  it('is ignored on GET', async () => {
    const first = await t.a.get('/v1/subscribers/ada').set('Idempotency-Key', 'read').expect(200);
    await t.a.put('/v1/subscribers/ada', { lastName: 'Lovelace' }).expect(200);
    const second = await t.a.get('/v1/subscribers/ada').set('Idempotency-Key', 'read').expect(200);
    expect(second.headers['idempotency-replay']).toBeUndefined();
    expect(second.body.data.lastName).toBe('Lovelace');
    expect(first.body.data).not.toHaveProperty('lastName');
    expect(await keyRows('read')).toHaveLength(0);
  });

  it('never triggers twice: a replayed trigger makes no second event or notification', async () => {
    const events = await count('events');
    const notifications = await count('notifications');
    const trigger = { name: 'welcome', to: 'ada' };
    const first = await t.a.post('/v1/events/trigger', trigger).set('Idempotency-Key', 'trigger-1').expect(201);
    const again = await t.a.post('/v1/events/trigger', trigger).set('Idempotency-Key', 'trigger-1').expect(201);
    expect(again.headers['idempotency-replay']).toBe('true');
    expect(again.body.data.transactionId).toBe(first.body.data.transactionId);
    expect(await count('events')).toBe(events + 1);
    expect(await count('notifications')).toBe(notifications + 1);
  });

  it('makes exactly one write when requests with one key arrive together', async () => {
    const events = await count('events');
    const send = () => t.a.post('/v1/events/trigger', { name: 'welcome', to: 'ada' }).set('Idempotency-Key', 'together');
    const answers = await Promise.all([send(), send(), send(), send()]);
    expect(await count('events')).toBe(events + 1);

    const fresh = answers.filter((r) => r.status === 201 && r.headers['idempotency-replay'] === undefined);
    expect(fresh).toHaveLength(1);
    for (const r of answers) {
      if (r === fresh[0]) continue;
      if (r.status === 409) expect(r.headers['retry-after']).toBe('1');
      else expect({ status: r.status, replay: r.headers['idempotency-replay'], body: r.body }).toEqual({ status: 201, replay: 'true', body: fresh[0].body });
    }
    const subscribers = await Promise.all(
      [1, 2, 3].map(() => t.a.post('/v1/subscribers', { subscriberId: 'racer' }).set('Idempotency-Key', 'together-2')),
    );
    expect(await count('subscribers', { subscriber_id: 'racer', environment_id: t.environments.a })).toBe(1);
    expect(subscribers.filter((r) => r.status === 201 && r.headers['idempotency-replay'] === undefined)).toHaveLength(1);
    expect(subscribers.every((r) => r.status === 201 || r.status === 409)).toBe(true);
  });

  it('frees the key after a 500, so the retry runs the request', async () => {
    await t.db.schema.renameTable('topics', 'topics_away');
    try {
      await t.a.post('/v1/topics', { topicKey: 'flaky', name: 'Flaky' }).set('Idempotency-Key', 'flaky').expect(500);
    } finally {
      await t.db.schema.renameTable('topics_away', 'topics');
    }
    expect(await keyRows('flaky')).toHaveLength(0);
    const retry = await t.a.post('/v1/topics', { topicKey: 'flaky', name: 'Flaky' }).set('Idempotency-Key', 'flaky').expect(201);
    expect(retry.headers['idempotency-replay']).toBeUndefined();
    await t.a.get('/v1/topics/flaky').expect(200);
  });
});

describe('idempotent()', () => {
  const request = (key: string) => ({ environmentId: t.environments.a, key, method: 'POST', path: '/v1/test', body: { n: 1 } });
  const insertTopic = (db: TestApp['db'], key: string) =>
    db('topics').insert({ id: key.padEnd(24, '0').slice(0, 24), environment_id: t.environments.a, topic_key: key, name: key, created_at: '2026-01-01T00:00:00.000Z', updated_at: '2026-01-01T00:00:00.000Z' });

  it('commits the write and its record together, and rolls both back when the operation fails', async () => {
    await expect(
      idempotent(t.deps, request('unit-crash'), async (deps) => {
        await insertTopic(deps.db, 'unit-crash');
        throw new Error('boom');
      }),
    ).rejects.toThrow('boom');
    expect(await t.db('topics').where({ topic_key: 'unit-crash' })).toHaveLength(0);
    expect(await keyRows('unit-crash')).toHaveLength(0);

    const reply = await idempotent(t.deps, request('unit-crash'), async (deps) => {
      await insertTopic(deps.db, 'unit-crash');
      return { status: 201, body: { ok: true } };
    });
    expect(reply).toEqual({ status: 201, body: { ok: true } });
    expect(await t.db('topics').where({ topic_key: 'unit-crash' })).toHaveLength(1);
  });

  it("nests the operation's own transactions as savepoints", async () => {
    const reply = await idempotent(t.deps, request('unit-nested'), async (deps) => {
      await deps.db.transaction((trx) => insertTopic(trx, 'unit-nested-1'));
      await deps.db
        .transaction(async (trx) => {
          await insertTopic(trx, 'unit-nested-2');
          throw new ApiError(409, 'inner');
        })
        .catch(() => undefined);
      return { status: 200, body: {} };
    });
    expect(reply.status).toBe(200);
    expect(await t.db('topics').whereIn('topic_key', ['unit-nested-1', 'unit-nested-2']).pluck('topic_key')).toEqual(['unit-nested-1']);
  });

  it('rolls back a request whose claim was taken over meanwhile, and answers 409', async () => {
    await expect(
      idempotent(t.deps, request('unit-lost'), async (deps) => {
        await insertTopic(deps.db, 'unit-lost');
        // Another request took the key over (this one ran past its claim).
        await deps.db('idempotency_keys').where({ key: 'unit-lost' }).update({ token: 'someone-else' });
        return { status: 201, body: {} };
      }),
    ).rejects.toMatchObject({ status: 409 });
    expect(await t.db('topics').where({ topic_key: 'unit-lost' })).toHaveLength(0);
  });

  // "An Idempotency-Key must not change which write path a request takes": a keyed write commits
  // through writeTransaction like any other, so on SQLite writes that arrive together, keyed or
  // not, share commits (group-commit.ts); run in a transaction of its own, each keyed write would
  // commit alone, ten commits at least for ten keyed writes.
  it('takes the write path of a write without a key: keyed writes arriving together share commits on SQLite', async () => {
    const keys = Array.from({ length: 10 }, (_, i) => `unit-group-${i}`);
    const commits = recordQueries(t.db, /^commit/i);
    const replies = await Promise.all([
      ...keys.map((key) =>
        idempotent(t.deps, request(key), async (deps) => {
          await insertTopic(deps.db, key);
          return { status: 201, body: { key } };
        }),
      ),
      ...keys.map((key) => writeTransaction(t.db, (trx) => insertTopic(trx, `${key}-plain`))),
    ]);
    const commitCount = commits.stop().length;
    expect(replies.slice(0, keys.length)).toEqual(keys.map((key) => ({ status: 201, body: { key } })));
    expect(await t.db('topics').whereIn('topic_key', keys).count({ n: '*' }).first()).toMatchObject({ n: 10 });
    expect(await t.db('idempotency_keys').whereIn('key', keys).where({ state: 'done' }).pluck('key')).toHaveLength(10);
    if (isPostgres(t.db)) expect(commitCount).toBe(20);
    else expect(commitCount).toBeLessThan(keys.length);
  });
});
