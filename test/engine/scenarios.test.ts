import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.js';
import { createIntegration, createSubscriber, createWorkflow } from '../helpers/factories.js';
import { startHttpPeer, startSmtpPeer } from '../helpers/peers.js';
import { startWebhookReceiver } from '../helpers/webhook.js';
import { JobRunner } from '../../src/engine/runner.js';
import { insertSubscriber } from '../../src/db/repos/subscribers.js';
import { fanoutShards } from '../../src/db/fanout-shards.js';
import { FANOUT_BATCH_SIZE } from '../../src/db/repos/topics.js';
import { testDatabaseUrl } from '../helpers/db.js';
import { countStatements, onStatements, recordQueries } from '../helpers/queries.js';
import { countTurns } from '../helpers/turns.js';
import { compilesPosted } from '../helpers/thread-posts.js';
import { DIGEST_EVENTS_BYTES } from '../../src/engine/digests.js';
import { digestRiderSlices, RIDERS_A_READ } from '../../src/db/repos/digest-jobs.js';
import { SLICE_CHARS } from '../../src/db/chunks.js';
import { claimDueJobs } from '../../src/db/repos/jobs.js';
import { executeJob } from '../../src/engine/execute.js';
import { BATCH_MESSAGE_CHARS, executeInAppBatch } from '../../src/engine/in-app-batch.js';

let t: TestApp;
let worker: JobRunner;
beforeAll(async () => {
  t = await startTestApp();
  worker = new JobRunner(t.deps, { random: () => 0.5 });
});
// Each test starts from organizations of its own, where ada is the one subscriber.
beforeEach(async () => {
  await t.renew();
  await createSubscriber(t.a, { subscriberId: 'ada', firstName: 'Ada', email: 'ada@example.com' });
});
afterEach(async () => t.assertContract());
afterAll(async () => t?.close());

const run = () => worker.runUntilIdle();
const later = async (ms: number) => {
  t.clock.advance(ms);
  await run();
};

/** The workflows more than one test triggers: each such test makes the ones it needs. */
const WORKFLOWS = {
  welcome: {
    name: 'Welcome',
    steps: [{ type: 'in_app', template: { subject: 'Hi {{subscriber.firstName}}', content: 'Welcome, {{subscriber.firstName}}: {{payload.what}}', url: '/p/{{payload.id}}' } }],
  },
  commentMail: {
    name: 'Comment mail',
    steps: [{ type: 'email', template: { subject: 'New comment for {{subscriber.firstName}}', content: '<p>{{payload.comment}}</p>', preheader: 'Read it, {{subscriber.firstName}} & reply' } }],
  },
  chatPing: { name: 'Chat ping', steps: [{ type: 'chat', template: { content: '{{payload.text}} & more' } }] },
  newsletter: { name: 'Newsletter', steps: [{ type: 'in_app', template: { content: 'news' } }] },
  later: { name: 'Later', steps: [{ type: 'delay', amount: 1, unit: 'hours' }, { type: 'in_app', template: { content: 'later' } }] },
  reminded: {
    name: 'Reminded',
    steps: [{ type: 'in_app', template: { content: 'first' } }, { type: 'delay', amount: 1, unit: 'hours' }, { type: 'in_app', template: { content: 'reminder' } }],
  },
  broadcast: { name: 'Broadcast', steps: [{ type: 'in_app', template: { content: 'hello' } }] },
};

async function trigger(body: object): Promise<string> {
  const res = await t.a.post('/v1/events/trigger', body).expect(201);
  expect(res.body.data).toMatchObject({ acknowledged: true, status: 'processed' });
  return res.body.data.transactionId;
}

async function notificationOf(transactionId: string, subscriberId?: string) {
  const list = await t.a.get(`/v1/notifications?transactionId=${transactionId}${subscriberId ? `&subscriberId=${subscriberId}` : ''}`).expect(200);
  expect(list.body.data).toHaveLength(1);
  return (await t.a.get(`/v1/notifications/${list.body.data[0].notificationId}`).expect(200)).body.data;
}

async function feed(subscriberId: string) {
  return (await t.a.get(`/v1/subscribers/${subscriberId}/messages?limit=100`).expect(200)).body;
}

/** The contents of a subscriber's in-app messages, newest first. */
async function contentsOf(subscriberId: string): Promise<string[]> {
  return (await feed(subscriberId)).data.map((m: { content: string }) => m.content);
}

/** Cancels an event, answering the body (`{data: true}` or `{data: false}`). */
async function cancel(transactionId: string): Promise<{ data: boolean }> {
  return (await t.a.delete(`/v1/events/trigger/${transactionId}`).expect(200)).body;
}

describe('an in-app step', () => {
  beforeEach(async () => {
    await createWorkflow(t.a, WORKFLOWS.welcome);
  });

  it('stores the rendered message in the feed, where it can be read and marked', async () => {
    const tx = await trigger({ name: 'welcome', to: 'ada', payload: { what: '<b>news</b>', id: 7 } });
    expect((await notificationOf(tx)).status).toBe('pending');

    await run();
    const messages = await feed('ada');
    expect(messages.totalCount).toBe(1);
    expect(messages.data[0]).toMatchObject({ subject: 'Hi Ada', content: 'Welcome, Ada: <b>news</b>', url: '/p/7', seen: false, read: false, transactionId: tx, workflowId: 'welcome' });

    const read = await t.a.patch(`/v1/subscribers/ada/messages/${messages.data[0].messageId}`, { read: true }).expect(200);
    expect(read.body.data).toMatchObject({ seen: true, read: true, readAt: t.clock.now().toISOString() });
    expect((await t.a.get('/v1/subscribers/ada/messages?read=false').expect(200)).body.totalCount).toBe(0);

    const notification = await notificationOf(tx);
    expect(notification).toMatchObject({ status: 'completed', channels: ['in_app'], subscriberId: 'ada' });
    expect(notification.jobs).toMatchObject([{ type: 'in_app', status: 'completed', providerId: 'herald', attempts: 1, executionDetails: [{ status: 'success' }] }]);
  });

  it('runs once even when the runner is asked again', async () => {
    await trigger({ name: 'welcome', to: 'ada', payload: { what: 'news', id: 7 } });
    await run();
    expect((await feed('ada')).totalCount).toBe(1);
    await run();
    expect((await feed('ada')).totalCount).toBe(1);
  });

  it('settles a claimed batch whose subscribers have large data a part at a time, the event loop turning between', async () => {
    // Ten subscribers of 300,000 characters of data: parts of three (within SLICE_CHARS), four parts.
    const ids = Array.from({ length: 10 }, (_, i) => `heavy-${i}`);
    for (const id of ids) await t.a.post('/v1/subscribers', { subscriberId: id, firstName: id, data: { blob: 'x'.repeat(300_000) } }).expect(201);
    const tx = await trigger({ name: 'welcome', to: ids, payload: { what: 'news', id: 7 } });
    const turns = countTurns();
    await run();
    expect(turns.stop()).toBeGreaterThanOrEqual(Math.ceil(10 / Math.floor(SLICE_CHARS / 300_020)) - 1);
    for (const id of ids) expect(await contentsOf(id)).toEqual([`Welcome, ${id}: news`]);
    expect((await t.a.get(`/v1/notifications?transactionId=${tx}&status=completed&limit=1`).expect(200)).body.totalCount).toBe(10);
  });
});

