import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import supertest from 'supertest';
import { SignJWT } from 'jose';
import { startTestApp, type TestApp } from '../helpers/app.js';
import { JobRunner } from '../../src/engine/runner.js';
import { signingSecrets } from '../../src/engine/inbox-tokens.js';

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp();
});
afterEach(async () => t.assertContract());
afterAll(async () => t?.close());

/** Requests with a subscriber token, as a browser sends them. */
const as = (token: string) => ({
  get: (path: string) => t.http.get(path).set('Authorization', `Bearer ${token}`),
  post: (path: string, body: object = {}) => t.http.post(path).set('Authorization', `Bearer ${token}`).send(body),
  patch: (path: string, body: object) => t.http.patch(path).set('Authorization', `Bearer ${token}`).send(body),
  delete: (path: string) => t.http.delete(path).set('Authorization', `Bearer ${token}`),
});

async function tokenFor(subscriberId: string, client = t.a): Promise<string> {
  return (await client.post(`/v1/subscribers/${subscriberId}/inbox-tokens`, {}).expect(201)).body.data.token;
}

async function deliver(n: number, to = 'ada', name = 'comment-added'): Promise<void> {
  for (let i = 0; i < n; i++) {
    t.clock.advance(1000);
    await t.a.post('/v1/events/trigger', { name, to, payload: { n: i } }).expect(201);
  }
  await new JobRunner(t.deps).runUntilIdle();
}

beforeEach(async () => {
  await t.renew();
  for (const id of ['ada', 'grace']) await t.a.post('/v1/subscribers', { subscriberId: id }).expect(201);
  await t.a
    .post('/v1/workflows', {
      name: 'Comment added',
      tags: ['comments'],
      steps: [
        {
          type: 'in_app',
          template: {
            subject: 'Comment {{payload.n}}',
            content: 'Hello {{subscriber.subscriberId}} #{{payload.n}}',
            avatar: 'https://example.com/a/{{payload.n}}.png',
            redirect: { url: 'https://example.com/posts/{{payload.n}}' },
            primaryAction: { label: 'Reply to {{payload.n}}', url: 'https://example.com/r/{{payload.n}}' },
            data: { n: '{{payload.n}}' },
          },
        },
      ],
    })
    .expect(201);
  await t.a.post('/v1/workflows', { name: 'Other', steps: [{ type: 'in_app', template: { content: 'other' } }] }).expect(201);
});

describe('POST /subscribers/{subscriberId}/inbox-tokens (createInboxToken)', () => {
  it('signs a one-hour HS256 token for the subscriber, with the secret’s kid and the inbox audience', async () => {
    const res = await t.a.post('/v1/subscribers/ada/inbox-tokens', {}).expect(201);
    const [header, payload] = res.body.data.token.split('.').slice(0, 2).map((part: string) => JSON.parse(Buffer.from(part, 'base64url').toString()));
    expect(header).toMatchObject({ alg: 'HS256', kid: expect.stringMatching(/^ik_/) });
    expect(payload).toMatchObject({ sub: 'ada', aud: 'herald-inbox' });
    expect(payload.exp - payload.iat).toBe(3600);
    expect(res.body.data.expiresAt).toBe(new Date(payload.exp * 1000).toISOString());
  });

  it('answers 404 for an unknown subscriber and 400 for a lifetime over 24 hours', async () => {
    await t.a.post('/v1/subscribers/nobody/inbox-tokens', {}).expect(404);
    await t.a.post('/v1/subscribers/ada/inbox-tokens', { expiresIn: 86_401 }).expect(400);
  });
});

