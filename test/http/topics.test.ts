import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { countTurns } from '../helpers/turns.js';
import { startTestApp, type Client, type TestApp, useTestApp } from '../helpers/app.js';
import { insertSubscriber } from '../../src/db/repos/subscribers.js';
import { createWorkflow, step } from '../helpers/factories.js';
import { JobRunner } from '../../src/engine/runner.js';
import { trigger } from '../../src/engine/trigger.js';
import type { Knex } from 'knex';
import { insertRows } from '../../src/db/insert-rows.js';
import { DELETED_AT_ONCE } from '../../src/db/delete-in-parts.js';
import { deleteTopic } from '../../src/engine/topics.js';
import { newId } from '../../src/ids.js';

const t = useTestApp();
// Made again before each test, in its fresh organizations.
beforeEach(async () => {
  // Subscribers created one second apart, so their internal ids (and so their order) are distinct.
  for (const subscriberId of ['ada', 'grace', 'alan', 'edsger', 'barbara']) {
    t.clock.advance(1000);
    await t.a.post('/v1/subscribers', { subscriberId }).expect(201);
  }
  await t.aProduction.post('/v1/subscribers', { subscriberId: 'ada' }).expect(201);
  await t.aProduction.post('/v1/subscribers', { subscriberId: 'only-in-production' }).expect(201);
  await t.b.post('/v1/subscribers', { subscriberId: 'only-in-b' }).expect(201);
});

const ids = (list: Array<{ subscriberId: string }>) => list.map((member) => member.subscriberId);

async function createTopic(client: Client, topicKey: string, subscribers: string[] = []): Promise<void> {
  await client.post('/v1/topics', { topicKey, name: `Topic ${topicKey}` }).expect(201);
  if (subscribers.length > 0) await client.post(`/v1/topics/${topicKey}/subscribers`, { subscribers }).expect(200);
}

describe('POST /topics (createTopic)', () => {
  it('creates an empty topic and answers 201 with it, its key under both names', async () => {
    t.clock.advance(1000);
    const res = await t.a.post('/v1/topics', { topicKey: 'watchers', name: 'Watchers' }).expect(201);
    expect(res.body).toEqual({
      data: {
        topicKey: 'watchers',
        key: 'watchers',
        name: 'Watchers',
        subscriberCount: 0,
        subscribers: [],
        _organizationId: expect.any(String),
        _environmentId: t.environments.a,
        createdAt: t.clock.now().toISOString(),
        updatedAt: t.clock.now().toISOString(),
      },
    });
  });

  it("accepts Novu's field name key in place of topicKey", async () => {
    const res = await t.a.post('/v1/topics', { key: 'novu-style', name: 'From the Novu SDK' }).expect(201);
    expect(res.body.data).toMatchObject({ topicKey: 'novu-style', key: 'novu-style', name: 'From the Novu SDK' });
    await t.a.get('/v1/topics/novu-style').expect(200);
  });

  it('rejects a key that already exists with 409, under either name, and leaves the first topic unchanged', async () => {
    await t.a.post('/v1/topics', { topicKey: 'watchers', name: 'Watchers' }).expect(201);
    let res = await t.a.post('/v1/topics', { topicKey: 'watchers', name: 'Impostor' }).expect(409);
    expect(res.body.message).toBe('Topic watchers already exists');
    res = await t.a.post('/v1/topics', { key: 'watchers', name: 'Impostor' }).expect(409);
    expect(res.body.message).toBe('Topic watchers already exists');
    expect((await t.a.get('/v1/topics/watchers').expect(200)).body.data.name).toBe('Watchers');
  });

  it('rejects a body with both topicKey and key, or with neither, with 400', async () => {
    await t.a.post('/v1/topics', { topicKey: 'both', key: 'both', name: 'Both' }).expect(400);
    await t.a.post('/v1/topics', { name: 'Neither' }).expect(400);
    await t.a.get('/v1/topics/both').expect(404);
  });

  it('rejects a missing name, an unknown field, a key with spaces and a key over 255 characters with 400', async () => {
    let res = await t.a.post('/v1/topics', { topicKey: 'nameless' }).expect(400);
    expect(res.body.details).toEqual(expect.arrayContaining([{ field: 'body/name', message: 'is required' }]));
    res = await t.a.post('/v1/topics', { topicKey: 'extra', name: 'Extra', colour: 'red' }).expect(400);
    expect(res.body.details).toEqual(expect.arrayContaining([{ field: 'body/colour', message: 'is not allowed' }]));
    res = await t.a.post('/v1/topics', { topicKey: 'with space', name: 'Spaced' }).expect(400);
    expect(res.body.details.map((d: { field: string }) => d.field)).toContain('body/topicKey');
    await t.a.post('/v1/topics', { topicKey: 'x'.repeat(256), name: 'Long' }).expect(400);
    await t.a.post('/v1/topics').expect(400);
  });

  it('accepts the same key in another environment and in another organization', async () => {
    await t.a.post('/v1/topics', { topicKey: 'watchers', name: 'Watchers' }).expect(201);
    const production = await t.aProduction.post('/v1/topics', { topicKey: 'watchers', name: 'Production watchers' }).expect(201);
    expect(production.body.data._environmentId).toBe(t.environments.aProduction);
    const other = await t.b.post('/v1/topics', { topicKey: 'watchers', name: 'B watchers' }).expect(201);
    expect(other.body.data._environmentId).toBe(t.environments.b);
    expect((await t.a.get('/v1/topics/watchers').expect(200)).body.data.name).toBe('Watchers');
  });
});

