import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.js';
import { JobRunner } from '../../src/engine/runner.js';

let t: TestApp;
const tx: Record<string, string> = {};
beforeAll(async () => {
  t = await startTestApp();
});
// Each test starts from organizations of its own, with the fixtures below made again: none sees what another made.
beforeEach(async () => {
  await t.renew();
  for (const id of ['ada', 'grace']) await t.a.post('/v1/subscribers', { subscriberId: id }).expect(201);
  await t.a.post('/v1/workflows', { name: 'Feed', steps: [{ type: 'in_app', template: { content: 'Hello {{payload.n}}' } }] }).expect(201);
  await t.a.post('/v1/workflows', { name: 'Mail', steps: [{ type: 'email', template: { subject: 's', content: 'c' } }] }).expect(201);
  for (const [key, name, to] of [
    ['feedAda', 'feed', 'ada'],
    ['feedGrace', 'feed', 'grace'],
    ['mailAda', 'mail', 'ada'],
  ]) {
    t.clock.advance(60_000);
    tx[key] = (await t.a.post('/v1/events/trigger', { name, to, payload: { n: key } }).expect(201)).body.data.transactionId;
  }
  await new JobRunner(t.deps).runUntilIdle(); // the mail fails: no email integration
  t.clock.advance(8 * 86_400_000);
  tx.recent = (await t.a.post('/v1/events/trigger', { name: 'feed', to: 'ada', payload: { n: 'recent' } }).expect(201)).body.data.transactionId;
});
afterEach(async () => t.assertContract());
afterAll(async () => t?.close());

const ids = (body: { data: Array<{ transactionId: string }> }) => body.data.map((n) => n.transactionId);

describe('GET /notifications (listNotifications)', () => {
  it('lists notifications newest first with the exact total', async () => {
    const res = await t.a.get('/v1/notifications').expect(200);
    expect(ids(res.body)).toEqual([tx.recent, tx.mailAda, tx.feedGrace, tx.feedAda]);
    expect(res.body).toMatchObject({ totalCount: 4, hasMore: false });
    expect(res.body.data[0]).not.toHaveProperty('jobs');
  });

  it('filters by subscriber, workflow, channel, status, transaction and time', async () => {
    expect(ids((await t.a.get('/v1/notifications?subscriberId=grace').expect(200)).body)).toEqual([tx.feedGrace]);
    expect(ids((await t.a.get('/v1/notifications?workflowId=mail').expect(200)).body)).toEqual([tx.mailAda]);
    expect(ids((await t.a.get('/v1/notifications?channel=email').expect(200)).body)).toEqual([tx.mailAda]);
    expect(ids((await t.a.get('/v1/notifications?status=failed').expect(200)).body)).toEqual([tx.mailAda]);
    expect(ids((await t.a.get('/v1/notifications?status=pending').expect(200)).body)).toEqual([tx.recent]);
    expect(ids((await t.a.get(`/v1/notifications?transactionId=${tx.feedAda}`).expect(200)).body)).toEqual([tx.feedAda]);
    const since = new Date(t.clock.now().getTime() - 86_400_000).toISOString();
    expect(ids((await t.a.get(`/v1/notifications?createdAfter=${since}`).expect(200)).body)).toEqual([tx.recent]);
    expect((await t.a.get(`/v1/notifications?createdBefore=${since}&subscriberId=ada`).expect(200)).body.totalCount).toBe(2);
  });

  it('lists notifications whose payloads are large whole, and the same as one read alone', async () => {
    // Over ANSWERED_AS_STORED_CHARS: written as stored, in the page and alone (db/json.ts setStoredJson).
    const payload = { n: 'large', items: Array.from({ length: 8_000 }, (_, i) => ({ i, text: 'abcdefghij' })) };
    const large = (await t.a.post('/v1/events/trigger', { name: 'feed', to: 'grace', payload }).expect(201)).body.data.transactionId;
    const res = await t.a.get('/v1/notifications?limit=2').expect(200);
    expect(ids(res.body)).toEqual([large, tx.recent]);
    expect(res.body.data[0].payload).toEqual(payload);
    const alone = await t.a.get(`/v1/notifications/${res.body.data[0].notificationId}`).expect(200);
    expect(alone.body.data.payload).toEqual(payload);
  });

  it('rejects an unknown status or channel and a malformed time with 400', async () => {
    await t.a.get('/v1/notifications?status=lost').expect(400);
    await t.a.get('/v1/notifications?channel=fax').expect(400);
    await t.a.get('/v1/notifications?createdAfter=yesterday').expect(400);
  });

  it.each(['subscriberId', 'workflowId', 'transactionId'])('rejects an empty %s with 400, rather than listing every notification', async (name) => {
    expect((await t.a.get(`/v1/notifications?${name}=`).expect(400)).body.details).toContainEqual({ field: `query/${name}`, message: expect.any(String) });
  });

  it("lists only the key's own environment", async () => {
    expect((await t.b.get('/v1/notifications').expect(200)).body.totalCount).toBe(0);
  });
});