describe('inbox authentication', () => {
  it('opens the inbox with a token the backend signed itself, and refuses one signed with another secret', async () => {
    const [secret] = await signingSecrets(t.deps, t.environments.a);
    const sign = (key: Uint8Array, kid = secret.kid, sub = 'ada') =>
      new SignJWT({}).setProtectedHeader({ alg: 'HS256', kid }).setSubject(sub).setAudience('herald-inbox').setIssuedAt(Math.floor(t.clock.now().getTime() / 1000)).setExpirationTime(Math.floor(t.clock.now().getTime() / 1000) + 600).sign(key);
    await as(await sign(Buffer.from(secret.secret, 'base64url'))).get('/v1/inbox/counts').expect(200);
    const forged = await as(await sign(Buffer.from('not the secret'))).get('/v1/inbox/counts').expect(401);
    expect(forged.body).toMatchObject({ statusCode: 401, error: 'Unauthorized', message: expect.stringContaining('signature') });
  });

  it('refuses an expired token with 401, the API key on the inbox with 403, and a token on the secret-key API with 401', async () => {
    const token = await tokenFor('ada');
    await as(token).get('/v1/inbox/counts').expect(200);
    await t.a.get('/v1/inbox/counts').expect(403);
    await as(token).get('/v1/subscribers').expect(401);
    await as(token).post('/v1/subscribers/ada/inbox-tokens', {}).expect(401);
    t.clock.advance(3600_000 + 61_000);
    const expired = await as(token).get('/v1/inbox/counts').expect(401);
    expect(expired.body.message).toMatch(/expired/);
    await t.http.get('/v1/inbox/counts').expect(401);
  });

  it('keeps a subscriber to their own inbox, and an environment to its own', async () => {
    await deliver(1, 'grace');
    const grace = (await as(await tokenFor('grace')).get('/v1/inbox/messages').expect(200)).body.data[0];
    await as(await tokenFor('ada')).patch(`/v1/inbox/messages/${grace.messageId}`, { read: true }).expect(404);
    await t.b.post('/v1/subscribers', { subscriberId: 'ada' }).expect(201);
    expect((await as(await tokenFor('ada', t.b)).get('/v1/inbox/counts').expect(200)).body.data.total).toBe(0);
  });
});

describe('GET /inbox/messages (listInboxMessages) and GET /inbox/counts (getInboxCounts)', () => {
  it('lists rendered items newest first with exact counts', async () => {
    await deliver(3);
    const token = await tokenFor('ada');
    const res = await as(token).get('/v1/inbox/messages').expect(200);
    expect(res.body.counts).toEqual({ unread: 3, unseen: 3, total: 3, archived: 0 });
    expect(res.body).toMatchObject({ totalCount: 3, hasMore: false, page: 0, pageSize: 10 });
    expect(res.body.data[0]).toMatchObject({
      workflowId: 'comment-added',
      subject: 'Comment 2',
      body: 'Hello ada #2',
      avatar: 'https://example.com/a/2.png',
      redirect: { url: 'https://example.com/posts/2' },
      primaryAction: { label: 'Reply to 2', url: 'https://example.com/r/2', status: 'pending' },
      tags: ['comments'],
      data: { n: '2' },
      seenAt: null,
      readAt: null,
      archivedAt: null,
    });
    expect((await as(token).get('/v1/inbox/counts').expect(200)).body.data).toEqual({ unread: 3, unseen: 3, total: 3, archived: 0 });
  });

  it('pages with before and after without duplicates while items arrive', async () => {
    await deliver(5);
    const token = await tokenFor('ada');
    const first = (await as(token).get('/v1/inbox/messages?limit=2').expect(200)).body;
    expect(first.data.map((m: { body: string }) => m.body)).toEqual(['Hello ada #4', 'Hello ada #3']);
    await deliver(3);
    const next = (await as(token).get(`/v1/inbox/messages?limit=2&before=${first.data[1].messageId}`).expect(200)).body;
    expect(next.data.map((m: { body: string }) => m.body)).toEqual(['Hello ada #2', 'Hello ada #1']);
    const newer = (await as(token).get(`/v1/inbox/messages?limit=2&after=${first.data[0].messageId}`).expect(200)).body;
    expect(newer.data.map((m: { body: string }) => m.body)).toEqual(['Hello ada #1', 'Hello ada #0']);
    expect(newer.hasMore).toBe(true);
    await as(token).get('/v1/inbox/messages?before=000000000000000000000000').expect(404);
  });
});