describe('GET /topics/{topicKey} (getTopic)', () => {
  beforeEach(async () => {
    await createTopic(t.a, 'get-me', ['grace', 'ada']);
    t.clock.advance(1000);
    await t.a.post('/v1/topics/get-me/subscribers', { subscribers: ['alan'] }).expect(200);
  });

  it('returns the topic with its exact member count and its members, oldest membership first', async () => {
    const res = await t.a.get('/v1/topics/get-me').expect(200);
    // ada and grace joined together (ada is the older subscriber), alan a second later.
    expect(res.body.data).toMatchObject({ topicKey: 'get-me', key: 'get-me', subscriberCount: 3, subscribers: ['ada', 'grace', 'alan'] });
  });

  it('answers 404 for an unknown topicKey', async () => {
    const res = await t.a.get('/v1/topics/nothing-here').expect(404);
    expect(res.body.message).toBe('Topic nothing-here not found');
  });

  it('rejects a key longer than 255 characters with 400', async () => {
    await t.a.get(`/v1/topics/${'x'.repeat(256)}`).expect(400);
  });

  it("gives a key of another environment 404 for this environment's topic", async () => {
    await t.aProduction.get('/v1/topics/get-me').expect(404);
    await t.b.get('/v1/topics/get-me').expect(404);
  });

  it('shows each environment its own topic under a shared key', async () => {
    await t.a.post('/v1/topics', { topicKey: 'watchers', name: 'Watchers' }).expect(201);
    await t.aProduction.post('/v1/topics', { topicKey: 'watchers', name: 'Production watchers' }).expect(201);
    await t.b.post('/v1/topics', { topicKey: 'watchers', name: 'B watchers' }).expect(201);
    expect((await t.aProduction.get('/v1/topics/watchers').expect(200)).body.data.name).toBe('Production watchers');
    expect((await t.b.get('/v1/topics/watchers').expect(200)).body.data.name).toBe('B watchers');
  });
});