describe('GET /notifications/{notificationId} (getNotification)', () => {
  it('returns the notification with its jobs and every decision', async () => {
    const [listed] = (await t.a.get(`/v1/notifications?transactionId=${tx.mailAda}`).expect(200)).body.data;
    const res = await t.a.get(`/v1/notifications/${listed.notificationId}`).expect(200);
    expect(res.body.data).toMatchObject({ status: 'failed', workflowId: 'mail', payload: { n: 'mailAda' } });
    expect(res.body.data.jobs).toMatchObject([
      { type: 'email', status: 'failed', executionDetails: [{ status: 'failed', detail: 'Subscriber ada has no email address' }] },
    ]);
  });

  it("gives the same jobs in Novu's shape to a request made with Novu's ApiKey scheme", async () => {
    const [listed] = (await t.a.get(`/v1/notifications?transactionId=${tx.mailAda}`).expect(200)).body.data;
    const herald = (await t.a.get(`/v1/notifications/${listed.notificationId}`).expect(200)).body.data;
    const novu = (await t.a.withScheme('ApiKey').get(`/v1/notifications/${listed.notificationId}`).expect(200)).body.data;
    const { jobs: heraldJobs, ...heraldRest } = herald;
    const { jobs: novuJobs, ...novuRest } = novu;
    expect(novuRest).toEqual(heraldRest);
    const [job] = heraldJobs;
    expect(novuJobs).toEqual([
      {
        _id: job.jobId,
        type: 'email',
        status: 'failed',
        // No email integration: Herald itself failed the send, which Novu's shape calls `novu`.
        providerId: 'novu',
        step: { _id: job.stepId, _templateId: job.stepId, active: true, filters: [] },
        createdAt: job.createdAt,
        updatedAt: job.updatedAt,
        executionDetails: [
          {
            _id: expect.stringMatching(/^[0-9a-f]{24}$/),
            _jobId: job.jobId,
            status: 'Failed',
            detail: 'Subscriber ada has no email address',
            providerId: 'novu',
            isRetry: false,
            isTest: false,
            source: 'Internal',
            createdAt: job.executionDetails[0].createdAt,
          },
        ],
      },
    ]);
    // Herald's own shape keeps the detail's id to itself.
    expect(Object.keys(job.executionDetails[0]).sort()).toEqual(['createdAt', 'detail', 'isRetry', 'status']);
  });

  it("answers 404 for an unknown id and for another environment's notification", async () => {
    const [listed] = (await t.a.get('/v1/notifications').expect(200)).body.data;
    await t.a.get('/v1/notifications/000000000000000000000000').expect(404);
    await t.b.get(`/v1/notifications/${listed.notificationId}`).expect(404);
  });
});

