import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { SignJWT } from 'jose';
import { Client, startTestApp, type TestApp } from '../helpers/app.js';
import { createApiKey, createOrganization } from '../../src/db/repos/accounts.js';
import { JobRunner } from '../../src/engine/runner.js';
import { executeInAppBatch } from '../../src/engine/in-app-batch.js';
import { claimDueJobs } from '../../src/db/repos/jobs.js';
import { addSigningSecret, signingSecrets } from '../../src/engine/inbox-tokens.js';

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

describe('the first signing secret', () => {
  it('is made once when a new environment’s first tokens are signed at the same moment, and each of them opens the inbox', async () => {
    // Each asks before any has made one: all of them find none.
    const asked = await Promise.all(Array.from({ length: 16 }, () => signingSecrets(t.deps, t.environments.a)));
    expect(new Set(asked.map(([newest]) => newest.kid)).size).toBe(1);
    expect(await signingSecrets(t.deps, t.environments.a)).toEqual(asked[0]);
    const tokens = await Promise.all(Array.from({ length: 16 }, () => tokenFor('ada')));
    for (const token of tokens) await as(token).get('/v1/inbox/counts').expect(200);
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

  it('takes a self-signed token from a signer whose clock runs up to a minute ahead, and none past its exp', async () => {
    const [secret] = await signingSecrets(t.deps, t.environments.a);
    const key = Buffer.from(secret.secret, 'base64url');
    const now = Math.floor(t.clock.now().getTime() / 1000);
    const sign = (iat: number, exp: number) =>
      new SignJWT({}).setProtectedHeader({ alg: 'HS256', kid: secret.kid }).setSubject('ada').setAudience('herald-inbox').setIssuedAt(iat).setNotBefore(iat).setExpirationTime(exp).sign(key);
    await as(await sign(now + 30, now + 630)).get('/v1/inbox/counts').expect(200);
    expect((await as(await sign(now + 120, now + 720)).get('/v1/inbox/counts').expect(401)).body.message).toMatch(/nbf/);
    const issuedAhead = await new SignJWT({}).setProtectedHeader({ alg: 'HS256', kid: secret.kid }).setSubject('ada').setAudience('herald-inbox').setIssuedAt(now + 120).setExpirationTime(now + 720).sign(key);
    expect((await as(issuedAhead).get('/v1/inbox/counts').expect(401)).body.message).toMatch(/iat/);
    expect((await as(await sign(now - 600, now - 1)).get('/v1/inbox/counts').expect(401)).body.message).toMatch(/expired/);
  });

  it('refuses a self-signed token without iat, or whose exp is more than 24 hours after its iat, as the contract says', async () => {
    const [secret] = await signingSecrets(t.deps, t.environments.a);
    const key = Buffer.from(secret.secret, 'base64url');
    const now = Math.floor(t.clock.now().getTime() / 1000);
    const base = () => new SignJWT({}).setProtectedHeader({ alg: 'HS256', kid: secret.kid }).setSubject('ada').setAudience('herald-inbox');
    const withoutIat = await base().setExpirationTime(now + 3600).sign(key);
    expect((await as(withoutIat).get('/v1/inbox/counts').expect(401)).body.message).toMatch(/iat claim/);
    // Issued 48 hours ago, expiring in an hour: 49 hours of life.
    const longLived = await base().setIssuedAt(now - 48 * 3600).setExpirationTime(now + 3600).sign(key);
    expect((await as(longLived).get('/v1/inbox/counts').expect(401)).body.message).toMatch(/longer than 24 hours/);
    await as(await base().setIssuedAt(now - 3600).setExpirationTime(now + 22 * 3600).sign(key)).get('/v1/inbox/counts').expect(200);
  });

  it('rotates: a new secret signs, tokens of the old one work until a third retires it', async () => {
    const old = await tokenFor('ada');
    const added = await addSigningSecret(t.deps, t.environments.a);
    const fresh = await tokenFor('ada');
    expect(JSON.parse(Buffer.from(fresh.split('.')[0], 'base64url').toString()).kid).toBe(added.kid);
    await as(old).get('/v1/inbox/counts').expect(200);
    expect((await signingSecrets(t.deps, t.environments.a)).map((s) => s.kid)).toHaveLength(2);
    await addSigningSecret(t.deps, t.environments.a);
    const retired = await as(old).get('/v1/inbox/counts').expect(401);
    expect(retired.body.message).toMatch(/unknown or retired/);
    await as(fresh).get('/v1/inbox/counts').expect(200);
  });

  it('keeps the signing secrets sealed at rest when the server has a secret', async () => {
    const deps = { ...t.deps, config: { ...t.deps.config, secret: 'a-long-random-server-secret-for-this-test' } };
    const added = await addSigningSecret(deps, t.environments.a);
    const stored = await t.db('inbox_secrets').where({ id: added.kid }).first('secret');
    expect(stored.secret).toMatch(/^enc:v1:/);
    expect(stored.secret).not.toContain(added.secret);
    expect((await signingSecrets(deps, t.environments.a))[0]).toEqual(added);
  });

  it('refuses an expired token with 401, the API key on the inbox with 403, and a token on the secret-key API with 401', async () => {
    const token = await tokenFor('ada');
    await as(token).get('/v1/inbox/counts').expect(200);
    await t.a.get('/v1/inbox/counts').expect(403);
    await as(token).get('/v1/subscribers').expect(401);
    await as(token).post('/v1/subscribers/ada/inbox-tokens', {}).expect(401);
    // To the second: a second before its exp it works, from its exp on it is refused (no leeway).
    t.clock.advance(3600_000 - 1_000);
    await as(token).get('/v1/inbox/counts').expect(200);
    t.clock.advance(1_000);
    const expired = await as(token).get('/v1/inbox/counts').expect(401);
    expect(expired.body.message).toMatch(/expired/);
    const missing = await t.http.get('/v1/inbox/counts').expect(401);
    expect(missing.body.message).toMatch(/^Missing subscriber token/);
    // Neither a token nor a key: the inbox says what it takes, not that an API key is invalid.
    const garbled = await as('not-a-token').get('/v1/inbox/counts').expect(401);
    expect(garbled.body.message).toMatch(/^Invalid subscriber token: the inbox takes a subscriber token/);
  });

  it('keeps a subscriber to their own inbox, and an environment to its own', async () => {
    await deliver(1, 'grace');
    const grace = (await as(await tokenFor('grace')).get('/v1/inbox/messages').expect(200)).body.data[0];
    await as(await tokenFor('ada')).patch(`/v1/inbox/messages/${grace.messageId}`, { read: true }).expect(404);
    await t.b.post('/v1/subscribers', { subscriberId: 'ada' }).expect(201);
    expect((await as(await tokenFor('ada', t.b)).get('/v1/inbox/counts').expect(200)).body.data.total).toBe(0);
  });

  it('answers 404, as the contract says, when the token’s subscriber was deleted since, and issues no stream ticket for it', async () => {
    const token = await tokenFor('grace');
    await t.a.delete('/v1/subscribers/grace').expect(200);
    const gone = as(token);
    for (const [what, res] of [
      ['counts', await gone.get('/v1/inbox/counts')],
      ['preferences', await gone.get('/v1/inbox/preferences')],
      ['stream', await gone.get('/v1/inbox/events')],
      ['ticket', await gone.post('/v1/inbox/events/tickets')],
      ['items', await gone.get('/v1/inbox/messages')],
    ] as const) {
      expect(res.status, what).toBe(404);
      expect(res.body).toMatchObject({ statusCode: 404, error: 'Not Found', message: 'Subscriber grace not found' });
    }
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

  it('finds with after= a message that commits after one it listed, from a worker whose clock read earlier', async () => {
    t.clock.advance(1000);
    for (const n of [1, 2]) await t.a.post('/v1/events/trigger', { name: 'comment-added', to: 'ada', payload: { n } }).expect(201);
    const [early, late] = await claimDueJobs(t.db, { owner: 'worker-a', now: t.clock.now(), leaseMs: 30_000, limit: 10 });
    const earlyBatchBegan = t.clock.now();
    t.clock.advance(5000);
    // One worker's batch commits first...
    await executeInAppBatch({ deps: t.deps, owner: 'worker-a', random: Math.random }, [late]);
    const token = await tokenFor('ada');
    const [top] = (await as(token).get('/v1/inbox/messages').expect(200)).body.data;
    expect(top.body).toBe('Hello ada #2');
    // ...then another's, whose clock read 5 s earlier, when its batch began.
    await executeInAppBatch({ deps: { ...t.deps, clock: { now: () => earlyBatchBegan } }, owner: 'worker-a', random: Math.random }, [early]);
    const newer = (await as(token).get(`/v1/inbox/messages?after=${top.messageId}`).expect(200)).body.data;
    expect(newer.map((m: { body: string }) => m.body)).toEqual(['Hello ada #1']);
    expect(Date.parse(newer[0].createdAt)).toBeGreaterThan(Date.parse(top.createdAt));
  });
});

describe('PATCH /inbox/messages/{messageId} (updateInboxMessage)', () => {
  it('writes a large data into its answer and its event as stored, not parsed and serialized again', async () => {
    await deliver(1);
    const token = await tokenFor('ada');
    const [message] = (await as(token).get('/v1/inbox/messages').expect(200)).body.data;
    // Over ANSWERED_AS_STORED_CHARS (db/json.ts), with spaces JSON.stringify never writes: found
    // as it is only where it was spliced in.
    const stored = `{ "n" : "0", "text" : "${'x'.repeat(2_000)}" }`;
    await t.db('messages').where('id', message.messageId).update({ data: stored });
    const res = await as(token).patch(`/v1/inbox/messages/${message.messageId}`, { read: true }).expect(200);
    expect(res.text).toContain(`"data":${stored}`);
    expect(res.body.data).toMatchObject({ messageId: message.messageId, data: JSON.parse(stored), readAt: expect.any(String) });
    const [event] = await t.db('inbox_events').where('type', 'notification.updated').where('payload', 'like', `%${message.messageId}%`);
    expect(event.payload).toContain(`"data":${stored}`);
    expect(JSON.parse(event.payload)).toMatchObject({ type: 'notification.updated', item: { messageId: message.messageId, data: JSON.parse(stored) } });
  });

  it('marks read (and so seen), archives and unarchives, keeping the counts exact and the first times', async () => {
    await deliver(2);
    const token = await tokenFor('ada');
    const [newest] = (await as(token).get('/v1/inbox/messages').expect(200)).body.data;
    const read = (await as(token).patch(`/v1/inbox/messages/${newest.messageId}`, { read: true }).expect(200)).body.data;
    expect(read).toMatchObject({ readAt: t.clock.now().toISOString(), seenAt: t.clock.now().toISOString(), archivedAt: null });
    t.clock.advance(5000);
    const again = (await as(token).patch(`/v1/inbox/messages/${newest.messageId}`, { read: true }).expect(200)).body.data;
    expect(again.readAt).toBe(read.readAt);
    expect((await as(token).get('/v1/inbox/counts').expect(200)).body.data).toEqual({ unread: 1, unseen: 1, total: 2, archived: 0 });
    await as(token).patch(`/v1/inbox/messages/${newest.messageId}`, { archived: true }).expect(200);
    expect((await as(token).get('/v1/inbox/counts').expect(200)).body.data).toEqual({ unread: 1, unseen: 1, total: 1, archived: 1 });
    expect((await as(token).get('/v1/inbox/messages').expect(200)).body.data).toHaveLength(1);
    expect((await as(token).get('/v1/inbox/messages?archived=only').expect(200)).body.data.map((m: { messageId: string }) => m.messageId)).toEqual([newest.messageId]);
    const back = (await as(token).patch(`/v1/inbox/messages/${newest.messageId}`, { archived: false, read: false }).expect(200)).body.data;
    expect(back).toMatchObject({ archivedAt: null, readAt: null, seenAt: read.seenAt });
    expect((await as(token).get('/v1/inbox/counts').expect(200)).body.data).toEqual({ unread: 2, unseen: 1, total: 2, archived: 0 });
    // A read message is a seen one: unseeing it unreads it too, through either API.
    await as(token).patch(`/v1/inbox/messages/${newest.messageId}`, { read: true }).expect(200);
    const unseen = (await as(token).patch(`/v1/inbox/messages/${newest.messageId}`, { seen: false }).expect(200)).body.data;
    expect(unseen).toMatchObject({ seenAt: null, readAt: null });
    await as(token).patch(`/v1/inbox/messages/${newest.messageId}`, { read: true }).expect(200);
    const marked = (await t.a.patch(`/v1/subscribers/ada/messages/${newest.messageId}`, { seen: false }).expect(200)).body.data;
    expect(marked).toMatchObject({ seen: false, read: false });
    expect((await as(token).get('/v1/inbox/counts').expect(200)).body.data).toEqual({ unread: 2, unseen: 2, total: 2, archived: 0 });
    // And in bulk.
    await as(token).post('/v1/inbox/messages/bulk', { set: { read: true } }).expect(200);
    await as(token).post('/v1/inbox/messages/bulk', { set: { seen: false } }).expect(200);
    expect((await as(token).get('/v1/inbox/counts').expect(200)).body.data).toEqual({ unread: 2, unseen: 2, total: 2, archived: 0 });
    expect((await as(token).get('/v1/inbox/messages?status=read').expect(200)).body.data).toEqual([]);
  });

  it('shares its counts with the secret-key API’s mark, which changes the same messages', async () => {
    await deliver(2);
    const [message] = (await t.a.get('/v1/subscribers/ada/messages').expect(200)).body.data;
    await t.a.patch(`/v1/subscribers/ada/messages/${message.messageId}`, { read: true }).expect(200);
    expect((await as(await tokenFor('ada')).get('/v1/inbox/counts').expect(200)).body.data).toEqual({ unread: 1, unseen: 1, total: 2, archived: 0 });
  });

  it('answers 404 for an unknown item and 400 for an empty or unknown change', async () => {
    const token = await tokenFor('ada');
    await as(token).patch('/v1/inbox/messages/000000000000000000000000', { read: true }).expect(404);
    await deliver(1);
    const [item] = (await as(token).get('/v1/inbox/messages').expect(200)).body.data;
    await as(token).patch(`/v1/inbox/messages/${item.messageId}`, {}).expect(400);
    await as(token).patch(`/v1/inbox/messages/${item.messageId}`, { pinned: true }).expect(400);
  });
});

describe('DELETE /inbox/messages/{messageId} (deleteInboxMessage)', () => {
  it('deletes the item and its share of the counts, once', async () => {
    await deliver(2);
    const token = await tokenFor('ada');
    const [item] = (await as(token).get('/v1/inbox/messages').expect(200)).body.data;
    await as(token).delete(`/v1/inbox/messages/${item.messageId}`).expect(204);
    await as(token).delete(`/v1/inbox/messages/${item.messageId}`).expect(404);
    expect((await as(token).get('/v1/inbox/counts').expect(200)).body.data).toEqual({ unread: 1, unseen: 1, total: 1, archived: 0 });
  });
});

describe('POST /inbox/messages/{messageId}/actions/{actionType} (updateInboxMessageAction)', () => {
  it('marks the primary action done (reading the item) and pending again; a missing action is a 422', async () => {
    await deliver(1);
    const token = await tokenFor('ada');
    const [item] = (await as(token).get('/v1/inbox/messages').expect(200)).body.data;
    const done = (await as(token).post(`/v1/inbox/messages/${item.messageId}/actions/primary`, { status: 'done' }).expect(200)).body.data;
    expect(done.primaryAction.status).toBe('done');
    expect(done.readAt).not.toBeNull();
    const pending = (await as(token).post(`/v1/inbox/messages/${item.messageId}/actions/primary`, { status: 'pending' }).expect(200)).body.data;
    expect(pending.primaryAction.status).toBe('pending');
    await as(token).post(`/v1/inbox/messages/${item.messageId}/actions/secondary`, { status: 'done' }).expect(422);
    await as(token).post(`/v1/inbox/messages/${item.messageId}/actions/tertiary`, { status: 'done' }).expect(400);
  });
});

describe('POST /inbox/messages/bulk (updateInboxMessages)', () => {
  it('marks everything up to upTo read, leaving a newer item alone, and counts only what changed', async () => {
    await deliver(3);
    const token = await tokenFor('ada');
    const shown = (await as(token).get('/v1/inbox/messages').expect(200)).body.data;
    await deliver(1); // arrives while the page is open
    const res = await as(token).post('/v1/inbox/messages/bulk', { set: { read: true }, upTo: shown[0].messageId }).expect(200);
    expect(res.body.data).toEqual({ updated: 3, counts: { unread: 1, unseen: 1, total: 4, archived: 0 } });
    expect((await as(token).post('/v1/inbox/messages/bulk', { set: { read: true }, upTo: shown[0].messageId }).expect(200)).body.data.updated).toBe(0);
    const archived = await as(token).post('/v1/inbox/messages/bulk', { set: { archived: true } }).expect(200);
    expect(archived.body.data).toEqual({ updated: 4, counts: { unread: 0, unseen: 0, total: 0, archived: 4 } });
    await as(token).post('/v1/inbox/messages/bulk', { set: { read: true }, upTo: '000000000000000000000000' }).expect(404);
  });
});

describe('filters', () => {
  it('filters by status, workflowId and tag', async () => {
    await deliver(2);
    await deliver(1, 'ada', 'other');
    const token = await tokenFor('ada');
    const all = (await as(token).get('/v1/inbox/messages').expect(200)).body.data;
    await as(token).patch(`/v1/inbox/messages/${all[1].messageId}`, { read: true }).expect(200);
    const ids = async (query: string) => (await as(token).get(`/v1/inbox/messages?${query}`).expect(200)).body.data.map((m: { messageId: string }) => m.messageId);
    expect(await ids('status=read')).toEqual([all[1].messageId]);
    expect(await ids('status=unread')).toEqual([all[0].messageId, all[2].messageId]);
    expect(await ids('workflowId=other')).toEqual([all[0].messageId]);
    expect(await ids('tag=comments')).toEqual([all[1].messageId, all[2].messageId]);
    expect((await as(token).get('/v1/inbox/messages?tag=comments').expect(200)).body.totalCount).toBe(2);
  });
});

describe('GET and PATCH /inbox/preferences (getInboxPreferences, updateInboxPreferences)', () => {
  it('shows and changes the subscriber’s own preferences, as the secret-key API sees them', async () => {
    const token = await tokenFor('ada');
    const before = (await as(token).get('/v1/inbox/preferences').expect(200)).body.data;
    expect(before.map((p: { template: { workflowId: string } }) => p.template.workflowId)).toEqual(['comment-added', 'other']);
    await as(token).patch('/v1/inbox/preferences', { workflowId: 'other', enabled: false }).expect(200);
    const mine = (await t.a.get('/v1/subscribers/ada/preferences').expect(200)).body.data;
    expect(mine.find((p: { template: { workflowId: string } }) => p.template.workflowId === 'other').preference.enabled).toBe(false);
    await as(token).patch('/v1/inbox/preferences', { workflowId: 'nope', enabled: false }).expect(404);
  });
});

describe('PUT and GET /inbox/settings (updateInboxSettings, getInboxSettings), and CORS', () => {
  it('allows cross-origin inbox calls from the environment’s origins only, and never on the secret-key API', async () => {
    expect((await t.a.get('/v1/inbox/settings').expect(200)).body.data).toMatchObject({ allowedOrigins: [] });
    const put = await t.a.put('/v1/inbox/settings', { allowedOrigins: ['https://app.example.com', 'https://App.Example.com'] }).expect(200);
    expect(put.body.data).toMatchObject({ allowedOrigins: ['https://app.example.com'] });
    const token = await tokenFor('ada');
    const preflight = await t.http.options('/v1/inbox/messages').set('Origin', 'https://app.example.com').set('Access-Control-Request-Method', 'GET').expect(204);
    expect(preflight.headers['access-control-allow-origin']).toBe('https://app.example.com');
    expect(preflight.headers['access-control-allow-headers']).toMatch(/Authorization/);
    // A stream's own headers, as EventSource polyfills send them.
    expect(preflight.headers['access-control-allow-headers']).toMatch(/Last-Event-ID/);
    expect(preflight.headers['access-control-allow-headers']).toMatch(/Cache-Control/);
    // Any origin's preflight passes (none tells which origins some environment allows); the request itself is checked.
    await t.http.options('/v1/inbox/messages').set('Origin', 'https://evil.example').set('Access-Control-Request-Method', 'GET').expect(204);
    const allowed = await as(token).get('/v1/inbox/counts').set('Origin', 'https://app.example.com').expect(200);
    expect(allowed.headers['access-control-allow-origin']).toBe('https://app.example.com');
    // A page of another origin is refused, writes included: without CORS headers it could not read the answer, but the write would be done.
    const other = await as(token).get('/v1/inbox/counts').set('Origin', 'https://evil.example').expect(403);
    expect(other.headers['access-control-allow-origin']).toBeUndefined();
    expect(other.body.message).toBe("Origin https://evil.example may not call this environment's inbox: add it with PUT /v1/inbox/settings");
    await as(token).post('/v1/inbox/messages/bulk', { set: { read: true } }).set('Origin', 'https://evil.example').expect(403);
    // A page on Herald's own origin, and a server (no Origin), need no allowed origin.
    await as(token).get('/v1/inbox/counts').set('Origin', 'https://evil.example').set('Sec-Fetch-Site', 'same-origin').expect(200);
    await as(token).get('/v1/inbox/counts').expect(200);
    const secretKeyApi = await t.a.get('/v1/subscribers').set('Origin', 'https://app.example.com').expect(200);
    expect(secretKeyApi.headers['access-control-allow-origin']).toBeUndefined();
    // Another environment's token from that origin gets no CORS header: the origin is A's.
    await t.b.post('/v1/subscribers', { subscriberId: 'ada' }).expect(201);
    const foreign = await as(await tokenFor('ada', t.b)).get('/v1/inbox/counts').set('Origin', 'https://app.example.com').expect(403);
    expect(foreign.headers['access-control-allow-origin']).toBeUndefined();
    // A refused credential's 401 reads alike from A's origin and from one no environment allows.
    const refused = await Promise.all(
      ['https://app.example.com', 'https://evil.example'].map(async (origin) => (await t.http.get('/v1/inbox/counts').set('Authorization', 'Bearer not.a.token').set('Origin', origin).expect(401)).headers),
    );
    expect(refused.map((headers) => headers['access-control-allow-origin'])).toEqual(['https://app.example.com', 'https://evil.example']);
    await t.a.put('/v1/inbox/settings', { allowedOrigins: ['https://app.example.com/path'] }).expect(400);
    // Origins are exact: no wildcard; and one that is no URL (a port past 65535) is a 400, not a 500.
    expect((await t.a.put('/v1/inbox/settings', { allowedOrigins: ['https://*.example.com'] }).expect(400)).body.details[0].field).toBe('body/allowedOrigins/0');
    expect((await t.a.put('/v1/inbox/settings', { allowedOrigins: ['https://app.example.com', 'https://a.example.com:99999'] }).expect(400)).body.details).toEqual([
      { field: 'body/allowedOrigins/1', message: 'is not an origin: https://a.example.com:99999' },
    ]);
  });
});

describe('rate limits', () => {
  it('spends a bucket per subscriber token, apart from the environment’s and from other subscribers’', async () => {
    const { environmentIds } = await createOrganization(t.db, { name: 'Free', plan: 'free', environments: ['development'] });
    const free = new Client(t.http, (await createApiKey(t.db, { environmentId: environmentIds.development, name: 'free' })).key);
    for (const id of ['ada', 'grace']) await free.post('/v1/subscribers', { subscriberId: id }).expect(201);
    const ada = await tokenFor('ada', free);
    const grace = await tokenFor('grace', free);
    const statuses: number[] = [];
    for (let i = 0; i < 21; i++) statuses.push((await as(ada).get('/v1/inbox/counts')).status);
    expect(statuses.slice(0, 20).every((s) => s === 200)).toBe(true);
    const limited = await as(ada).get('/v1/inbox/counts').expect(429);
    expect(limited.headers['retry-after']).toBeDefined();
    await as(grace).get('/v1/inbox/counts').expect(200);
    await free.get('/v1/subscribers').expect(200);
  });
});

describe('the in-app step template', () => {
  it('compiles the item’s fields on save: a broken action label is a 422 naming it', async () => {
    const res = await t.a
      .post('/v1/workflows', { name: 'Broken', steps: [{ type: 'in_app', template: { content: 'x', primaryAction: { label: '{{#if}}' } } }] })
      .expect(422);
    expect(res.body.details).toEqual([expect.objectContaining({ field: 'body/steps/0/template/primaryAction/label' })]);
  });
});

describe('POST /inbox/events/tickets (createInboxEventTicket)', () => {
  it('answers a single-use ticket valid for 60 seconds; an API key cannot ask for one', async () => {
    const token = await tokenFor('ada');
    const res = await as(token).post('/v1/inbox/events/tickets').expect(201);
    expect(res.body.data).toEqual({ ticket: expect.stringMatching(/^tk_/), expiresAt: new Date(t.clock.now().getTime() + 60_000).toISOString() });
    await t.a.post('/v1/inbox/events/tickets').expect(403);
  });

  it('refuses a subscriber token or a used ticket in the URL with 401 and the error body', async () => {
    const token = await tokenFor('ada');
    const inUrl = await t.http.get(`/v1/inbox/events?token=${token}`).expect(401);
    expect(inUrl.body).toMatchObject({ statusCode: 401, error: 'Unauthorized', message: expect.stringContaining('URL') });
    await t.http.get(`/v1/inbox/events?ticket=${token}`).expect(401);
    await t.http.get('/v1/inbox/events?ticket=tk_unknown').expect(401);
    await t.a.get('/v1/inbox/events').expect(403);
  });
});


describe('Idempotency-Key on the inbox', () => {
  it('keeps each subscriber’s keys apart: the same key from another browser acts for that subscriber', async () => {
    await deliver(1, 'ada');
    await deliver(1, 'grace');
    const [ada, grace] = [await tokenFor('ada'), await tokenFor('grace')];
    const bulk = (token: string) => as(token).post('/v1/inbox/messages/bulk', { set: { read: true } }).set('Idempotency-Key', 'mark-all');
    expect((await bulk(ada).expect(200)).body.data.updated).toBe(1);
    const replay = await bulk(ada).expect(200);
    expect(replay.headers['idempotency-replay']).toBe('true');
    const other = await bulk(grace).expect(200);
    expect(other.headers['idempotency-replay']).toBeUndefined();
    expect(other.body.data).toEqual({ updated: 1, counts: { unread: 0, unseen: 0, total: 1, archived: 0 } });
  });
});