describe('an email step', () => {
  it('reaches a real SMTP server with the rendered subject, an HTML-escaped body and its preheader', async () => {
    const smtp = await startSmtpPeer();
    try {
      await t.a.post('/v1/integrations', { providerId: 'smtp', credentials: { host: '127.0.0.1', port: smtp.port, from: 'herald@example.com', senderName: 'Herald' } }).expect(201);
      await createWorkflow(t.a, WORKFLOWS.commentMail);
      const tx = await trigger({ name: 'comment-mail', to: 'ada', payload: { comment: '<script>alert(1)</script>' } });
      await run();
      expect(smtp.mails).toHaveLength(1);
      expect(smtp.mails[0]).toMatchObject({ subject: 'New comment for Ada', to: ['ada@example.com'], from: 'herald@example.com' });
      // The body, quoted-printable undone: the preheader, escaped, as its first and hidden element.
      const html = smtp.mails[0].raw.replace(/=\r?\n/g, '').replace(/=3D/g, '=');
      expect(html).toContain('<div style="display:none;max-height:0;overflow:hidden;mso-hide:all" aria-hidden="true">Read it, Ada &amp; reply</div><p>&lt;script&gt;alert(1)&lt;/script&gt;</p>');
      expect(smtp.mails[0].raw).toMatch(/X-Herald-Delivery-Id: [0-9a-f]{24}/i);
      expect((await notificationOf(tx)).jobs[0]).toMatchObject({ status: 'completed', providerId: 'smtp' });
    } finally {
      await smtp.close();
    }
  });

  it('compiles costly templates on the payload check thread before the job renders them, its body HTML-escaped as before', async () => {
    const smtp = await startSmtpPeer();
    try {
      await t.a.post('/v1/integrations', { providerId: 'smtp', credentials: { host: '127.0.0.1', port: smtp.port, from: 'herald@example.com', senderName: 'Herald' } }).expect(201);
      await createWorkflow(t.a, WORKFLOWS.commentMail);
      const content = '<p>{{payload.comment}}</p>'.repeat(60);
      const posted = await compilesPosted(async () => {
        await trigger({ name: 'comment-mail', to: 'ada', payload: { comment: '<b>hi</b>' }, overrides: { email: { content } } });
        await run();
      });
      // With the workflow's own, unless an earlier test compiled them: each as the render takes it.
      expect(posted.filter(({ source }) => source === content)).toEqual([{ source: content, escape: true }]);
      expect(posted.every(({ source, escape }) => escape === (source === content))).toBe(true);
      expect(smtp.mails).toHaveLength(1);
      const html = smtp.mails[0].raw.replace(/=\r?\n/g, '').replace(/=3D/g, '=');
      expect(html).toContain('<p>&lt;b&gt;hi&lt;/b&gt;</p>'.repeat(60));
      expect(smtp.mails[0].subject).toBe('New comment for Ada');
    } finally {
      await smtp.close();
    }
  });

  it('fails at once, with the reason, when the subscriber has no email address', async () => {
    // An SMTP integration whose server is gone: the send fails before it is tried.
    await createIntegration(t.a, { providerId: 'smtp', credentials: { host: '127.0.0.1', port: 1, from: 'herald@example.com', senderName: 'Herald' } });
    await createWorkflow(t.a, WORKFLOWS.commentMail);
    await t.a.post('/v1/subscribers', { subscriberId: 'no-mail' }).expect(201);
    const tx = await trigger({ name: 'comment-mail', to: 'no-mail', payload: { comment: 'x' } });
    await run();
    const notification = await notificationOf(tx);
    expect(notification.status).toBe('failed');
    expect(notification.jobs[0]).toMatchObject({ status: 'failed', attempts: 1 });
    expect(notification.jobs[0].executionDetails[0].detail).toBe('Subscriber no-mail has no email address');
  });
});

describe('a chat step', () => {
  beforeEach(async () => {
    await createIntegration(t.a, { providerId: 'slack' });
    await createWorkflow(t.a, WORKFLOWS.chatPing);
  });

  it('posts to the subscriber’s webhook exactly once, with a stable delivery id', async () => {
    const hook = await startHttpPeer();
    try {
      await t.a.put('/v1/subscribers/ada/credentials', { providerId: 'slack', credentials: { webhookUrl: `${hook.url}/hook` } }).expect(200);
      const tx = await trigger({ name: 'chat-ping', to: 'ada', payload: { text: 'Deploy done' } });
      await run();
      await run();
      expect(hook.requests).toHaveLength(1);
      expect(hook.requests[0]).toMatchObject({ method: 'POST', path: '/hook' });
      expect(hook.requests[0].json()).toEqual({ text: 'Deploy done & more' });
      const job = (await notificationOf(tx)).jobs[0];
      expect(hook.requests[0].headers['x-herald-delivery-id']).toBe(job.jobId);
    } finally {
      await hook.close();
    }
  });

  it('skips a send that the subscriber turned off, everywhere or for this workflow', async () => {
    const hook = await startHttpPeer();
    try {
      const ids = ['chat-on', 'chat-off', 'chat-off-here'];
      for (const subscriberId of ids) {
        await t.a.post('/v1/subscribers', { subscriberId }).expect(201);
        await t.a.put(`/v1/subscribers/${subscriberId}/credentials`, { providerId: 'slack', credentials: { webhookUrl: `${hook.url}/${subscriberId}` } }).expect(200);
      }
      await t.a.patch('/v1/subscribers/chat-off/preferences', { channels: { chat: false } }).expect(200);
      await t.a.patch('/v1/subscribers/chat-off-here/preferences', { workflowId: 'chat-ping', channels: { chat: false } }).expect(200);
      const tx = await trigger({ name: 'chat-ping', to: ids, payload: { text: 'only some' } });
      await run();
      expect(hook.requests.map((request) => request.path)).toEqual(['/chat-on']);
      for (const subscriberId of ['chat-off', 'chat-off-here']) {
        const [job] = (await notificationOf(tx, subscriberId)).jobs;
        expect(job).toMatchObject({ status: 'skipped', executionDetails: [{ status: 'warning', detail: "The subscriber's preferences turn chat off for this workflow" }] });
      }
    } finally {
      await hook.close();
    }
  });

  it('settles sends that finish together in shared commits on SQLite', async () => {
    const ids = Array.from({ length: 12 }, (_, i) => `chat-batch-${i}`);
    // The receiver answers once every send has arrived: all of them finish at the same moment.
    let answerAll!: () => void;
    const allArrived = new Promise<void>((resolve) => (answerAll = resolve));
    const hook = await startHttpPeer(async (_request, index) => {
      if (index === ids.length - 1) answerAll();
      await allArrived;
      return { status: 200, body: 'ok' };
    });
    try {
      for (const subscriberId of ids) {
        await t.a.post('/v1/subscribers', { subscriberId }).expect(201);
        await t.a.put(`/v1/subscribers/${subscriberId}/credentials`, { providerId: 'slack', credentials: { webhookUrl: `${hook.url}/${subscriberId}` } }).expect(200);
      }
      const tx = await trigger({ name: 'chat-ping', to: ids, payload: { text: 'together' } });
      const recording = recordQueries(t.db, /^commit/i);
      await run();
      const commits = recording.stop().length;
      expect(hook.requests.map((request) => request.path).sort()).toEqual(ids.map((id) => `/${id}`).sort());
      for (const subscriberId of ids) expect((await notificationOf(tx, subscriberId)).status).toBe('completed');
      // On PostgreSQL each send commits twice: its turn under Slack's send limits, then its outcome.
      if (testDatabaseUrl()) expect(commits).toBe(2 * ids.length);
      else expect(commits).toBeLessThan(ids.length / 2);
    } finally {
      await hook.close();
    }
  });

  // PostgreSQL parses and plans an unnamed statement on every run: a chat job is a dozen statements.
  it('retries a failing provider with backoff and delivers on the third attempt', async () => {
    const hook = await startHttpPeer((_req, index) => (index < 2 ? { status: 503, body: 'busy' } : { status: 200, body: 'ok' }));
    try {
      await t.a.post('/v1/subscribers', { subscriberId: 'flaky' }).expect(201);
      await t.a.put('/v1/subscribers/flaky/credentials', { providerId: 'slack', credentials: { webhookUrl: hook.url } }).expect(200);
      const tx = await trigger({ name: 'chat-ping', to: 'flaky', payload: { text: 'x' } });
      await run();
      expect(hook.requests).toHaveLength(1);
      expect((await notificationOf(tx)).jobs[0]).toMatchObject({ status: 'queued', attempts: 1 });
      await later(1000); // the first retry waits 2 s × (0.5 + jitter/2) = 1.5 s: not yet
      expect(hook.requests).toHaveLength(1);
      await later(1000);
      expect(hook.requests).toHaveLength(2);
      await later(3000);
      expect(hook.requests).toHaveLength(3);
      const notification = await notificationOf(tx);
      expect(notification.status).toBe('completed');
      expect(notification.jobs[0]).toMatchObject({ status: 'completed', attempts: 3 });
      expect(notification.jobs[0].executionDetails.map((d: { status: string; isRetry: boolean }) => [d.status, d.isRetry])).toEqual([
        ['failed', false],
        ['failed', true],
        ['success', true],
      ]);
      expect(new Set(hook.requests.map((r) => r.headers['x-herald-delivery-id'])).size).toBe(1);
    } finally {
      await hook.close();
    }
  });

  it("waits as long as a provider's Retry-After asks before trying again", async () => {
    const hook = await startHttpPeer((_req, index) => (index === 0 ? { status: 429, body: 'slow down', headers: { 'Retry-After': '60' } } : { status: 200, body: 'ok' }));
    try {
      await t.a.post('/v1/subscribers', { subscriberId: 'throttled' }).expect(201);
      await t.a.put('/v1/subscribers/throttled/credentials', { providerId: 'slack', credentials: { webhookUrl: hook.url } }).expect(200);
      const tx = await trigger({ name: 'chat-ping', to: 'throttled', payload: { text: 'x' } });
      await run();
      const [job] = (await notificationOf(tx)).jobs;
      expect(job).toMatchObject({ status: 'queued', runAt: new Date(t.clock.now().getTime() + 60_000).toISOString() });
      await later(59_000); // backoff alone would have retried after 1.5 s
      expect(hook.requests).toHaveLength(1);
      await later(1000);
      expect(hook.requests).toHaveLength(2);
      expect((await notificationOf(tx)).status).toBe('completed');
    } finally {
      await hook.close();
    }
  });

  it('fails at once when the provider refuses the request (4xx)', async () => {
    const hook = await startHttpPeer(() => ({ status: 404, body: 'no such hook' }));
    try {
      await t.a.post('/v1/subscribers', { subscriberId: 'gone-hook' }).expect(201);
      await t.a.put('/v1/subscribers/gone-hook/credentials', { providerId: 'slack', credentials: { webhookUrl: hook.url } }).expect(200);
      const tx = await trigger({ name: 'chat-ping', to: 'gone-hook', payload: { text: 'x' } });
      await run();
      await later(600_000);
      expect(hook.requests).toHaveLength(1);
      const job = (await notificationOf(tx)).jobs[0];
      expect(job).toMatchObject({ status: 'failed', attempts: 1 });
      expect(job.executionDetails[0].raw).toBe('404 no such hook');
    } finally {
      await hook.close();
    }
  });

  it('fails at once when the subscriber has no chat credentials', async () => {
    await t.a.post('/v1/subscribers', { subscriberId: 'no-chat' }).expect(201);
    const tx = await trigger({ name: 'chat-ping', to: 'no-chat', payload: { text: 'x' } });
    await run();
    expect((await notificationOf(tx)).jobs[0].executionDetails[0].detail).toMatch(/has no chat credentials/);
  });
});