describe('GET /notifications/stats (getNotificationStats)', () => {
  it('counts the last 7 and 30 days, and all notifications by channel and status', async () => {
    const res = await t.a.get('/v1/notifications/stats').expect(200);
    expect(res.body.data).toEqual({
      weeklySent: 1,
      monthlySent: 4,
      byChannel: { in_app: 3, email: 1, sms: 0, chat: 0, push: 0 },
      byStatus: { pending: 1, processing: 0, completed: 2, failed: 1, canceled: 0 },
    });
    expect((await t.b.get('/v1/notifications/stats').expect(200)).body.data.monthlySent).toBe(0);
  });

  it('counts exactly from the first millisecond of its window, which may start within an hour', async () => {
    // Whole hours are kept totals; the rows of the hour the window starts in are counted one by one.
    await t.b.post('/v1/subscribers', { subscriberId: 'x' }).expect(201);
    await t.b.post('/v1/workflows', { name: 'Feed', steps: [{ type: 'in_app', template: { content: 'Hi' } }] }).expect(201);
    const hour = 3_600_000;
    const minute = 60_000;
    t.clock.advance(hour - (t.clock.now().getTime() % hour) + 10 * minute);
    const made: number[] = []; // at hh:10, hh:40 and (hh+1):05
    for (const gap of [0, 30 * minute, 25 * minute]) {
      t.clock.advance(gap);
      made.push(t.clock.now().getTime());
      await t.b.post('/v1/events/trigger', { name: 'feed', to: 'x' }).expect(201);
    }
    const weeklyFrom = async (start: number) => {
      t.clock.advance(start + 7 * 86_400_000 - t.clock.now().getTime());
      return (await t.b.get('/v1/notifications/stats').expect(200)).body.data.weeklySent;
    };
    expect(await weeklyFrom(made[0] - 1)).toBe(3);
    expect(await weeklyFrom(made[0] + 15 * minute)).toBe(2); // hh:25
    expect(await weeklyFrom(made[1])).toBe(2);
    expect(await weeklyFrom(made[1] + 1)).toBe(1);
    expect(await weeklyFrom(made[2] + 1)).toBe(0);
  });
});

describe('the in-app feed', () => {
  it('lists a subscriber’s messages newest first, filtered by read and seen', async () => {
    await new JobRunner(t.deps).runUntilIdle();
    const feed = (await t.a.get('/v1/subscribers/ada/messages').expect(200)).body;
    expect(feed.data.map((m: { content: string }) => m.content)).toEqual(['Hello recent', 'Hello feedAda']);
    await t.a.patch(`/v1/subscribers/ada/messages/${feed.data[1].messageId}`, { seen: true }).expect(200);
    expect((await t.a.get('/v1/subscribers/ada/messages?seen=false').expect(200)).body.totalCount).toBe(1);
    const unread = await t.a.patch(`/v1/subscribers/ada/messages/${feed.data[1].messageId}`, { read: false }).expect(200);
    expect(unread.body.data).toMatchObject({ seen: true, read: false });
    expect(unread.body.data).not.toHaveProperty('readAt');
  });

  it("answers 404 for an unknown subscriber or message, and for another subscriber's message", async () => {
    const [message] = (await t.a.get('/v1/subscribers/ada/messages').expect(200)).body.data;
    await t.a.get('/v1/subscribers/nobody/messages').expect(404);
    await t.a.patch('/v1/subscribers/ada/messages/000000000000000000000000', { read: true }).expect(404);
    await t.a.patch(`/v1/subscribers/grace/messages/${message.messageId}`, { read: true }).expect(404);
    await t.b.get('/v1/subscribers/ada/messages').expect(404);
  });

  it('rejects an empty change with 400', async () => {
    const [message] = (await t.a.get('/v1/subscribers/ada/messages').expect(200)).body.data;
    await t.a.patch(`/v1/subscribers/ada/messages/${message.messageId}`, {}).expect(400);
  });
});