describe('DELETE /topics/{topicKey} (deleteTopic)', () => {
  it('deletes the topic and its memberships, answers 204 with no body, and keeps the subscribers', async () => {
    await createTopic(t.a, 'short-lived', ['ada', 'grace']);
    const res = await t.a.delete('/v1/topics/short-lived').expect(204);
    expect(res.text).toBe('');
    await t.a.get('/v1/topics/short-lived').expect(404);
    await t.a.get('/v1/subscribers/ada').expect(200);
    await t.a.get('/v1/subscribers/grace').expect(200);
    // A new topic under the same key starts empty: the old memberships are gone.
    await createTopic(t.a, 'short-lived');
    expect((await t.a.get('/v1/topics/short-lived').expect(200)).body.data).toMatchObject({ subscriberCount: 0, subscribers: [] });
  });

  it('answers 409 with Retry-After while a fan-out of the topic is under way, and deletes it once every member is notified', async () => {
    await createTopic(t.a, 'announced', ['ada', 'grace', 'alan']);
    await createTopic(t.a, 'other', ['edsger']);
    await createWorkflow(t.a, { workflowId: 'announcement', steps: [step.inApp({ content: 'News' })] });
    const transactionId = (await t.a.post('/v1/events/trigger', { name: 'announcement', to: [{ type: 'Topic', topicKey: 'announced' }] }).expect(201)).body.data.transactionId;
    const res = await t.a.delete('/v1/topics/announced').set('Idempotency-Key', 'delete-announced').expect(409);
    expect(res.headers['retry-after']).toBe('5');
    expect(res.body.message).toContain('Topic announced is being fanned out to');
    // Another topic's deletion does not wait for it.
    await t.a.delete('/v1/topics/other').expect(204);
    await new JobRunner(t.deps).runUntilIdle();
    const notified = (await t.a.get(`/v1/notifications?transactionId=${transactionId}`).expect(200)).body.data.map((n: { subscriberId: string }) => n.subscriberId);
    expect(notified.sort()).toEqual(['ada', 'alan', 'grace']);
    // The 409 said to try again: it is not the key's answer for good, and the retry deletes.
    const retried = await t.a.delete('/v1/topics/announced').set('Idempotency-Key', 'delete-announced').expect(204);
    expect(retried.headers['idempotency-replay']).toBeUndefined();
  });

  it('refuses with 422 a trigger to a topic deleted after the trigger looked it up, rather than acknowledge a fan-out to nobody', async () => {
    await createTopic(t.a, 'vanishing', ['ada', 'grace']);
    await createWorkflow(t.a, { workflowId: 'vanishing-news', steps: [step.inApp({ content: 'News' })] });
    const { organization_id: organizationId } = await t.db('environments').where({ id: t.environments.a }).first('organization_id');
    // The delete commits between the trigger's look-up of the topic and its write.
    const db = new Proxy(t.db, {
      get(target, prop, receiver) {
        if (prop !== 'transaction') return Reflect.get(target, prop, receiver);
        return async (work: (trx: Knex.Transaction) => Promise<unknown>) => {
          await target('topics').where({ environment_id: t.environments.a, topic_key: 'vanishing' }).delete();
          return target.transaction(work);
        };
      },
    });
    const request = { name: 'vanishing-news', to: [{ type: 'Topic' as const, topicKey: 'vanishing' }] };
    await expect(trigger({ ...t.deps, db }, { organizationId, environmentId: t.environments.a }, request)).rejects.toMatchObject({
      status: 422,
      details: [{ field: 'body/to/0', message: 'topic vanishing not found' }],
    });
    expect(await t.db('events').where({ environment_id: t.environments.a }).first()).toBeUndefined();
  });

  it('deletes a topic of many members a part at a time, letting the event loop turn between the parts', async () => {
    const parts = 10;
    await createTopic(t.a, 'crowd');
    const topic = await t.db('topics').where({ environment_id: t.environments.a, topic_key: 'crowd' }).first('id');
    const at = t.clock.now().toISOString();
    const members = Array.from({ length: parts * DELETED_AT_ONCE }, (_, i) => ({
      id: newId(),
      environment_id: t.environments.a,
      subscriber_id: `crowd-${i}`,
      data: '{}',
      created_at: at,
      updated_at: at,
    }));
    await insertRows(t.db, 'subscribers', members);
    await insertRows(t.db, 'topic_subscribers', members.map((member) => ({ topic_id: topic.id, subscriber_id: member.id, created_at: at })));

    // Counts the loop's turns while the delete runs: one statement for every membership (SQLite
    // runs it on the loop) lets none happen in between.
    const turns = countTurns();
    await deleteTopic(t.deps, t.environments.a, 'crowd');
    const turnsTaken = turns.stop();

    expect(turnsTaken).toBeGreaterThanOrEqual(parts - 1);
    expect(await t.db('topic_subscribers').where('topic_id', topic.id).count({ n: '*' })).toEqual([{ n: 0 }]);
    expect((await t.a.get('/v1/subscribers?limit=1').expect(200)).body.totalCount).toBe(parts * DELETED_AT_ONCE + 5);
    await t.a.get('/v1/topics/crowd').expect(404);
  });

  it('answers 404 the second time', async () => {
    await createTopic(t.a, 'short-lived');
    await t.a.delete('/v1/topics/short-lived').expect(204);
    const res = await t.a.delete('/v1/topics/short-lived').expect(404);
    expect(res.body.message).toBe('Topic short-lived not found');
  });

  it('rejects a key longer than 255 characters with 400', async () => {
    await t.a.delete(`/v1/topics/${'x'.repeat(256)}`).expect(400);
  });

  it('answers 404 to a key of another environment and leaves the topic in place', async () => {
    await createTopic(t.a, 'keep-me', ['ada']);
    await t.aProduction.delete('/v1/topics/keep-me').expect(404);
    await t.b.delete('/v1/topics/keep-me').expect(404);
    expect((await t.a.get('/v1/topics/keep-me').expect(200)).body.data.subscriberCount).toBe(1);
  });

  it('deletes only the topic of its own environment when keys are shared', async () => {
    for (const client of [t.a, t.aProduction, t.b]) await createTopic(client, 'watchers');
    await t.b.delete('/v1/topics/watchers').expect(204);
    await t.a.get('/v1/topics/watchers').expect(200);
    await t.aProduction.get('/v1/topics/watchers').expect(200);
  });
});