describe('sms and push steps', () => {
  it('send a text through Twilio and a push through a signed webhook, to the subscriber’s number and devices', async () => {
    const twilio = await startHttpPeer(() => ({ status: 201, body: '{"sid":"SM1"}' }));
    const push = await startHttpPeer();
    try {
      await t.a.post('/v1/integrations', { providerId: 'twilio', credentials: { accountSid: 'AC1', token: 'tok', from: '+15005550006', baseUrl: twilio.url } }).expect(201);
      await t.a.post('/v1/integrations', { providerId: 'push-webhook', credentials: { webhookUrl: `${push.url}/push`, secretKey: 'k' } }).expect(201);
      await t.a.post('/v1/subscribers', { subscriberId: 'mobile', phone: '+447700900123' }).expect(201);
      await t.a.put('/v1/subscribers/mobile/credentials', { providerId: 'push-webhook', credentials: { deviceTokens: ['device-1'] } }).expect(200);
      await t.a
        .post('/v1/workflows', {
          name: 'Mobile',
          steps: [
            { type: 'sms', template: { content: 'Code {{payload.code}}' } },
            { type: 'push', template: { title: 'Code', content: '{{payload.code}} & more' } },
          ],
        })
        .expect(201);
      const tx = await trigger({ name: 'mobile', to: 'mobile', payload: { code: '1234' } });
      await run();
      expect(Object.fromEntries(new URLSearchParams(twilio.requests[0].body))).toMatchObject({ To: '+447700900123', Body: 'Code 1234' });
      expect(push.requests[0].json()).toMatchObject({ subscriberId: 'mobile', deviceTokens: ['device-1'], title: 'Code', content: '1234 & more' });
      expect((await notificationOf(tx)).jobs.map((j: { providerId: string; status: string }) => [j.providerId, j.status])).toEqual([
        ['twilio', 'completed'],
        ['push-webhook', 'completed'],
      ]);
    } finally {
      await twilio.close();
      await push.close();
    }
  });

  it("sends a push step's data as is, and a trigger's push override of data in its place", async () => {
    const push = await startHttpPeer();
    try {
      await t.a.post('/v1/integrations', { providerId: 'push-webhook', credentials: { webhookUrl: `${push.url}/push`, secretKey: 'k' } }).expect(201);
      await t.a.put('/v1/subscribers/ada/credentials', { providerId: 'push-webhook', credentials: { deviceTokens: ['device-1'] } }).expect(200);
      await createWorkflow(t.a, { name: 'Push data', steps: [{ type: 'push', template: { title: 'Hi', content: 'Hello', data: { screen: 'home', id: '{{payload.id}}' } } }] });
      await trigger({ name: 'push-data', to: 'ada', payload: { id: 7 } });
      await trigger({ name: 'push-data', to: 'ada', payload: { id: 8 }, overrides: { push: { data: { screen: 'post', postId: 8 } } } });
      await run();
      const sent = push.requests.map((request) => (request.json() as { data: { screen: string } }).data);
      expect(sent.sort((a, b) => a.screen.localeCompare(b.screen))).toEqual([
        { screen: 'home', id: '{{payload.id}}' },
        { screen: 'post', postId: 8 },
      ]);
    } finally {
      await push.close();
    }
  });
});

