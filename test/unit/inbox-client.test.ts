// herald/client's createInboxClient against a listening Herald: every helper through the real
// inbox API, and the live subscription over a real socket, resumed with Last-Event-ID.
import { createHmac } from 'node:crypto';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.js';
import { listen } from '../helpers/browser.js';
import { createSubscriber, createWorkflow, step, uniqueId } from '../helpers/factories.js';
import { JobRunner } from '../../src/engine/runner.js';
import { signingSecrets } from '../../src/engine/inbox-tokens.js';
import { createInboxClient, InboxError, sessionTokens, startInboxSession, type InboxEvent } from '../../src/client/index.js';

let t: TestApp;
let server: Awaited<ReturnType<typeof listen>>;
let subscriberId: string;
let token: string;
beforeAll(async () => {
  t = await startTestApp();
  server = await listen(t.app);
});
beforeEach(async () => {
  subscriberId = uniqueId('reader');
  await createSubscriber(t.a, { subscriberId });
  token = (await t.a.post(`/v1/subscribers/${subscriberId}/inbox-tokens`, {}).expect(201)).body.data.token;
});
afterEach(async () => t.assertContract());
afterAll(async () => {
  await server?.close();
  await t?.close();
});

let workflowReady = false;
/** Delivers `n` in-app items to the subscriber: triggered, then run by a worker. */
async function deliver(n: number, text = 'hello'): Promise<void> {
  if (!workflowReady) {
    await createWorkflow(t.a, {
      workflowId: 'note',
      steps: [step.inApp({ subject: 'Note', content: '{{payload.text}}', primaryAction: { label: 'Open', url: 'https://example.com/{{payload.text}}' } })],
    });
    workflowReady = true;
  }
  for (let i = 0; i < n; i++) {
    t.clock.advance(1000);
    await t.a.post('/v1/events/trigger', { name: 'note', to: subscriberId, payload: { text: `${text}-${i}` } }).expect(201);
  }
  await new JobRunner(t.deps).runUntilIdle();
}

describe('createInboxClient', () => {
  it('reads the feed and counts, marks one item, acts on one, removes one and marks the rest read up to the newest shown', async () => {
    await deliver(3);
    const inbox = createInboxClient({ baseUrl: server.url, token });
    const page = await inbox.feed({ limit: 10 });
    expect(page.data.map((item) => item.body)).toEqual(['hello-2', 'hello-1', 'hello-0']);
    expect(page.counts).toEqual({ unread: 3, unseen: 3, total: 3, archived: 0 });

    const read = await inbox.mark(page.data[2].messageId, { read: true });
    expect(read.readAt).not.toBeNull();
    expect(await inbox.counts()).toMatchObject({ unread: 2, total: 3 });
    const acted = await inbox.act(page.data[1].messageId, 'primary');
    expect(acted.primaryAction).toMatchObject({ label: 'Open' });
    await inbox.remove(page.data[0].messageId);
    expect(await inbox.counts()).toMatchObject({ unread: 0, total: 2 });

    await deliver(1, 'late');
    const { updated, counts } = await inbox.markAllRead(page.data[1].messageId);
    expect(updated).toBe(0);
    expect(counts).toMatchObject({ unread: 1, total: 3 });
    expect((await inbox.feed({ status: 'unread' })).data.map((item) => item.body)).toEqual(['late-0']);
    expect(Array.isArray(await inbox.preferences())).toBe(true);
  });

  it('throws an InboxError with the error body when the token is refused, and asks a token function before each request', async () => {
    const refused = createInboxClient({ baseUrl: `${server.url}/v1`, token: 'not-a-token' });
    const error = await refused.counts().catch((err: unknown) => err);
    expect(error).toBeInstanceOf(InboxError);
    expect(error).toMatchObject({ statusCode: 401, body: { statusCode: 401, error: 'Unauthorized' } });

    let asked = 0;
    const renewing = createInboxClient({ baseUrl: server.url, token: async () => (++asked, token) });
    await renewing.counts();
    await renewing.feed();
    expect(asked).toBe(2);
  });

  it('streams new items live, and a subscription resumed after its last event id gets what it missed, replayed', { timeout: 20_000 }, async () => {
    const inbox = createInboxClient({ baseUrl: server.url, token });
    const events: InboxEvent[] = [];
    const live = inbox.subscribe({ onEvent: (event) => events.push(event) });
    await expect.poll(() => events.map((e) => e.type)).toEqual(['counts']);
    await deliver(1, 'live');
    // Woken after the commit, not by the every-3-seconds catch-up: well inside 2 s.
    await expect.poll(() => events.map((e) => e.type), { timeout: 2000 }).toEqual(['counts', 'notification.created']);
    expect(events[1].item?.body).toBe('live-0');
    expect(events[1].counts).toMatchObject({ unread: 1 });
    const resumeAfter = live.lastEventId;
    expect(resumeAfter).toBe(events[1].id);
    live.close();

    await deliver(2, 'missed');
    const replayed: InboxEvent[] = [];
    const resumed = inbox.subscribe({ onEvent: (event) => replayed.push(event) }, { lastEventId: resumeAfter });
    await expect.poll(() => replayed.map((e) => e.item?.body)).toEqual(['missed-0', 'missed-1']);
    expect(replayed.map((e) => e.type)).toEqual(['notification.created', 'notification.created']);
    expect(replayed.map((e) => Number(e.id))).toEqual([Number(resumeAfter) + 1, Number(resumeAfter) + 2]);
    resumed.close();
  });
});

describe('startInboxSession and sessionTokens', () => {
  /** What the customer's backend renders into the page: the environment's identifier and the subscriber's hash. */
  async function sessionOptions(subscriber = subscriberId) {
    const { applicationIdentifier } = (await t.a.put('/v1/inbox/settings', { subscriberHashSessions: true }).expect(200)).body.data;
    const [secret] = await signingSecrets(t.deps, t.environments.a);
    const subscriberHash = createHmac('sha256', secret.secret).update(subscriber).digest('hex');
    return { baseUrl: server.url, applicationIdentifier, subscriberId: subscriber, subscriberHash };
  }

  it('trades a subscriber hash for a token the inbox client opens the subscriber’s inbox with', async () => {
    await deliver(1, 'session');
    const session = await startInboxSession(await sessionOptions());
    expect(session.expiresAt).toBe(new Date(t.clock.now().getTime() + 3600_000).toISOString());
    const inbox = createInboxClient({ baseUrl: server.url, token: session.token });
    expect((await inbox.feed()).data.map((item) => item.body)).toEqual(['session-0']);
  });

  it('throws an InboxError with the error body when Herald refuses the hash', async () => {
    const options = await sessionOptions();
    const error = await startInboxSession({ ...options, subscriberHash: 'f'.repeat(64) }).catch((err: unknown) => err);
    expect(error).toBeInstanceOf(InboxError);
    expect(error).toMatchObject({ statusCode: 401, body: { statusCode: 401, error: 'Unauthorized', path: '/v1/inbox/session' } });
  });

  it('gives createInboxClient a token source that starts one session and keeps it while it is fresh', async () => {
    const options = await sessionOptions();
    let sessions = 0;
    const counting: typeof fetch = (input, init) => {
      if (String(input instanceof Request ? input.url : input).endsWith('/inbox/session')) sessions += 1;
      return fetch(input, init);
    };
    const inbox = createInboxClient({ baseUrl: server.url, token: sessionTokens({ ...options, fetch: counting }) });
    expect(await inbox.counts()).toMatchObject({ total: 0 });
    await inbox.feed();
    expect(sessions).toBe(1);
  });
});