describe('GET /topics/{topicKey}/subscribers (listTopicSubscribers)', () => {
  let addedAt: string[];
  beforeEach(async () => {
    t.clock.advance(1000);
    await createTopic(t.a, 'members', ['barbara', 'alan']);
    const first = t.clock.now().toISOString();
    t.clock.advance(1000);
    await t.a.post('/v1/topics/members/subscribers', { subscribers: ['ada'] }).expect(200);
    addedAt = [first, first, t.clock.now().toISOString()];
  });

  it('answers the envelope of members with the time each was added, in the order they were added', async () => {
    const res = await t.a.get('/v1/topics/members/subscribers').expect(200);
    expect(res.body).toEqual({
      data: [
        { subscriberId: 'alan', addedAt: addedAt[0] },
        { subscriberId: 'barbara', addedAt: addedAt[1] },
        { subscriberId: 'ada', addedAt: addedAt[2] },
      ],
      totalCount: 3,
      page: 0,
      pageSize: 10,
      hasMore: false,
    });
  });

  it('pages with limit, and with pageSize as another name for it', async () => {
    let res = await t.a.get('/v1/topics/members/subscribers?limit=2').expect(200);
    expect(res.body).toMatchObject({ totalCount: 3, page: 0, pageSize: 2, hasMore: true });
    expect(ids(res.body.data)).toEqual(['alan', 'barbara']);
    res = await t.a.get('/v1/topics/members/subscribers?page=1&pageSize=2').expect(200);
    expect(res.body).toMatchObject({ totalCount: 3, page: 1, pageSize: 2, hasMore: false });
    expect(ids(res.body.data)).toEqual(['ada']);
  });

  it('answers an empty topic with an empty page', async () => {
    await createTopic(t.a, 'empty');
    const res = await t.a.get('/v1/topics/empty/subscribers').expect(200);
    expect(res.body).toEqual({ data: [], totalCount: 0, page: 0, pageSize: 10, hasMore: false });
  });

  it('rejects limit 0, limit 101 and a negative page with 400 naming the parameter', async () => {
    expect((await t.a.get('/v1/topics/members/subscribers?limit=0').expect(400)).body.details[0].field).toBe('query/limit');
    expect((await t.a.get('/v1/topics/members/subscribers?limit=101').expect(400)).body.details[0].field).toBe('query/limit');
    expect((await t.a.get('/v1/topics/members/subscribers?page=-1').expect(400)).body.details[0].field).toBe('query/page');
  });

  it('answers 404 for an unknown topic', async () => {
    const res = await t.a.get('/v1/topics/nothing-here/subscribers').expect(404);
    expect(res.body.message).toBe('Topic nothing-here not found');
  });

  it("gives a key of another environment 404 for this environment's topic", async () => {
    await t.aProduction.get('/v1/topics/members/subscribers').expect(404);
    await t.b.get('/v1/topics/members/subscribers').expect(404);
  });
});