describe('preferences and conditions', () => {
  it('skip a send the subscriber turned off, with the reason, unless the workflow is critical', async () => {
    await t.a.post('/v1/subscribers', { subscriberId: 'quiet' }).expect(201);
    await t.a.patch('/v1/subscribers/quiet/preferences', { channels: { in_app: false } }).expect(200);
    await createWorkflow(t.a, WORKFLOWS.newsletter);
    await t.a.post('/v1/workflows', { name: 'Security', critical: true, steps: [{ type: 'in_app', template: { content: 'alert' } }] }).expect(201);
    const news = await trigger({ name: 'newsletter', to: 'quiet' });
    await trigger({ name: 'security', to: 'quiet' });
    await run();
    const job = (await notificationOf(news)).jobs[0];
    expect(job.status).toBe('skipped');
    expect(job.executionDetails[0]).toMatchObject({ status: 'warning', detail: "The subscriber's preferences turn in_app off for this workflow" });
    expect(await contentsOf('quiet')).toEqual(['alert']);

    // A subscriber's layer for one workflow counts for that workflow alone.
    await t.a.post('/v1/subscribers', { subscriberId: 'picky' }).expect(201);
    await t.a.patch('/v1/subscribers/picky/preferences', { workflowId: 'newsletter', channels: { in_app: false } }).expect(200);
    const picky = await trigger({ name: 'newsletter', to: 'picky' });
    await trigger({ name: 'security', to: 'picky' });
    await run();
    expect((await notificationOf(picky)).jobs[0].status).toBe('skipped');
    expect(await contentsOf('picky')).toEqual(['alert']);
  });

  it("send what the subscriber's choice for a workflow turns on, though their global layer turns it off", async () => {
    await createWorkflow(t.a, WORKFLOWS.newsletter);
    await t.a.post('/v1/subscribers', { subscriberId: 'only-news' }).expect(201);
    await t.a.patch('/v1/subscribers/only-news/preferences', { channels: { in_app: false } }).expect(200);
    await t.a.patch('/v1/subscribers/only-news/preferences', { workflowId: 'newsletter', channels: { in_app: true } }).expect(200);
    await t.a.post('/v1/workflows', { name: 'Promotions', steps: [{ type: 'in_app', template: { content: 'promo' } }] }).expect(201);
    const news = await trigger({ name: 'newsletter', to: 'only-news' });
    const promo = await trigger({ name: 'promotions', to: 'only-news' });
    await run();
    expect((await notificationOf(news)).jobs[0].status).toBe('completed');
    expect((await notificationOf(promo)).jobs[0].status).toBe('skipped');
    expect(await contentsOf('only-news')).toEqual(['news']);
  });

  it('skip a delay or a digest whose condition does not hold when it is reached, without waiting', async () => {
    await t.a
      .post('/v1/workflows', {
        name: 'Maybe later',
        steps: [
          { type: 'delay', amount: 1, unit: 'hours', conditions: [{ field: 'payload.wait', operator: 'eq', value: true }] },
          { type: 'digest', amount: 10, unit: 'minutes', conditions: [{ field: 'subscriber.data.digests', operator: 'eq', value: true }] },
          { type: 'in_app', template: { content: 'now {{payload.n}}' } },
        ],
      })
      .expect(201);
    await t.a.post('/v1/subscribers', { subscriberId: 'impatient', data: { digests: false } }).expect(201);
    const now = await trigger({ name: 'maybe-later', to: 'impatient', payload: { wait: false, n: 1 } });
    await run();
    expect(await contentsOf('impatient')).toEqual(['now 1']);
    const notification = await notificationOf(now);
    expect(notification.status).toBe('completed');
    expect(notification.jobs).toMatchObject([
      { type: 'delay', status: 'skipped', executionDetails: [{ status: 'warning', detail: 'Step condition not met: payload.wait eq true' }] },
      { type: 'digest', status: 'skipped', executionDetails: [{ status: 'warning', detail: 'Step condition not met: subscriber.data.digests eq true' }] },
      { type: 'in_app', status: 'completed' },
    ]);

    // Conditions that hold: the delay waits its hour.
    const waiting = await trigger({ name: 'maybe-later', to: 'impatient', payload: { wait: true, n: 2 } });
    await run();
    expect((await notificationOf(waiting)).jobs).toMatchObject([{ type: 'delay', status: 'delayed' }]);
    await later(3_600_000);
    expect(await contentsOf('impatient')).toEqual(['now 2', 'now 1']);
  });

  it('skip a step whose condition does not hold, and run the next one', async () => {
    await t.a
      .post('/v1/workflows', {
        name: 'Conditional',
        steps: [
          { type: 'in_app', template: { content: 'urgent' }, conditions: [{ field: 'payload.priority', operator: 'eq', value: 'high' }] },
          { type: 'in_app', template: { content: 'always' } },
        ],
      })
      .expect(201);
    await t.a.post('/v1/subscribers', { subscriberId: 'cond' }).expect(201);
    const tx = await trigger({ name: 'conditional', to: 'cond', payload: { priority: 'low' } });
    await run();
    const notification = await notificationOf(tx);
    expect(notification.jobs.map((j: { status: string }) => j.status)).toEqual(['skipped', 'completed']);
    expect(notification.jobs[0].executionDetails[0].detail).toBe('Step condition not met: payload.priority eq "high"');
    expect(await contentsOf('cond')).toEqual(['always']);
  });
});

describe('delay and cancel', () => {
  it('holds the next step for the delay, then sends it', async () => {
    await createWorkflow(t.a, WORKFLOWS.later);
    await t.a.post('/v1/subscribers', { subscriberId: 'patient' }).expect(201);
    const tx = await trigger({ name: 'later', to: 'patient' });
    await run();
    expect((await notificationOf(tx)).jobs).toMatchObject([{ type: 'delay', status: 'delayed' }]);
    await later(59 * 60_000);
    expect((await feed('patient')).totalCount).toBe(0);
    await later(60_000);
    expect((await feed('patient')).totalCount).toBe(1);
  });

  it('waits a million weeks as long as it can: until the last instant of the year 9999', async () => {
    await t.a.post('/v1/workflows', { name: 'Forever', steps: [{ type: 'delay', amount: 1_000_000, unit: 'weeks' }, { type: 'in_app', template: { content: 'never' } }] }).expect(201);
    await t.a.post('/v1/subscribers', { subscriberId: 'forever' }).expect(201);
    const tx = await trigger({ name: 'forever', to: 'forever' });
    await later(365 * 86_400_000);
    expect((await feed('forever')).totalCount).toBe(0);
    expect((await notificationOf(tx)).jobs).toMatchObject([{ type: 'delay', status: 'delayed', runAt: '9999-12-31T23:59:59.999Z' }]);
  });

  it('waits until a time in the payload, at most until the last instant of the year 9999', async () => {
    await t.a.post('/v1/workflows', { name: 'Scheduled', steps: [{ type: 'delay', delayPath: 'sendAt' }, { type: 'in_app', template: { content: 'on time' } }] }).expect(201);
    await t.a.post('/v1/subscribers', { subscriberId: 'scheduled' }).expect(201);
    const sendAt = new Date(t.clock.now().getTime() + 3 * 86_400_000).toISOString();
    await trigger({ name: 'scheduled', to: 'scheduled', payload: { sendAt } });
    await later(2 * 86_400_000);
    expect((await feed('scheduled')).totalCount).toBe(0);
    await later(86_400_000);
    expect((await feed('scheduled')).totalCount).toBe(1);

    // 9999-12-31T23:59:59-14:00 is in the year 10000, which would sort before any due time.
    const far = await trigger({ name: 'scheduled', to: 'scheduled', payload: { sendAt: '9999-12-31T23:59:59-14:00' } });
    await later(86_400_000);
    expect((await feed('scheduled')).totalCount).toBe(1);
    expect((await notificationOf(far)).jobs).toMatchObject([{ type: 'delay', status: 'delayed', runAt: '9999-12-31T23:59:59.999Z' }]);
  });

  it('refuses a payload time that is no ISO 8601 time with a zone, or on a day the calendar lacks, naming the field', async () => {
    await t.a.post('/v1/workflows', { name: 'Scheduled', steps: [{ type: 'delay', delayPath: 'sendAt' }, { type: 'in_app', template: { content: 'on time' } }] }).expect(201);
    await t.a.post('/v1/subscribers', { subscriberId: 'scheduled' }).expect(201);
    for (const sendAt of ['soon', '2099-02-30T00:00:00Z', '2100-02-29T09:00:00Z', '2099-04-31T09:00:00+02:00', '2099-00-10T09:00:00Z', '2099-01-01T24:00:00Z', '2099-01-01T09:60:00Z', '2099-01-01T09:00:00+24:00', '2099-01-01T09:00:00']) {
      const res = await t.a.post('/v1/events/trigger', { name: 'scheduled', to: 'scheduled', payload: { sendAt } }).expect(422);
      expect(res.body.details, sendAt).toEqual([{ field: 'body/payload/sendAt', message: 'must be an ISO 8601 time with a zone, for the delay step delay' }]);
    }
    // A leap day, a zone without its colon, fractions of a second: times the calendar has.
    for (const sendAt of ['2096-02-29T09:00:00Z', '2099-01-01T09:00+0530', '2099-12-31T23:59:59.999-14:00']) {
      await trigger({ name: 'scheduled', to: 'scheduled', payload: { sendAt } });
    }
  });

  it('sends nothing once a delayed event is canceled, and says so', async () => {
    await createWorkflow(t.a, WORKFLOWS.later);
    await t.a.post('/v1/subscribers', { subscriberId: 'canceled' }).expect(201);
    const tx = await trigger({ name: 'later', to: 'canceled' });
    await run();
    expect((await cancel(tx))).toEqual({ data: true });
    await later(2 * 3_600_000);
    expect((await feed('canceled')).totalCount).toBe(0);
    const notification = await notificationOf(tx);
    expect(notification.status).toBe('canceled');
    expect(notification.jobs).toMatchObject([{ type: 'delay', status: 'canceled', executionDetails: [{ status: 'warning', detail: `Canceled with event ${tx}` }] }]);
    expect((await cancel(tx))).toEqual({ data: false });
  });

  it('shows a notification whose first message is sent and whose next waits as processing, and completed once canceled', async () => {
    await createWorkflow(t.a, WORKFLOWS.reminded);
    await t.a.post('/v1/subscribers', { subscriberId: 'reminded' }).expect(201);
    const tx = await trigger({ name: 'reminded', to: 'reminded' });
    await run();
    expect(await notificationOf(tx)).toMatchObject({ status: 'processing', jobs: [{ type: 'in_app', status: 'completed' }, { type: 'delay', status: 'delayed' }] });

    // Something was sent: not `canceled` ("canceled before anything was sent"), but completed.
    expect((await cancel(tx))).toEqual({ data: true });
    await later(2 * 3_600_000);
    expect(await contentsOf('reminded')).toEqual(['first']);
    expect(await notificationOf(tx)).toMatchObject({ status: 'completed', jobs: [{ type: 'in_app', status: 'completed' }, { type: 'delay', status: 'canceled' }] });
  });

  it('settles the notification of a job running when its event is canceled once that job ends', async () => {
    await createWorkflow(t.a, WORKFLOWS.reminded);
    await t.a.post('/v1/subscribers', { subscriberId: 'running-at-cancel' }).expect(201);
    const tx = await trigger({ name: 'reminded', to: 'running-at-cancel' });
    await run();
    // The delay's job taken by a worker that then died: cancel leaves a running job alone.
    const [notification] = await t.db('notifications').where({ transaction_id: tx });
    const expired = new Date(t.clock.now().getTime() - 1000).toISOString();
    await t.db('jobs').where({ notification_id: notification.id, type: 'delay' }).update({ status: 'running', lease_owner: 'gone', lease_expires_at: expired });
    expect((await cancel(tx))).toEqual({ data: true });
    expect((await notificationOf(tx)).status).toBe('processing');

    await run(); // the lease is over: another worker takes the job, finds the event canceled, and ends it
    expect(await notificationOf(tx)).toMatchObject({
      status: 'completed',
      jobs: [{ type: 'in_app', status: 'completed' }, { type: 'delay', status: 'canceled', executionDetails: [{ status: 'warning', detail: 'Canceled with its event before it ran' }] }],
    });
  });

  it('shows the members of a topic whose first message is sent and whose next waits as processing', async () => {
    await createWorkflow(t.a, WORKFLOWS.reminded);
    for (const subscriberId of ['reminded', 'running-at-cancel']) await createSubscriber(t.a, { subscriberId });
    await t.a.post('/v1/topics', { topicKey: 'reminded-team', name: 'Reminded team' }).expect(201);
    await t.a.post('/v1/topics/reminded-team/subscribers', { subscribers: ['reminded', 'running-at-cancel'] }).expect(200);
    const tx = await trigger({ name: 'reminded', to: { type: 'Topic', topicKey: 'reminded-team' } });
    await run();
    for (const subscriberId of ['reminded', 'running-at-cancel']) {
      expect(await notificationOf(tx, subscriberId)).toMatchObject({ status: 'processing', jobs: [{ type: 'in_app', status: 'completed' }, { type: 'delay', status: 'delayed' }] });
    }
  });

  it('answers true for an event whose job a worker has taken, which then ends without running, and says so', async () => {
    await createWorkflow(t.a, WORKFLOWS.newsletter);
    await t.a.post('/v1/subscribers', { subscriberId: 'taken-in-app' }).expect(201);
    const tx = await trigger({ name: 'newsletter', to: 'taken-in-app' });
    const claimed = await claimDueJobs(t.db, { owner: 'in-app-worker', now: t.clock.now(), leaseMs: 60_000, limit: 10 });
    expect(claimed.map((job) => job.type)).toEqual(['in_app']);
    expect((await cancel(tx))).toEqual({ data: true });
    await executeInAppBatch({ deps: t.deps, owner: 'in-app-worker', random: () => 0.5 }, claimed);
    expect((await feed('taken-in-app')).totalCount).toBe(0);
    expect(await notificationOf(tx)).toMatchObject({
      status: 'canceled',
      jobs: [{ type: 'in_app', status: 'canceled', executionDetails: [{ status: 'warning', detail: 'Canceled with its event before it ran' }] }],
    });
  });

  it('answers false for an event already sent, and 404 for one never seen', async () => {
    await createWorkflow(t.a, WORKFLOWS.newsletter);
    const tx = await trigger({ name: 'newsletter', to: 'ada' });
    await run();
    expect((await cancel(tx))).toEqual({ data: false });
    await t.a.delete('/v1/events/trigger/never-seen').expect(404);
    await t.b.delete(`/v1/events/trigger/${tx}`).expect(404);
  });
});

