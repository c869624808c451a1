// POST /v1/inbox/session: a browser trades a Novu-style subscriber hash (computed by the customer's
// backend, as a backend computes it: node:crypto, keyed with an inbox signing secret's text) for a
// one-hour subscriber token. Off by default per environment; no answer tells who exists.
import { createHmac } from 'node:crypto';
import { beforeEach, describe, expect, it } from 'vitest';
import { useTestApp } from '../helpers/app.js';
import { createSubscriber, createWorkflow, step } from '../helpers/factories.js';
import { JobRunner } from '../../src/engine/runner.js';
import { addSigningSecret, signingSecrets } from '../../src/engine/inbox-tokens.js';

const t = useTestApp();
// Every session request is a request without a credential, spending the client address's bucket
// (Free numbers): each test starts with it full.
beforeEach(() => t.clock.advance(10 * 60_000));

/** What a customer's backend renders into the page: the hex HMAC-SHA256 of the subscriberId. */
const hashOf = (secret: string, subscriberId: string) => createHmac('sha256', secret).update(subscriberId).digest('hex');

async function newestSecret(environmentId = t.environments.a): Promise<string> {
  return (await signingSecrets(t.deps, environmentId))[0].secret;
}

async function settingsOf(client = t.a): Promise<{ allowedOrigins: string[]; subscriberHashSessions: boolean; applicationIdentifier: string }> {
  return (await client.get('/v1/inbox/settings').expect(200)).body.data;
}

/** Turns sessions on for the client's environment: its application identifier. */
async function turnSessionsOn(client = t.a): Promise<string> {
  return (await client.put('/v1/inbox/settings', { subscriberHashSessions: true }).expect(200)).body.data.applicationIdentifier;
}

const session = (body: object) => t.http.post('/v1/inbox/session').send(body);

/** Requests with a subscriber token, as a browser sends them. */
const as = (token: string) => ({
  get: (path: string) => t.http.get(path).set('Authorization', `Bearer ${token}`),
  patch: (path: string, body: object) => t.http.patch(path).set('Authorization', `Bearer ${token}`).send(body),
});

const claimsOf = (token: string) => JSON.parse(Buffer.from(token.split('.')[1], 'base64url').toString());