describe('POST /topics/{topicKey}/subscribers (addTopicSubscribers)', () => {
  beforeEach(async () => {
    await createTopic(t.a, 'adding');
  });
  /** Adds the members the tests before this one had added, in their order. */
  const addEarlierMembers = async (subscribers: string[]) => {
    for (const id of subscribers) await t.a.post('/v1/topics/adding/subscribers', { subscribers: [id] }).expect(200);
  };

  it('adds known subscribers, reports unknown ids in failed.notFound, and counts a repeated id once', async () => {
    t.clock.advance(60_000);
    const res = await t.a.post('/v1/topics/adding/subscribers', { subscribers: ['ada', 'ghost', 'grace', 'ada', 'ghost'] }).expect(200);
    expect(res.body).toEqual({ data: { succeeded: ['ada', 'grace'], failed: { notFound: ['ghost'] } } });
    const topic = (await t.a.get('/v1/topics/adding').expect(200)).body.data;
    expect(topic).toMatchObject({ subscriberCount: 2, subscribers: ['ada', 'grace'] });
    expect(topic.updatedAt).toBe(t.clock.now().toISOString());
    expect(topic.createdAt).not.toBe(topic.updatedAt);
  });

  it('is harmless to repeat: existing members are listed in succeeded and keep their place', async () => {
    await addEarlierMembers(['ada', 'grace']);
    t.clock.advance(1000);
    const res = await t.a.post('/v1/topics/adding/subscribers', { subscribers: ['alan', 'ada'] }).expect(200);
    expect(res.body).toEqual({ data: { succeeded: ['alan', 'ada'], failed: { notFound: [] } } });
    const members = (await t.a.get('/v1/topics/adding/subscribers').expect(200)).body;
    expect(members.totalCount).toBe(3);
    expect(ids(members.data)).toEqual(['ada', 'grace', 'alan']);
  });

  it('adds the contract’s 1,000 ids at once, existing members keeping their place and unknown ids reported', async () => {
    await addEarlierMembers(['grace']);
    const at = t.clock.now().toISOString();
    const crowd = Array.from({ length: 997 }, (_, i) => ({ id: newId(), environment_id: t.environments.a, subscriber_id: `crowd-${String(i).padStart(3, '0')}`, data: '{}', created_at: at, updated_at: at }));
    await insertRows(t.db, 'subscribers', crowd);
    t.clock.advance(1000);
    const subscribers = ['ada', 'grace', ...crowd.map((member) => member.subscriber_id), 'ghost'];
    const res = await t.a.post('/v1/topics/adding/subscribers', { subscribers }).expect(200);
    expect(res.body).toEqual({ data: { succeeded: subscribers.slice(0, -1), failed: { notFound: ['ghost'] } } });
    const members = (await t.a.get('/v1/topics/adding/subscribers?limit=2').expect(200)).body;
    expect(members.totalCount).toBe(999);
    expect(members.data[0]).toEqual({ subscriberId: 'grace', addedAt: at });
    expect(members.data[1].addedAt).toBe(t.clock.now().toISOString());
  });

  it('answers 200 with every id in failed.notFound when none is known, and changes nothing', async () => {
    const before = (await t.a.get('/v1/topics/adding').expect(200)).body.data;
    t.clock.advance(1000);
    const res = await t.a.post('/v1/topics/adding/subscribers', { subscribers: ['ghost', 'phantom'] }).expect(200);
    expect(res.body).toEqual({ data: { succeeded: [], failed: { notFound: ['ghost', 'phantom'] } } });
    expect((await t.a.get('/v1/topics/adding').expect(200)).body.data).toEqual(before);
  });

  it('treats subscribers of another environment as not found', async () => {
    await addEarlierMembers(['ada', 'grace', 'alan']);
    const res = await t.a.post('/v1/topics/adding/subscribers', { subscribers: ['only-in-production', 'only-in-b', 'edsger'] }).expect(200);
    expect(res.body).toEqual({ data: { succeeded: ['edsger'], failed: { notFound: ['only-in-production', 'only-in-b'] } } });
    expect((await t.a.get('/v1/topics/adding').expect(200)).body.data.subscriberCount).toBe(4);
  });

  it("adds the key's own environment's subscriber when another environment has one with the same id", async () => {
    await createTopic(t.aProduction, 'production-adding');
    const res = await t.aProduction.post('/v1/topics/production-adding/subscribers', { subscribers: ['ada', 'grace'] }).expect(200);
    expect(res.body).toEqual({ data: { succeeded: ['ada'], failed: { notFound: ['grace'] } } });
    expect((await t.aProduction.get('/v1/topics/production-adding').expect(200)).body.data.subscribers).toEqual(['ada']);
  });

  it('answers 404 for an unknown topic', async () => {
    const res = await t.a.post('/v1/topics/nothing-here/subscribers', { subscribers: ['ada'] }).expect(404);
    expect(res.body.message).toBe('Topic nothing-here not found');
  });

  it("gives a key of another environment 404 for this environment's topic, and adds nothing", async () => {
    await addEarlierMembers(['ada', 'grace', 'alan', 'edsger']);
    await t.aProduction.post('/v1/topics/adding/subscribers', { subscribers: ['only-in-production'] }).expect(404);
    await t.b.post('/v1/topics/adding/subscribers', { subscribers: ['only-in-b'] }).expect(404);
    expect((await t.a.get('/v1/topics/adding').expect(200)).body.data.subscriberCount).toBe(4);
  });

  it('rejects an empty list, more than 1,000 ids, an empty id, a non-string id, unknown fields and no body with 400', async () => {
    await addEarlierMembers(['ada', 'grace', 'alan', 'edsger']);
    let res = await t.a.post('/v1/topics/adding/subscribers', { subscribers: [] }).expect(400);
    expect(res.body.details[0].field).toBe('body/subscribers');
    res = await t.a.post('/v1/topics/adding/subscribers', { subscribers: Array.from({ length: 1001 }, (_, i) => `s${i}`) }).expect(400);
    expect(res.body.details[0].field).toBe('body/subscribers');
    await t.a.post('/v1/topics/adding/subscribers', { subscribers: [''] }).expect(400);
    await t.a.post('/v1/topics/adding/subscribers', { subscribers: [42] }).expect(400);
    res = await t.a.post('/v1/topics/adding/subscribers', { subscribers: ['ada'], topicKey: 'adding' }).expect(400);
    expect(res.body.details).toEqual(expect.arrayContaining([{ field: 'body/topicKey', message: 'is not allowed' }]));
    await t.a.post('/v1/topics/adding/subscribers').expect(400);
    expect((await t.a.get('/v1/topics/adding').expect(200)).body.data.subscriberCount).toBe(4);
  });
});