describe('digest', () => {
  /** A new subscriber sent x, y and z in one window of `digest-then-wait`: the digest has closed, and its send waits an hour. */
  async function closedDigestOfThree(subscriberId: string): Promise<string[]> {
    await t.a.post('/v1/subscribers', { subscriberId }).expect(201);
    const txs: string[] = [];
    for (const text of ['x', 'y', 'z']) txs.push(await trigger({ name: 'digest-then-wait', to: subscriberId, payload: { text } }));
    await later(10 * 60_000);
    return txs;
  }
  const statusesOf = async (txs: string[]) => (await Promise.all(txs.map((tx) => notificationOf(tx)))).map((n) => n.status);

  beforeEach(async () => {
    await t.a
      .post('/v1/workflows', {
        name: 'Digest then wait',
        steps: [
          { type: 'digest', amount: 10, unit: 'minutes' },
          { type: 'delay', amount: 1, unit: 'hours' },
          { type: 'in_app', template: { content: '{{step.total_count}}: {{#each step.events}}{{this.text}};{{/each}} for {{payload.text}}' } },
        ],
      })
      .expect(201);
    await t.a
      .post('/v1/workflows', {
        name: 'Comments digest',
        steps: [
          { type: 'digest', amount: 10, unit: 'minutes', digestKey: 'postId' },
          { type: 'in_app', template: { content: '{{step.total_count}} comments on {{payload.postId}}: {{#each step.events}}{{this.text}};{{/each}}' } },
        ],
      })
      .expect(201);
  });

  it('turns three events in the window into one message listing all three', async () => {
    await t.a.post('/v1/subscribers', { subscriberId: 'digested' }).expect(201);
    for (const text of ['a', 'b', 'c']) {
      await trigger({ name: 'comments-digest', to: 'digested', payload: { postId: 'p1', text } });
      await later(60_000);
    }
    await trigger({ name: 'comments-digest', to: 'digested', payload: { postId: 'p2', text: 'other post' } });
    expect((await feed('digested')).totalCount).toBe(0);
    await later(10 * 60_000);
    const contents = (await contentsOf('digested')).sort();
    expect(contents).toEqual(['1 comments on p2: other post;', '3 comments on p1: a;b;c;']);
  });

  it('counts every event of a digest, and lists the payloads that fit in 1 MiB together, oldest first', async () => {
    await t.a.post('/v1/subscribers', { subscriberId: 'large-digest' }).expect(201);
    // Five payloads of ~300,000 bytes: the first three fit in DIGEST_EVENTS_BYTES, the fourth would not.
    const filler = 'f'.repeat(300_000);
    for (const text of ['a', 'b', 'c', 'd', 'e']) await trigger({ name: 'comments-digest', to: 'large-digest', payload: { postId: 'big', text, filler } });
    expect(3 * (300_000 + 40)).toBeLessThan(DIGEST_EVENTS_BYTES);
    expect(4 * 300_000).toBeGreaterThan(DIGEST_EVENTS_BYTES);
    await later(11 * 60_000);
    expect(await contentsOf('large-digest')).toEqual(['5 comments on big: a;b;c;']);
    // Bytes, not characters: 150,000 '€' are 450,000 bytes, two of them fit and not a third.
    const euros = '€'.repeat(150_000);
    for (const text of ['f', 'g', 'h']) await trigger({ name: 'comments-digest', to: 'large-digest', payload: { postId: 'euros', text, filler: euros } });
    await later(11 * 60_000);
    expect((await contentsOf('large-digest'))[0]).toBe('3 comments on euros: f;g;');
  });

  it('closes a digest of 1,200 events with its payloads read in one statement, and settles its riders 500 a read', async () => {
    await t.a.post('/v1/subscribers', { subscriberId: 'crowded' }).expect(201);
    for (let part = 0; part < 12; part++) {
      const events = Array.from({ length: 100 }, (_, i) => ({ name: 'comments-digest', to: 'crowded', payload: { postId: 'busy', text: String(part * 100 + i) } }));
      await t.a.post('/v1/events/trigger/bulk', { events }).expect(201);
    }
    await run();
    // The payloads come with the followers' one read (off the event loop on a SQLite file), not a statement per 500 of them.
    const payloadReads = recordQueries(t.db, /^select .*payload.* from .events. where .id. in/i);
    await later(11 * 60_000);
    expect(payloadReads.stop()).toEqual([]);
    const [content] = await contentsOf('crowded');
    // Events triggered in one request are made in the same millisecond: their order among themselves is the ids'.
    const [count, listed] = content.split(' comments on busy: ');
    expect(count).toBe('1200');
    expect(listed.split(';').filter(Boolean).map(Number).sort((a, b) => a - b)).toEqual(Array.from({ length: 1200 }, (_, i) => i));
    const settled = await t.a.get('/v1/notifications?subscriberId=crowded&status=completed&limit=1').expect(200);
    expect(settled.body.totalCount).toBe(1200);

    // The carrier is the notification whose digest job led the digest: every other one's was merged
    // into it. (Which one leads is whichever job ran first, not always the first event's.)
    const merged = new Set((await t.db('jobs').where({ status: 'merged' }).select('notification_id')).map((row: { notification_id: string }) => row.notification_id));
    const crowd: Array<{ id: string }> = await t.db('notifications').where({ environment_id: t.environments.a, subscriber_id: 'crowded' }).select('id');
    const leaders = crowd.filter((row) => !merged.has(row.id));
    expect(leaders).toHaveLength(1);
    const carrier = { notificationId: leaders[0].id };
    const slices: string[][] = [];
    for await (const riders of digestRiderSlices(t.db, carrier.notificationId)) slices.push(riders.map((rider) => rider.notificationId));
    expect(slices.map((riders) => riders.length)).toEqual([RIDERS_A_READ, RIDERS_A_READ, 1199 - 2 * RIDERS_A_READ]);
    const riders = new Set(slices.flat());
    expect(riders.size).toBe(1199);
    expect(riders.has(carrier.notificationId)).toBe(false);
  });

  it("writes the webhook deliveries of a closed digest's riders a slice at a time, the event loop turning between", async () => {
    const peer = await startWebhookReceiver();
    await t.a.post('/v1/webhook-endpoints', { url: `${peer.url}/h`, eventTypes: ['message.delivered'] }).expect(201);
    await t.a.post('/v1/subscribers', { subscriberId: 'told-crowd' }).expect(201);
    const txs: string[] = [];
    for (let part = 0; part < 12; part++) {
      const events = Array.from({ length: 100 }, (_, i) => ({ name: 'comments-digest', to: 'told-crowd', payload: { postId: 'told', text: String(part * 100 + i) } }));
      txs.push(...(await t.a.post('/v1/events/trigger/bulk', { events }).expect(201)).body.data.map((d: { transactionId: string }) => d.transactionId));
    }
    await run();
    t.clock.advance(11 * 60_000);
    try {
      await worker.runBatch(); // the digest closes
      // The carrier's in-app step: its delivery and its 1,199 riders' (none sent yet: claimed before they were written).
      const turns = countTurns();
      const inserts: Array<{ rows: number; turn: number }> = [];
      await onStatements(t.db, /^INSERT INTO "webhook_deliveries"/, (sql, bindings) => {
        const rows = bindings ? (JSON.parse(String(bindings[0])) as unknown[]).length : (sql.match(/\(\?(, \?)*\)/g) ?? []).length;
        inserts.push({ rows, turn: turns.sofar() });
      }, () => worker.runBatch());
      turns.stop();
      expect(inserts.map((insert) => insert.rows)).toEqual([RIDERS_A_READ + 1, RIDERS_A_READ, 1199 - 2 * RIDERS_A_READ]);
      for (let i = 1; i < inserts.length; i++) expect(inserts[i].turn).toBeGreaterThan(inserts[i - 1].turn);
      const rows = await t.db('webhook_deliveries').where({ environment_id: t.environments.a, event_type: 'message.delivered' }).select('payload');
      const told = rows.map((row: { payload: string }) => JSON.parse(row.payload).data as { transactionId: string; digestedInto?: string });
      expect(told.map((data) => data.transactionId).sort()).toEqual([...txs].sort());
      expect(told.filter((data) => data.digestedInto === undefined)).toHaveLength(1);
      expect((await t.a.get('/v1/notifications?subscriberId=told-crowd&status=completed&limit=1').expect(200)).body.totalCount).toBe(1200);
    } finally {
      await t.db('webhook_deliveries').where({ environment_id: t.environments.a }).delete();
      await peer.close();
    }
  });

  it('leaves the other events to be sent when one of them is canceled, even the first', async () => {
    await t.a.post('/v1/subscribers', { subscriberId: 'half-digested' }).expect(201);
    const txs: string[] = [];
    for (const text of ['x', 'y', 'z']) txs.push(await trigger({ name: 'comments-digest', to: 'half-digested', payload: { postId: 'p9', text } }));
    await run();
    expect((await cancel(txs[0])).data).toBe(true);
    await later(11 * 60_000);
    expect(await contentsOf('half-digested')).toEqual(['2 comments on p9: y;z;']);
    expect((await notificationOf(txs[0])).status).toBe('canceled');
  });

  it('still sends the others of a closed digest when its first event is canceled, and settles each notification with the send', async () => {
    const txs = await closedDigestOfThree('closed-digest');
    expect(await statusesOf(txs)).toEqual(['processing', 'processing', 'processing']);

    // The first event led the digest; its later jobs carry all three payloads.
    expect((await cancel(txs[0]))).toEqual({ data: true });
    // A follower whose payload is already in the closed digest has nothing left to cancel.
    expect((await cancel(txs[2]))).toEqual({ data: false });
    expect((await notificationOf(txs[2])).jobs).toMatchObject([
      { type: 'digest', status: 'merged', executionDetails: [{ status: 'success', detail: expect.stringMatching(/^Merged into the open digest /) }] },
    ]);

    await later(3_600_000);
    expect(await contentsOf('closed-digest')).toEqual(['2: y;z; for y']);
    expect(await statusesOf(txs)).toEqual(['canceled', 'completed', 'completed']);
  });

  it("changes nothing by a follower's cancel that answers false: the first event canceled after it still leaves the send to the others", async () => {
    const txs = await closedDigestOfThree('follower-first');
    expect((await cancel(txs[1]))).toEqual({ data: false });
    expect((await cancel(txs[0]))).toEqual({ data: true });
    await later(3_600_000);
    expect(await contentsOf('follower-first')).toEqual(['2: y;z; for y']);
    expect(await statusesOf(txs)).toEqual(['canceled', 'completed', 'completed']);
  });

  it('passes a closed digest\'s send on again when the event that took it over is canceled too', async () => {
    const txs = await closedDigestOfThree('twice-passed');
    expect((await cancel(txs[0]))).toEqual({ data: true });
    expect((await cancel(txs[1]))).toEqual({ data: true });
    await later(3_600_000);
    expect(await contentsOf('twice-passed')).toEqual(['1: z; for z']);
    expect(await statusesOf(txs)).toEqual(['canceled', 'canceled', 'completed']);
  });

  it('passes the send on when the event that carries it is canceled while its next job runs', async () => {
    const txs = await closedDigestOfThree('mid-send');
    t.clock.advance(3_600_000);
    // A worker takes the carrier's delay; the cancel leaves it to stop when it runs.
    const claimed = await claimDueJobs(t.db, { owner: 'mid-send-worker', now: t.clock.now(), leaseMs: 60_000, limit: 10 });
    expect(claimed.map((job) => job.type)).toEqual(['delay']);
    expect((await cancel(txs[0]))).toEqual({ data: true });
    await executeJob({ deps: t.deps, owner: 'mid-send-worker', random: () => 0.5 }, claimed[0]);
    await run();
    expect(await contentsOf('mid-send')).toEqual(['2: y;z; for y']);
    expect(await statusesOf(txs)).toEqual(['canceled', 'completed', 'completed']);
  });

  it('hands an open digest on when its leader was already taken by a worker as its event is canceled', async () => {
    await t.a.post('/v1/subscribers', { subscriberId: 'taken-leader' }).expect(201);
    const txs: string[] = [];
    for (const text of ['x', 'y']) txs.push(await trigger({ name: 'comments-digest', to: 'taken-leader', payload: { postId: 'p7', text } }));
    t.clock.advance(10 * 60_000);
    const claimed = await claimDueJobs(t.db, { owner: 'leader-worker', now: t.clock.now(), leaseMs: 60_000, limit: 10 });
    expect(claimed.map((job) => job.type)).toEqual(['digest']);
    expect((await cancel(txs[0]))).toEqual({ data: true });
    expect((await cancel(txs[0]))).toEqual({ data: false });
    await executeJob({ deps: t.deps, owner: 'leader-worker', random: () => 0.5 }, claimed[0]);
    // The key is free of the canceled leader: a later event joins the digest y now leads.
    txs.push(await trigger({ name: 'comments-digest', to: 'taken-leader', payload: { postId: 'p7', text: 'w' } }));
    await run();
    expect(await contentsOf('taken-leader')).toEqual(['2 comments on p7: y;w;']);
    expect(await statusesOf(txs)).toEqual(['canceled', 'completed', 'completed']);
  });

  it('opens a new digest for events after the window closed', async () => {
    await createSubscriber(t.a, { subscriberId: 'digested' });
    await trigger({ name: 'comments-digest', to: 'digested', payload: { postId: 'p1', text: 'a' } });
    await later(10 * 60_000);
    expect(await contentsOf('digested')).toEqual(['1 comments on p1: a;']);
    await trigger({ name: 'comments-digest', to: 'digested', payload: { postId: 'p1', text: 'late' } });
    await later(10 * 60_000);
    expect((await feed('digested')).data[0].content).toBe('1 comments on p1: late;');
  });
});