describe('POST /inbox/session (createInboxSession)', () => {
  beforeEach(async () => {
    for (const subscriberId of ['ada', 'grace']) await createSubscriber(t.a, { subscriberId });
  });

  it('is off by default in every environment: a right hash is refused with 403 until the owner turns sessions on', async () => {
    const settings = await settingsOf();
    expect(settings).toEqual({ allowedOrigins: [], subscriberHashSessions: false, applicationIdentifier: expect.stringMatching(/^app_[0-9a-f]{24}$/) });
    const request = { applicationIdentifier: settings.applicationIdentifier, subscriberId: 'ada', subscriberHash: hashOf(await newestSecret(), 'ada') };
    const off = await session(request).expect(403);
    expect(off.body).toMatchObject({ statusCode: 403, error: 'Forbidden', message: expect.stringContaining('subscriberHashSessions'), path: '/v1/inbox/session' });

    await turnSessionsOn();
    await session(request).expect(201);
    // Another environment of the same organization keeps its own setting, and its own identifier.
    const production = await settingsOf(t.aProduction);
    expect(production.subscriberHashSessions).toBe(false);
    expect(production.applicationIdentifier).not.toBe(settings.applicationIdentifier);
  });

  it('answers the one-hour subscriber token the token operation mints, which opens that subscriber’s inbox only', async () => {
    await createWorkflow(t.a, { workflowId: 'note', steps: [step.inApp({ content: 'for {{subscriber.subscriberId}}' })] });
    for (const to of ['ada', 'grace']) await t.a.post('/v1/events/trigger', { name: 'note', to }).expect(201);
    await new JobRunner(t.deps).runUntilIdle();
    const applicationIdentifier = await turnSessionsOn();

    const res = await session({ applicationIdentifier, subscriberId: 'ada', subscriberHash: hashOf(await newestSecret(), 'ada').toUpperCase() }).expect(201);
    const { token, expiresAt } = res.body.data;
    const claims = claimsOf(token);
    expect(claims).toMatchObject({ sub: 'ada', aud: 'herald-inbox' });
    expect(claims.exp - claims.iat).toBe(3600);
    expect(expiresAt).toBe(new Date(t.clock.now().getTime() + 3600_000).toISOString());

    const feed = (await as(token).get('/v1/inbox/messages').expect(200)).body;
    expect(feed.data.map((item: { body: string }) => item.body)).toEqual(['for ada']);
    const [grace] = (await t.a.get('/v1/subscribers/grace/messages').expect(200)).body.data;
    await as(token).patch(`/v1/inbox/messages/${grace.messageId}`, { read: true }).expect(404);
    await as(token).get('/v1/subscribers').expect(401);
  });

  it('refuses a wrong hash and an unknown subscriber with one and the same 401, so no caller learns who exists', async () => {
    const applicationIdentifier = await turnSessionsOn();
    const secret = await newestSecret();
    const refusals = [
      await session({ applicationIdentifier, subscriberId: 'ada', subscriberHash: hashOf(secret, 'grace') }).expect(401),
      await session({ applicationIdentifier, subscriberId: 'ada', subscriberHash: hashOf('not the secret', 'ada') }).expect(401),
      await session({ applicationIdentifier, subscriberId: 'nobody', subscriberHash: hashOf('not the secret', 'nobody') }).expect(401),
      // A right hash for a subscriber who does not exist: only the secret's holder can make one, and still learns nothing.
      await session({ applicationIdentifier, subscriberId: 'nobody', subscriberHash: hashOf(secret, 'nobody') }).expect(401),
    ];
    for (const res of refusals) {
      expect(res.body).toEqual({
        statusCode: 401,
        error: 'Unauthorized',
        message: refusals[0].body.message,
        timestamp: expect.any(String),
        path: '/v1/inbox/session',
      });
    }
    expect(refusals[0].body.message).toMatch(/does not match.*or there is no such subscriber/);
    // Nothing was created for the unknown subscriber: a session never upserts.
    await t.a.get('/v1/subscribers/nobody').expect(404);
  });

  it('refuses an unknown applicationIdentifier with 422 naming the field, and a malformed hash or profile fields with 400', async () => {
    await turnSessionsOn();
    const hash = hashOf(await newestSecret(), 'ada');
    const unknown = await session({ applicationIdentifier: 'app_000000000000000000000000', subscriberId: 'ada', subscriberHash: hash }).expect(422);
    expect(unknown.body).toMatchObject({ statusCode: 422, details: [{ field: 'body/applicationIdentifier', message: expect.any(String) }] });
    const { applicationIdentifier } = await settingsOf();
    const short = await session({ applicationIdentifier, subscriberId: 'ada', subscriberHash: hash.slice(0, 63) }).expect(400);
    expect(short.body.details).toEqual([expect.objectContaining({ field: 'body/subscriberHash' })]);
    const profile = await session({ applicationIdentifier, subscriberId: 'ada', subscriberHash: hash, firstName: 'Eve' }).expect(400);
    expect(profile.body.details).toEqual([{ field: 'body/firstName', message: 'is not allowed' }]);
    await session({ applicationIdentifier, subscriberId: 'ada' }).expect(400);
    await t.http.post('/v1/inbox/session').set('Content-Type', 'application/json').send('{"broken').expect(400);
  });

  it('takes a hash made with either live secret, and none made with a retired one', async () => {
    const applicationIdentifier = await turnSessionsOn();
    const first = await newestSecret();
    await addSigningSecret(t.deps, t.environments.a);
    const second = await newestSecret();
    for (const secret of [first, second]) await session({ applicationIdentifier, subscriberId: 'ada', subscriberHash: hashOf(secret, 'ada') }).expect(201);
    // A third secret retires the first: every hash made with it stops working at once.
    await addSigningSecret(t.deps, t.environments.a);
    await session({ applicationIdentifier, subscriberId: 'ada', subscriberHash: hashOf(first, 'ada') }).expect(401);
    await session({ applicationIdentifier, subscriberId: 'ada', subscriberHash: hashOf(second, 'ada') }).expect(201);
  });

  it('keeps to the environment the applicationIdentifier names: another environment’s hash opens nothing', async () => {
    await createSubscriber(t.b, { subscriberId: 'ada' });
    const applicationIdentifier = await turnSessionsOn(t.b);
    await session({ applicationIdentifier, subscriberId: 'ada', subscriberHash: hashOf(await newestSecret(t.environments.a), 'ada') }).expect(401);
    const token = (await session({ applicationIdentifier, subscriberId: 'ada', subscriberHash: hashOf(await newestSecret(t.environments.b), 'ada') }).expect(201)).body.data.token;
    // B's token: B's inbox, which is empty, whatever A's ada has.
    expect((await as(token).get('/v1/inbox/counts').expect(200)).body.data.total).toBe(0);
  });

  it('refuses the next session at once when the owner turns sessions off again', async () => {
    const applicationIdentifier = await turnSessionsOn();
    const request = { applicationIdentifier, subscriberId: 'ada', subscriberHash: hashOf(await newestSecret(), 'ada') };
    const token = (await session(request).expect(201)).body.data.token;
    const off = await t.a.put('/v1/inbox/settings', { subscriberHashSessions: false }).expect(200);
    expect(off.body.data.subscriberHashSessions).toBe(false);
    await session(request).expect(403);
    // A token handed out before lives out its hour, as any token does.
    await as(token).get('/v1/inbox/counts').expect(200);
  });

  it('answers CORS from the environment’s allowed origins: a browser on another origin gets no session', async () => {
    const applicationIdentifier = await turnSessionsOn();
    await t.a.put('/v1/inbox/settings', { allowedOrigins: ['https://app.example.com'] }).expect(200);
    await t.b.put('/v1/inbox/settings', { allowedOrigins: ['https://other.example.com'] }).expect(200);
    const request = { applicationIdentifier, subscriberId: 'ada', subscriberHash: hashOf(await newestSecret(), 'ada') };

    const preflight = await t.http
      .options('/v1/inbox/session')
      .set('Origin', 'https://app.example.com')
      .set('Access-Control-Request-Method', 'POST')
      .set('Access-Control-Request-Headers', 'content-type')
      .expect(204);
    expect(preflight.headers['access-control-allow-origin']).toBe('https://app.example.com');
    expect(preflight.headers['access-control-allow-methods']).toMatch(/POST/);
    // A preflight is answered alike for every origin: which sites some environment allows is no one's to learn.
    const anyOrigin = await t.http.options('/v1/inbox/session').set('Origin', 'https://evil.example').set('Access-Control-Request-Method', 'POST').expect(204);
    expect(anyOrigin.headers['access-control-allow-origin']).toBe('https://evil.example');

    const allowed = await session(request).set('Origin', 'https://app.example.com').expect(201);
    expect(allowed.headers['access-control-allow-origin']).toBe('https://app.example.com');
    // B's origin is no origin of A's application: refused, and the page there may read why.
    const foreign = await session(request).set('Origin', 'https://other.example.com').expect(403);
    expect(foreign.body.message).toMatch(/Origin https:\/\/other\.example\.com may not start sessions/);
    // Refused alike, and readable alike, from an origin another environment allows and from one none does.
    const nowhere = await session(request).set('Origin', 'https://evil.example').expect(403);
    expect(nowhere.body.message).toMatch(/Origin https:\/\/evil\.example may not start sessions/);
    expect([foreign.headers['access-control-allow-origin'], nowhere.headers['access-control-allow-origin']]).toEqual(['https://other.example.com', 'https://evil.example']);
    // A server's request carries no Origin: no CORS header, and no origin to check.
    const server = await session(request).expect(201);
    expect(server.headers['access-control-allow-origin']).toBeUndefined();
    // Nor does a page on Herald's own origin need allowing, whether its browser says so or only its Origin does.
    await session(request).set('Origin', 'https://herald.example.com').set('Sec-Fetch-Site', 'same-origin').expect(201);
    await session(request).set('Host', 'herald.example.com').set('Origin', 'https://herald.example.com').expect(201);
    await session(request).set('Host', 'herald.example.com').set('Origin', 'https://herald.example.com').set('Sec-Fetch-Site', 'cross-site').expect(403);
  });

  it('is limited per client address, as every request without a credential is', async () => {
    const applicationIdentifier = await turnSessionsOn();
    const token = (await t.a.post('/v1/subscribers/ada/inbox-tokens', {}).expect(201)).body.data.token;
    const wrong = { applicationIdentifier, subscriberId: 'ada', subscriberHash: '0'.repeat(64) };
    const first = await session(wrong).expect(401);
    expect(first.headers.ratelimit).toBe('"unauthenticated"; r=19; t=1');
    const statuses: number[] = [];
    for (let i = 0; i < 19; i++) statuses.push((await session(wrong)).status);
    expect(statuses).toEqual(Array(19).fill(401));
    const limited = await session({ ...wrong, subscriberHash: hashOf(await newestSecret(), 'ada') }).expect(429);
    expect(limited.headers['retry-after']).toBe('1');
    // A subscriber token from the same address spends its own bucket.
    await as(token).get('/v1/inbox/counts').expect(200);
  });
});

describe('PUT /inbox/settings (updateInboxSettings) with subscriberHashSessions', () => {
  it('changes only the settings the body names, and refuses an empty body or a new applicationIdentifier with 400', async () => {
    const before = await settingsOf();
    await t.a.put('/v1/inbox/settings', { allowedOrigins: ['https://app.example.com'] }).expect(200);
    const on = await t.a.put('/v1/inbox/settings', { subscriberHashSessions: true }).expect(200);
    expect(on.body.data).toEqual({ allowedOrigins: ['https://app.example.com'], subscriberHashSessions: true, applicationIdentifier: before.applicationIdentifier });
    const origins = await t.a.put('/v1/inbox/settings', { allowedOrigins: [] }).expect(200);
    expect(origins.body.data.subscriberHashSessions).toBe(true);
    await t.a.put('/v1/inbox/settings', {}).expect(400);
    await t.a.put('/v1/inbox/settings', { applicationIdentifier: 'app_mine' }).expect(400);
    expect((await settingsOf()).applicationIdentifier).toBe(before.applicationIdentifier);
  });
});