describe('POST /topics/{topicKey}/subscribers/removal (removeTopicSubscribers)', () => {
  beforeEach(async () => {
    await createTopic(t.a, 'removing', ['ada', 'grace', 'alan']);
    await createTopic(t.aProduction, 'removing', ['ada']);
  });
  /** Removes the members the tests before this one had removed. */
  const removeEarlierMembers = (subscribers: string[]) => t.a.post('/v1/topics/removing/subscribers/removal', { subscribers }).expect(200);

  it('removes members, lists known non-members in succeeded too, and unknown ids in failed.notFound', async () => {
    t.clock.advance(60_000);
    const res = await t.a
      .post('/v1/topics/removing/subscribers/removal', { subscribers: ['grace', 'barbara', 'ghost', 'grace'] })
      .expect(200);
    expect(res.body).toEqual({ data: { succeeded: ['grace', 'barbara'], failed: { notFound: ['ghost'] } } });
    const topic = (await t.a.get('/v1/topics/removing').expect(200)).body.data;
    expect(topic).toMatchObject({ subscriberCount: 2, subscribers: ['ada', 'alan'] });
    expect(topic.updatedAt).toBe(t.clock.now().toISOString());
    await t.a.get('/v1/subscribers/grace').expect(200);
  });

  it('is harmless to repeat', async () => {
    await removeEarlierMembers(['grace']);
    const res = await t.a.post('/v1/topics/removing/subscribers/removal', { subscribers: ['grace'] }).expect(200);
    expect(res.body).toEqual({ data: { succeeded: ['grace'], failed: { notFound: [] } } });
    expect((await t.a.get('/v1/topics/removing').expect(200)).body.data.subscriberCount).toBe(2);
  });

  it("treats subscribers of another environment as not found, and leaves that environment's topic alone", async () => {
    await removeEarlierMembers(['grace']);
    const res = await t.a.post('/v1/topics/removing/subscribers/removal', { subscribers: ['only-in-production'] }).expect(200);
    expect(res.body).toEqual({ data: { succeeded: [], failed: { notFound: ['only-in-production'] } } });
    await t.a.post('/v1/topics/removing/subscribers/removal', { subscribers: ['ada'] }).expect(200);
    expect((await t.a.get('/v1/topics/removing').expect(200)).body.data.subscribers).toEqual(['alan']);
    expect((await t.aProduction.get('/v1/topics/removing').expect(200)).body.data.subscribers).toEqual(['ada']);
  });

  it('answers 404 for an unknown topic', async () => {
    const res = await t.a.post('/v1/topics/nothing-here/subscribers/removal', { subscribers: ['ada'] }).expect(404);
    expect(res.body.message).toBe('Topic nothing-here not found');
  });

  it("gives a key of another organization 404 for this environment's topic, and removes nothing", async () => {
    await removeEarlierMembers(['grace', 'ada']);
    await t.b.post('/v1/topics/removing/subscribers/removal', { subscribers: ['alan'] }).expect(404);
    expect((await t.a.get('/v1/topics/removing').expect(200)).body.data.subscribers).toEqual(['alan']);
  });

  it('rejects an empty list, more than 1,000 ids and no body with 400', async () => {
    await removeEarlierMembers(['grace', 'ada']);
    await t.a.post('/v1/topics/removing/subscribers/removal', { subscribers: [] }).expect(400);
    await t.a.post('/v1/topics/removing/subscribers/removal', { subscribers: Array.from({ length: 1001 }, (_, i) => `s${i}`) }).expect(400);
    await t.a.post('/v1/topics/removing/subscribers/removal').expect(400);
    expect((await t.a.get('/v1/topics/removing').expect(200)).body.data.subscriberCount).toBe(1);
  });
});