describe('topic fan-out', () => {
  it('notifies each of 1,000 members once, leaving out the actor, across overlapping topics', async () => {
    const now = t.clock.now();
    for (let i = 0; i < 1000; i++) await insertSubscriber(t.db, t.environments.a, { subscriberId: `member-${i}` }, now);
    const ids = Array.from({ length: 1000 }, (_, i) => `member-${i}`);
    await t.a.post('/v1/topics', { topicKey: 'everyone', name: 'Everyone' }).expect(201);
    await t.a.post('/v1/topics/everyone/subscribers', { subscribers: ids }).expect(200);
    await t.a.post('/v1/topics', { topicKey: 'some', name: 'Some' }).expect(201);
    await t.a.post('/v1/topics/some/subscribers', { subscribers: [...ids.slice(0, 10), 'ada'] }).expect(200);
    await createWorkflow(t.a, WORKFLOWS.broadcast);

    const tx = await trigger({
      name: 'broadcast',
      to: [{ type: 'Topic', topicKey: 'everyone' }, { type: 'Topic', topicKey: 'some' }, 'member-5'],
      actor: 'member-0',
    });
    await run();
    const notifications = await t.a.get(`/v1/notifications?transactionId=${tx}&limit=1`).expect(200);
    expect(notifications.body.totalCount).toBe(1000); // 1,000 members + ada − the actor
    const rows = await t.db('messages').where({ transaction_id: tx }).select('subscriber_id');
    expect(rows).toHaveLength(1000);
    expect(new Set(rows.map((r: { subscriber_id: string }) => r.subscriber_id)).size).toBe(1000);
    expect(rows.some((r: { subscriber_id: string }) => r.subscriber_id === 'member-0')).toBe(false);
    expect(rows.some((r: { subscriber_id: string }) => r.subscriber_id === 'ada')).toBe(true);
  });

  it('delivers an in-app first step with its fan-out batch, deciding as for a claimed job, and goes on to the next step', async () => {
    for (const id of ['fan-a', 'fan-b', 'fan-quiet']) await t.a.post('/v1/subscribers', { subscriberId: id, firstName: id.toUpperCase() }).expect(201);
    await t.a.patch('/v1/subscribers/fan-quiet/preferences', { channels: { in_app: false } }).expect(200);
    await t.a.post('/v1/topics', { topicKey: 'fans', name: 'Fans' }).expect(201);
    await t.a.post('/v1/topics/fans/subscribers', { subscribers: ['fan-a', 'fan-b', 'fan-quiet'] }).expect(200);
    await t.a
      .post('/v1/workflows', {
        name: 'Two notes',
        steps: [
          { type: 'in_app', template: { content: 'first for {{subscriber.firstName}}' } },
          { type: 'delay', amount: 5, unit: 'minutes' },
          { type: 'in_app', template: { content: 'second' } },
        ],
      })
      .expect(201);
    const tx = await trigger({ name: 'two-notes', to: [{ type: 'Topic', topicKey: 'fans' }] });
    await worker.runBatch(); // the fan-out: one batch holds all three
    expect(await contentsOf('fan-a')).toEqual(['first for FAN-A']);
    expect(await contentsOf('fan-b')).toEqual(['first for FAN-B']);
    const delivered = await notificationOf(tx, 'fan-a');
    expect(delivered.jobs).toMatchObject([
      { type: 'in_app', status: 'completed', providerId: 'herald', attempts: 1, executionDetails: [{ status: 'success', detail: 'Message stored in the in-app feed' }] },
      { type: 'delay', status: 'delayed' },
    ]);
    const quiet = await notificationOf(tx, 'fan-quiet');
    expect(quiet.jobs).toMatchObject([
      { type: 'in_app', status: 'skipped', attempts: 1, executionDetails: [{ status: 'warning', detail: "The subscriber's preferences turn in_app off for this workflow" }] },
      { type: 'delay', status: 'delayed' },
    ]);
    expect((await feed('fan-quiet')).totalCount).toBe(0);

    await later(5 * 60_000);
    expect((await contentsOf('fan-a')).sort()).toEqual(['first for FAN-A', 'second']);
    for (const id of ['fan-a', 'fan-b', 'fan-quiet']) expect((await notificationOf(tx, id)).status).toBe('completed');
  });

  it('writes large in-app messages of a fan-out a group at a time, the event loop turning between, each whole', async () => {
    const ids = Array.from({ length: 20 }, (_, i) => `large-${String(i).padStart(2, '0')}`);
    for (const id of ids) await t.a.post('/v1/subscribers', { subscriberId: id }).expect(201);
    await t.a.post('/v1/topics', { topicKey: 'large', name: 'Large' }).expect(201);
    await t.a.post('/v1/topics/large/subscribers', { subscribers: ids }).expect(200);
    await createWorkflow(t.a, { name: 'Large note', steps: [{ type: 'in_app', template: { content: '{{subscriber.subscriberId}} {{payload.text}}' } }] });
    // 20 messages of 200,009 characters (under a field's budget): 4 million, written in groups of
    // at most SLICE_CHARS, with a turn of the event loop between two.
    const text = 'x'.repeat(200_000);
    await trigger({ name: 'large-note', to: [{ type: 'Topic', topicKey: 'large' }], payload: { text } });
    const turns = countTurns();
    await run();
    expect(turns.stop()).toBeGreaterThanOrEqual(Math.ceil((20 * `large-00 ${text}`.length) / SLICE_CHARS) - 1);
    for (const id of ids) expect(await contentsOf(id)).toEqual([`${id} ${text}`]);
    await trigger({ name: 'large-note', to: [{ type: 'Topic', topicKey: 'large' }], payload: { text: 'small' } });
    await run();
    for (const id of ids) expect(await contentsOf(id)).toEqual([`${id} small`, `${id} ${text}`]);
  });

  // SQLite's slices of 100: one slice's messages pass the batch's budget with fewer members there.
  it.skipIf(testDatabaseUrl())('ends a fan-out batch once it has written BATCH_MESSAGE_CHARS of messages, and sizes the next slices by them', async () => {
    // 110 members of messages of 21,000 characters: the first slice of 100 writes 2.1 million.
    const ids = Array.from({ length: 110 }, (_, i) => `long-${String(i).padStart(3, '0')}`);
    for (const id of ids) await insertSubscriber(t.db, t.environments.a, { subscriberId: id }, t.clock.now());
    await t.a.post('/v1/topics', { topicKey: 'long', name: 'Long' }).expect(201);
    await t.a.post('/v1/topics/long/subscribers', { subscribers: ids }).expect(200);
    await createWorkflow(t.a, { name: 'Long note', steps: [{ type: 'in_app', template: { content: 'c{{payload.text}}' } }] });
    // The fan-out's commits (the first trigger also stores its workflow's snapshot).
    const commitsOf = async (text: string) => {
      await trigger({ name: 'long-note', to: [{ type: 'Topic', topicKey: 'long' }], payload: { text } });
      const commits = recordQueries(t.db, /^commit/i);
      await run();
      return commits.stop().length;
    };
    const short = await commitsOf('short');
    expect(100 * 21_001).toBeGreaterThan(BATCH_MESSAGE_CHARS);
    expect(await commitsOf('x'.repeat(21_000))).toBeGreaterThan(short);
    for (const id of ids) expect((await contentsOf(id))[0]).toHaveLength(21_001);
  });

  it("takes a first slice's members only until their messages pass BATCH_MESSAGE_CHARS, not the whole slice", async () => {
    // 12 members of messages of about 500,000 characters (two fields of 250,000): 6 million. A
    // first batch knows nothing of its messages' size until it renders them: it stops at the
    // member that passes 2 million, where it had taken a slice of 100 (500 on PostgreSQL) whole.
    const ids = Array.from({ length: 12 }, (_, i) => `wide-${String(i).padStart(2, '0')}`);
    for (const id of ids) await insertSubscriber(t.db, t.environments.a, { subscriberId: id }, t.clock.now());
    await t.a.post('/v1/topics', { topicKey: 'wide', name: 'Wide' }).expect(201);
    await t.a.post('/v1/topics/wide/subscribers', { subscribers: ids }).expect(200);
    await createWorkflow(t.a, { name: 'Wide note', steps: [{ type: 'in_app', template: { subject: '{{payload.text}}', content: '{{payload.text}}' } }] });
    const text = 'x'.repeat(250_000);
    const tx = await trigger({ name: 'wide-note', to: [{ type: 'Topic', topicKey: 'wide' }], payload: { text } });
    await worker.runBatch(); // the first batch of each of the fan-out's jobs
    const firstBatches = (await t.db('messages').where({ transaction_id: tx }).count({ n: '*' }).first()) as { n: number | string };
    const perBatch = Math.ceil(BATCH_MESSAGE_CHARS / (2 * text.length));
    expect(Number(firstBatches.n)).toBeGreaterThan(0);
    expect(Number(firstBatches.n)).toBeLessThanOrEqual(perBatch * fanoutShards(t.db).length);
    await run();
    for (const id of ids) expect(await contentsOf(id)).toEqual([text]);
  });

  it("writes a fan-out's message.delivered deliveries a slice's together, not in a statement a recipient", async () => {
    const peer = await startWebhookReceiver();
    await t.a.post('/v1/webhook-endpoints', { url: `${peer.url}/h`, eventTypes: ['message.delivered'] }).expect(201);
    const ids = Array.from({ length: 150 }, (_, i) => `told-${String(i).padStart(3, '0')}`);
    for (const id of ids) await insertSubscriber(t.db, t.environments.a, { subscriberId: id }, t.clock.now());
    await t.a.post('/v1/topics', { topicKey: 'told', name: 'Told' }).expect(201);
    await t.a.post('/v1/topics/told/subscribers', { subscribers: ids }).expect(200);
    await createWorkflow(t.a, WORKFLOWS.broadcast);
    const tx = await trigger({ name: 'broadcast', to: [{ type: 'Topic', topicKey: 'told' }] });
    try {
      const inserts = await countStatements(t.db, /^INSERT INTO "webhook_deliveries"/, () => worker.runBatch());
      const rows = await t.db('webhook_deliveries').where({ environment_id: t.environments.a, event_type: 'message.delivered' }).select('payload');
      const told = rows.map((row: { payload: string }) => JSON.parse(row.payload).data).filter((data: { transactionId: string }) => data.transactionId === tx);
      expect(told.map((data: { subscriberId: string }) => data.subscriberId).sort()).toEqual(ids);
      expect(inserts).toBeLessThanOrEqual(Math.ceil(ids.length / 100) * fanoutShards(t.db).length);
    } finally {
      await peer.close();
    }
  });

  it("compiles a fan-out's costly in-app templates on the payload check thread once, before its batches", async () => {
    const ids = Array.from({ length: 30 }, (_, i) => `costly-${i}`);
    for (const id of ids) await t.a.post('/v1/subscribers', { subscriberId: id, firstName: id }).expect(201);
    await t.a.post('/v1/topics', { topicKey: 'costly', name: 'Costly' }).expect(201);
    await t.a.post('/v1/topics/costly/subscribers', { subscribers: ids }).expect(200);
    const content = '<p>{{subscriber.firstName}}</p>'.repeat(60);
    await createWorkflow(t.a, { name: 'Costly broadcast', steps: [{ type: 'in_app', template: { content } }] });
    const posted = await compilesPosted(async () => {
      await trigger({ name: 'costly-broadcast', to: [{ type: 'Topic', topicKey: 'costly' }] });
      await run();
    });
    expect(posted).toEqual([{ source: content, escape: false }]);
    for (const id of ids) expect(await contentsOf(id)).toEqual([`<p>${id}</p>`.repeat(60)]);
  });

  it("reads a fan-out's members of large data a slice at a time, within SLICE_CHARS each", async () => {
    // Ten members of 300,000 characters of data: slices of three, four of them, a turn between two.
    const ids = Array.from({ length: 10 }, (_, i) => `heavy-${i}`);
    for (const id of ids) await t.a.post('/v1/subscribers', { subscriberId: id, data: { blob: 'x'.repeat(300_000) } }).expect(201);
    await t.a.post('/v1/topics', { topicKey: 'heavy', name: 'Heavy' }).expect(201);
    await t.a.post('/v1/topics/heavy/subscribers', { subscribers: ids }).expect(200);
    await createWorkflow(t.a, WORKFLOWS.broadcast);
    const tx = await trigger({ name: 'broadcast', to: [{ type: 'Topic', topicKey: 'heavy' }] });
    const turns = countTurns();
    await run();
    expect(turns.stop()).toBeGreaterThanOrEqual(Math.ceil(10 / Math.floor(SLICE_CHARS / 300_020)) - 1);
    for (const id of ids) expect(await contentsOf(id)).toEqual(['hello']);
    expect((await t.a.get(`/v1/notifications?transactionId=${tx}&status=completed&limit=1`).expect(200)).body.totalCount).toBe(10);
  });

  it('stops creating notifications for a fan-out that is canceled midway', async () => {
    // 2,000 members: on PostgreSQL each of the two jobs a fan-out runs as has about 1,000.
    const now = t.clock.now();
    await createWorkflow(t.a, WORKFLOWS.broadcast);
    await t.a.post('/v1/topics', { topicKey: 'everyone', name: 'Everyone' }).expect(201);
    for (const first of [0, 1000]) {
      const more = Array.from({ length: 1000 }, (_, i) => `member-${first + i}`);
      for (const subscriberId of more) await insertSubscriber(t.db, t.environments.a, { subscriberId }, now);
      await t.a.post('/v1/topics/everyone/subscribers', { subscribers: more }).expect(200);
    }
    const firstBatches = FANOUT_BATCH_SIZE * fanoutShards(t.db).length;

    const tx = await trigger({ name: 'broadcast', to: [{ type: 'Topic', topicKey: 'everyone' }] });
    await worker.runBatch(); // the first batch (of each job): its in-app step is delivered with it
    expect(await t.db('messages').where({ transaction_id: tx }).count({ n: '*' }).first()).toMatchObject({ n: firstBatches });
    expect((await cancel(tx)).data).toBe(true);
    await run();
    const count = (await t.a.get(`/v1/notifications?transactionId=${tx}&limit=1`).expect(200)).body.totalCount;
    expect(count).toBe(firstBatches);
    expect(await t.db('messages').where({ transaction_id: tx }).count({ n: '*' }).first()).toMatchObject({ n: firstBatches });
    const statuses = await t.db('notifications').where({ transaction_id: tx }).distinct('status');
    expect(statuses).toEqual([{ status: 'completed' }]);
  });
});