describe('GET /topics (listTopics)', () => {
  let list: TestApp;
  const keys = Array.from({ length: 12 }, (_, i) => `topic-${String(i).padStart(2, '0')}`);
  beforeAll(async () => {
    list = await startTestApp();
    for (const subscriberId of ['s1', 's2', 's3']) {
      list.clock.advance(1000);
      await list.a.post('/v1/subscribers', { subscriberId }).expect(201);
    }
    for (const [i, key] of keys.entries()) {
      list.clock.advance(1000);
      // Topic i has i % 4 members: none, s1, s1–s2, s1–s3.
      await createTopic(list.a, key, ['s1', 's2', 's3'].slice(0, i % 4));
    }
    await createTopic(list.b, 'other-org');
  });
  afterEach(async () => list.assertContract());
  afterAll(async () => list?.close());

  it('answers the envelope with the first 10, oldest first, each with its member count and members', async () => {
    const res = await list.a.get('/v1/topics').expect(200);
    expect(res.body).toMatchObject({ totalCount: 12, page: 0, pageSize: 10, hasMore: true });
    expect(res.body.data.map((topic: { topicKey: string }) => topic.topicKey)).toEqual(keys.slice(0, 10));
    expect(res.body.data[0]).toMatchObject({ key: 'topic-00', name: 'Topic topic-00', subscriberCount: 0, subscribers: [] });
    expect(res.body.data[3]).toMatchObject({ subscriberCount: 3, subscribers: ['s1', 's2', 's3'] });
    expect(res.body.data[6]).toMatchObject({ subscriberCount: 2, subscribers: ['s1', 's2'] });
    expect(res.body.data[0]._environmentId).toBe(list.environments.a);
  });

  it('walks every page without gaps or repeats', async () => {
    const seen: string[] = [];
    for (let page = 0; ; page++) {
      const res = await list.a.get(`/v1/topics?page=${page}&limit=5`).expect(200);
      seen.push(...res.body.data.map((topic: { topicKey: string }) => topic.topicKey));
      if (!res.body.hasMore) break;
    }
    expect(seen).toEqual(keys);
  });

  it('answers a page past the end with no items and hasMore false', async () => {
    const res = await list.a.get('/v1/topics?page=9').expect(200);
    expect(res.body).toEqual({ data: [], totalCount: 12, page: 9, pageSize: 10, hasMore: false });
  });

  it('accepts pageSize as another name for limit, as Novu sends it', async () => {
    const res = await list.a.get('/v1/topics?page=1&pageSize=4').expect(200);
    expect(res.body).toMatchObject({ totalCount: 12, page: 1, pageSize: 4, hasMore: true });
    expect(res.body.data.map((topic: { topicKey: string }) => topic.topicKey)).toEqual(keys.slice(4, 8));
  });

  it('filters on key by exact match', async () => {
    let res = await list.a.get('/v1/topics?key=topic-07').expect(200);
    expect(res.body).toMatchObject({ totalCount: 1, hasMore: false });
    expect(res.body.data[0]).toMatchObject({ topicKey: 'topic-07', subscriberCount: 3 });
    res = await list.a.get('/v1/topics?key=topic-0').expect(200);
    expect(res.body).toEqual({ data: [], totalCount: 0, page: 0, pageSize: 10, hasMore: false });
  });

  it('rejects limit 0, limit 101, a negative page and a key over 255 characters with 400 naming the parameter', async () => {
    expect((await list.a.get('/v1/topics?limit=0').expect(400)).body.details[0].field).toBe('query/limit');
    expect((await list.a.get('/v1/topics?pageSize=101').expect(400)).body.details[0].field).toBe('query/pageSize');
    expect((await list.a.get('/v1/topics?page=-1').expect(400)).body.details[0].field).toBe('query/page');
    expect((await list.a.get(`/v1/topics?key=${'x'.repeat(256)}`).expect(400)).body.details[0].field).toBe('query/key');
  });

  it("lists only the key's own environment", async () => {
    const res = await list.b.get('/v1/topics').expect(200);
    expect(res.body.totalCount).toBe(1);
    expect(res.body.data[0].topicKey).toBe('other-org');
    expect((await list.aProduction.get('/v1/topics').expect(200)).body.totalCount).toBe(0);
    expect((await list.b.get('/v1/topics?key=topic-07').expect(200)).body.totalCount).toBe(0);
  });
});

describe('A topic with thousands of members', () => {
  let big: TestApp;
  const MEMBERS = 2500;
  const sid = (i: number) => `m${String(i).padStart(4, '0')}`;
  // Added newest subscribers first, so membership order and subscriber order differ.
  const requests = [
    Array.from({ length: 1000 }, (_, i) => sid(1500 + i)),
    Array.from({ length: 1000 }, (_, i) => sid(i)),
    Array.from({ length: 500 }, (_, i) => sid(1000 + i)),
  ];
  const membershipOrder = requests.flat();

  beforeAll(async () => {
    big = await startTestApp();
    const start = big.clock.now().getTime();
    // Seeded straight into the database: 2,500 HTTP creates would only slow the suite down.
    await big.db.transaction(async (trx) => {
      for (let i = 0; i < MEMBERS; i++) {
        await insertSubscriber(trx, big.environments.a, { subscriberId: sid(i) }, new Date(start + i));
      }
    });
    big.clock.advance(60_000);
    await createTopic(big.a, 'everyone');
    for (const subscribers of requests) {
      big.clock.advance(1000);
      // Each request in reverse, to show that order within one request is by subscriber, not by request.
      const res = await big.a.post('/v1/topics/everyone/subscribers', { subscribers: [...subscribers].reverse() }).expect(200);
      expect(res.body.data.succeeded).toHaveLength(subscribers.length);
      expect(res.body.data.failed.notFound).toEqual([]);
    }
  });
  afterEach(async () => big.assertContract());
  afterAll(async () => big?.close());

  it('counts every member exactly and shows the first 100, oldest membership first', async () => {
    const res = await big.a.get('/v1/topics/everyone').expect(200);
    expect(res.body.data.subscriberCount).toBe(MEMBERS);
    expect(res.body.data.subscribers).toEqual(membershipOrder.slice(0, 100));
  });

  it('shows the same count and first 100 in the list', async () => {
    const res = await big.a.get('/v1/topics').expect(200);
    expect(res.body.data[0]).toMatchObject({ topicKey: 'everyone', subscriberCount: MEMBERS });
    expect(res.body.data[0].subscribers).toEqual(membershipOrder.slice(0, 100));
  });

  it('pages through all 2,500 members once each, in the order they were added', async () => {
    const seen: string[] = [];
    for (let page = 0; ; page++) {
      const res = await big.a.get(`/v1/topics/everyone/subscribers?page=${page}&limit=100`).expect(200);
      expect(res.body.totalCount).toBe(MEMBERS);
      seen.push(...ids(res.body.data));
      if (!res.body.hasMore) break;
    }
    expect(seen).toEqual(membershipOrder);
  });

  it('is unchanged by adding 1,000 members again', async () => {
    const res = await big.a.post('/v1/topics/everyone/subscribers', { subscribers: requests[1] }).expect(200);
    expect(res.body.data.succeeded).toHaveLength(1000);
    const topic = (await big.a.get('/v1/topics/everyone').expect(200)).body.data;
    expect(topic.subscriberCount).toBe(MEMBERS);
    expect(topic.subscribers).toEqual(membershipOrder.slice(0, 100));
  });

  it('loses a member when that subscriber is deleted', async () => {
    await big.a.delete(`/v1/subscribers/${membershipOrder[0]}`).expect(200);
    const topic = (await big.a.get('/v1/topics/everyone').expect(200)).body.data;
    expect(topic.subscriberCount).toBe(MEMBERS - 1);
    expect(topic.subscribers).toEqual(membershipOrder.slice(1, 101));
    const last = (await big.a.get('/v1/topics/everyone/subscribers?page=24&limit=100').expect(200)).body;
    expect(last).toMatchObject({ totalCount: MEMBERS - 1, hasMore: false });
    expect(last.data).toHaveLength(99);
  });

  it('removes 1,000 members in one request', async () => {
    const res = await big.a.post('/v1/topics/everyone/subscribers/removal', { subscribers: requests[0] }).expect(200);
    expect(res.body.data.succeeded).toHaveLength(999);
    expect(res.body.data.failed.notFound).toEqual([membershipOrder[0]]);
    const topic = (await big.a.get('/v1/topics/everyone').expect(200)).body.data;
    expect(topic.subscriberCount).toBe(1500);
    expect(topic.subscribers).toEqual(requests[1].slice(0, 100));
  });

  it('leaves every subscriber in place when the topic is deleted', async () => {
    await big.a.delete('/v1/topics/everyone').expect(204);
    await big.a.get('/v1/topics/everyone').expect(404);
    expect((await big.a.get('/v1/subscribers').expect(200)).body.totalCount).toBe(MEMBERS - 1);
  });
});
