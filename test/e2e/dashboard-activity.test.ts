// Monitor → Activity on /dashboard: an owner reads the notifications of each of their
// environments, filters them, and opens one for its timeline, over HTTP and in Chromium.
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.js';
import { chromiumBeside, stayOffline, screenshotFolder } from '../helpers/browser.js';
import { createIntegration, createSubscriber, createTenant, createWorkflow, step } from '../helpers/factories.js';
import { startHttpPeer } from '../helpers/peers.js';
import { createOwner, OWNER_PASSWORD, Visitor } from '../helpers/dashboard.js';
import { JobRunner } from '../../src/engine/runner.js';

/** A subscriber id is the tenant's text, anything at all: this one is markup that runs if unescaped. */
const HOSTILE = '<img src=x onerror="window.__xss=1">';

let t: TestApp;
let hook: Awaited<ReturnType<typeof startHttpPeer>>;
/** The notifications made below, by what they are. */
const ids = { welcomeAda: '', welcomeHostile: '', chatGrace: '', chatAda: '', production: '', otherOrganization: '' };
let chatTransaction = '';

beforeAll(async () => {
  t = await startTestApp();
  await createOwner(t, t.environments.a, 'ada@example.com');
  // The Slack peer is busy once (a 500 whose answer is markup), then takes the message.
  hook = await startHttpPeer((_request, index) => (index === 0 ? { status: 500, body: '{"error":"<b>overloaded</b>"}' } : { status: 200, body: '{"ok":true}' }));

  for (const client of [t.a, t.aProduction, t.b]) {
    await createSubscriber(client, { subscriberId: 'ada' });
    await createWorkflow(client, { workflowId: 'welcome', steps: [step.inApp({ content: 'Welcome {{payload.name}}' })] });
  }
  await createSubscriber(t.a, { subscriberId: 'grace' });
  await createSubscriber(t.a, { subscriberId: HOSTILE });
  await createIntegration(t.a, { providerId: 'slack' });
  await createWorkflow(t.a, { workflowId: 'chat-ping', steps: [step.chat({ content: 'Ping {{payload.name}}' })] });
  await t.a.put('/v1/subscribers/grace/credentials', { providerId: 'slack', credentials: { webhookUrl: `${hook.url}/grace` } }).expect(200);

  const trigger = async (client = t.a, body: object) => {
    t.clock.advance(1000); // one second apart: "newest first" has an order to show
    const { transactionId } = (await client.post('/v1/events/trigger', body).expect(201)).body.data;
    const list = await client.get(`/v1/notifications?transactionId=${transactionId}`).expect(200);
    return { transactionId, notificationId: list.body.data[0].notificationId as string };
  };
  ids.welcomeAda = (await trigger(t.a, { name: 'welcome', to: 'ada', payload: { name: 'Ada' } })).notificationId;
  ids.welcomeHostile = (await trigger(t.a, { name: 'welcome', to: HOSTILE, payload: { name: '<script>window.__xss=2</script>' } })).notificationId;
  const chat = await trigger(t.a, { name: 'chat-ping', to: 'grace', payload: { name: 'Grace' } });
  ids.chatGrace = chat.notificationId;
  chatTransaction = chat.transactionId;
  // No Slack webhook for ada: the send cannot happen, and the notification fails.
  ids.chatAda = (await trigger(t.a, { name: 'chat-ping', to: 'ada', payload: { name: 'Ada' } })).notificationId;
  ids.production = (await trigger(t.aProduction, { name: 'welcome', to: 'ada', payload: { name: 'Production' } })).notificationId;
  ids.otherOrganization = (await trigger(t.b, { name: 'welcome', to: 'ada', payload: { name: 'B' } })).notificationId;

  const worker = new JobRunner(t.deps, { random: () => 0.5 });
  await worker.runUntilIdle();
  t.clock.advance(60 * 60 * 1000); // past the retry's backoff
  await worker.runUntilIdle();
});
afterEach(async () => t.assertContract());
afterAll(async () => {
  await hook?.close();
  await t?.close();
});

/** The notification ids a list page shows, top to bottom. */
const rowsOf = (page: string) => [...page.matchAll(/<tr data-notification-id="([0-9a-f]{24})"/g)].map((m) => m[1]);

describe('Monitor → Activity', () => {
  let visitor: Visitor;
  beforeAll(async () => {
    visitor = new Visitor(t.app);
    expect((await visitor.signIn('ada@example.com')).status).toBe(303);
  });

  it('sends a visitor without a session to sign in', async () => {
    expect((await t.http.get('/dashboard/activity').expect(303)).headers.location).toBe('/dashboard/sign-in');
    expect((await t.http.get(`/dashboard/activity/${ids.welcomeAda}`).expect(303)).headers.location).toBe('/dashboard/sign-in');
  });

  it("lists the first environment's notifications newest first, and no other environment's", async () => {
    const page = await visitor.get('/dashboard/activity');
    expect(page.status).toBe(200);
    expect(page.headers['cache-control']).toBe('no-store');
    expect(rowsOf(page.text)).toEqual([ids.chatAda, ids.chatGrace, ids.welcomeHostile, ids.welcomeAda]);
    expect(page.text).toContain('<span id="activity-count">4</span>');

    const production = await visitor.get(`/dashboard/activity?environment=${t.environments.aProduction}`);
    expect(rowsOf(production.text)).toEqual([ids.production]);
  });

  it('reads no payload for the list, which shows none: a page of large payloads is not read for nothing', async () => {
    // A payload the list cannot have read: it is not JSON.
    const { event_id: eventId } = await t.db('notifications').where('id', ids.welcomeAda).first('event_id');
    const { payload } = await t.db('events').where('id', eventId).first('payload');
    await t.db('events').where('id', eventId).update({ payload: 'not JSON' });
    try {
      const page = await visitor.get('/dashboard/activity');
      expect(page.status).toBe(200);
      expect(rowsOf(page.text)).toEqual([ids.chatAda, ids.chatGrace, ids.welcomeHostile, ids.welcomeAda]);
    } finally {
      await t.db('events').where('id', eventId).update({ payload });
    }
  });

  it('filters by workflow, subscriber, status, channel and transactionId, each as the API does', async () => {
    const env = `environment=${t.environments.a}`;
    const cases: Array<[string, string[]]> = [
      ['workflowId=welcome', [ids.welcomeHostile, ids.welcomeAda]],
      ['subscriberId=ada', [ids.chatAda, ids.welcomeAda]],
      [`subscriberId=${encodeURIComponent(HOSTILE)}`, [ids.welcomeHostile]],
      ['status=failed', [ids.chatAda]],
      ['status=completed&channel=chat', [ids.chatGrace]],
      ['channel=in_app', [ids.welcomeHostile, ids.welcomeAda]],
      [`transactionId=${chatTransaction}`, [ids.chatGrace]],
      ['workflowId=welcome&subscriberId=grace', []],
    ];
    for (const [query, expected] of cases) {
      const page = await visitor.get(`/dashboard/activity?${env}&${query}`);
      expect({ query, rows: rowsOf(page.text) }).toEqual({ query, rows: expected });
    }
    const none = await visitor.get(`/dashboard/activity?${env}&workflowId=nothing-like-it`);
    expect(none.text).toContain('No notifications match these filters.');
  });

  it('says which filter values it did not apply, and shows the rest unfiltered by them', async () => {
    const page = await visitor.get(`/dashboard/activity?environment=${t.environments.a}&status=lost&channel=pigeon&workflowId=welcome`);
    expect(page.status).toBe(200);
    expect(page.text).toContain('Not applied: status “lost”, channel “pigeon”.');
    expect(rowsOf(page.text)).toEqual([ids.welcomeHostile, ids.welcomeAda]);
  });

  it('pages 25 at a time, keeping the filters in the links', async () => {
    // An organization of its own, so the other tests' lists stay as they are.
    const tenant = await createTenant(t);
    const { development: client } = tenant.clients;
    const environmentId = tenant.environmentIds.development;
    await createSubscriber(client, { subscriberId: 'grace' });
    await createWorkflow(client, { workflowId: 'welcome' });
    for (let i = 0; i < 26; i++) {
      t.clock.advance(1000);
      await client.post('/v1/events/trigger', { name: 'welcome', to: 'grace', payload: { name: `n${i}` } }).expect(201);
    }
    const owner = new Visitor(t.app);
    await createOwner(t, environmentId, 'pager@example.com');
    expect((await owner.signIn('pager@example.com')).status).toBe(303);
    const first = await owner.get(`/dashboard/activity?environment=${environmentId}&subscriberId=grace&workflowId=welcome`);
    expect(rowsOf(first.text)).toHaveLength(25);
    const next = /<a class="button ghost" rel="next" href="([^"]+)"/.exec(first.text)![1].replaceAll('&amp;', '&');
    expect(next).toBe(`/dashboard/activity?environment=${environmentId}&workflowId=welcome&subscriberId=grace&page=1`);
    const second = await owner.get(next);
    expect(rowsOf(second.text)).toHaveLength(1);
    expect(second.text).toContain('26–26 of 26');
    expect(second.text).toContain('rel="prev"');
  });

  it('escapes what tenants wrote: subscriber ids, payloads and provider answers stay text', async () => {
    const list = await visitor.get(`/dashboard/activity?environment=${t.environments.a}`);
    expect(list.text).not.toContain(HOSTILE);
    expect(list.text).toContain('&lt;img src=x onerror=&quot;window.__xss=1&quot;&gt;');
    const timeline = await visitor.get(`/dashboard/activity/${ids.welcomeHostile}?environment=${t.environments.a}`);
    expect(timeline.text).not.toContain('<script>window.__xss');
    expect(timeline.text).toContain('&lt;script&gt;window.__xss=2&lt;/script&gt;');
    const chat = await visitor.get(`/dashboard/activity/${ids.chatGrace}`);
    expect(chat.text).not.toContain('<b>overloaded</b>');
    expect(chat.text).toContain('&lt;b&gt;overloaded&lt;/b&gt;');
  });

  it("shows a notification's timeline: each job, its attempts, every execution detail and the provider's answers", async () => {
    const page = await visitor.get(`/dashboard/activity/${ids.chatGrace}?environment=${t.environments.a}`);
    expect(page.status).toBe(200);
    const { jobs } = (await t.a.get(`/v1/notifications/${ids.chatGrace}`).expect(200)).body.data;
    expect(jobs).toHaveLength(1);
    expect(jobs[0]).toMatchObject({ status: 'completed', attempts: 2 });
    expect(page.text).toContain(`data-job-id="${jobs[0].jobId}"`);
    expect(page.text).toContain('2 attempts');
    for (const detail of jobs[0].executionDetails) expect(page.text).toContain(detail.detail.replaceAll("'", '&#39;'));
    // The answers, pretty-printed JSON, the failed one and the one that took the message.
    expect(page.text).toContain('500 {\n  &quot;error&quot;: &quot;&lt;b&gt;overloaded&lt;/b&gt;&quot;\n}');
    expect(page.text).toContain('&quot;ok&quot;: true');
    expect(page.text).toContain(chatTransaction);
  });

  it('finds a notification in any of the organization’s environments, and no other organization’s', async () => {
    expect((await visitor.get(`/dashboard/activity/${ids.production}?environment=${t.environments.aProduction}`)).status).toBe(200);
    expect((await visitor.get(`/dashboard/activity/${ids.production}?environment=${t.environments.a}`)).status).toBe(404);
    const foreign = await visitor.get(`/dashboard/activity/${ids.otherOrganization}`);
    expect(foreign.status).toBe(404);
    expect(foreign.text).toContain('Notification not found');
    expect((await visitor.get(`/dashboard/activity/${ids.otherOrganization}?environment=${t.environments.b}`)).status).toBe(404);
    expect((await visitor.get(`/dashboard/activity?environment=${t.environments.b}`)).status).toBe(404);
  });
});

// Once, on SQLite: the flows above already run on both databases.
describe.runIf(process.env.HERALD_TEST_DB === 'sqlite')('Activity in Chromium', () => {
  const chromium = chromiumBeside(() => t.app);

  it('filters the list with the form, opens a timeline and reads a provider answer; nothing tenant-made runs', { timeout: 60_000 }, async () => {
    const screenshots = screenshotFolder('activity');
    const page = await chromium.browser.newPage({ viewport: { width: 1280, height: 900 } });
    const offline = await stayOffline(page);
    const problems: string[] = [];
    page.on('pageerror', (error) => problems.push(error.message));
    page.on('console', (message) => message.type() === 'error' && !/favicon|Failed to load resource/.test(message.text()) && problems.push(message.text()));

    await page.goto(`${chromium.url}/dashboard/sign-in`);
    await page.fill('#email', 'ada@example.com');
    await page.fill('#password', OWNER_PASSWORD);
    await Promise.all([page.waitForURL(/settings\/api-keys/), page.click('button[type=submit]')]);
    await page.getByRole('link', { name: 'Activity' }).click();
    await page.waitForURL(/\/dashboard\/activity/);
    await expect.poll(() => page.locator('tr[data-notification-id]').count()).toBeGreaterThanOrEqual(4);
    // The hostile subscriber id is shown as the text it is.
    expect(await page.getByRole('link', { name: HOSTILE }).count()).toBe(1);

    await page.selectOption('#f-channel', 'chat');
    await Promise.all([page.waitForURL(/channel=chat/), page.click('form.filters button[type=submit]')]);
    expect(await page.locator('tr[data-notification-id]').evaluateAll((rows) => rows.map((row) => row.getAttribute('data-notification-id')))).toEqual([ids.chatAda, ids.chatGrace]);
    await page.screenshot({ path: path.join(screenshots, 'activity.png'), fullPage: true });

    await page.locator(`tr[data-notification-id="${ids.chatGrace}"] td a`).first().click();
    await page.waitForURL(new RegExp(`/dashboard/activity/${ids.chatGrace}`));
    expect(await page.locator('h1').innerText()).toBe('chat-ping → grace');
    const answers = page.locator('details.raw', { hasText: 'Provider answer' });
    expect(await answers.count()).toBe(2);
    await answers.first().locator('summary').click();
    expect(await answers.first().locator('pre').innerText()).toContain('"error": "<b>overloaded</b>"');
    await page.screenshot({ path: path.join(screenshots, 'timeline.png'), fullPage: true });

    await page.goto(`${chromium.url}/dashboard/activity/${ids.welcomeHostile}`);
    await page.locator('details.raw summary', { hasText: 'Payload' }).click();
    expect(await page.locator('details.raw pre').first().innerText()).toContain('<script>window.__xss=2</script>');
    expect(await page.evaluate(() => (window as unknown as { __xss?: number }).__xss)).toBeUndefined();
    expect(problems).toEqual([]);
    expect(offline).toEqual([]);
    await page.close();
    console.info(`activity screenshots: ${screenshots}`);
  });

  it('shows a value that would reorder its text with the controls named, and a very long one within the page', { timeout: 60_000 }, async () => {
    // In an organization of its own, so the other tests' lists stay as they are. Shown as is,
    // this id reads "…exe.png".
    const reordering = `\u202Egnp.exe\u202C-${'x'.repeat(200)}`;
    const tenant = await createTenant(t);
    const { development: client } = tenant.clients;
    await createSubscriber(client, { subscriberId: reordering });
    await createWorkflow(client, { workflowId: 'welcome' });
    await client.post('/v1/events/trigger', { name: 'welcome', to: reordering, payload: { name: 'x' } }).expect(201);
    await createOwner(t, tenant.environmentIds.development, 'bidi@example.com');
    const page = await chromium.browser.newPage({ viewport: { width: 1280, height: 900 } });
    await page.goto(`${chromium.url}/dashboard/sign-in`);
    await page.fill('#email', 'bidi@example.com');
    await page.fill('#password', OWNER_PASSWORD);
    await Promise.all([page.waitForURL(/settings\/api-keys/), page.click('button[type=submit]')]);
    await page.goto(`${chromium.url}/dashboard/activity`);
    const row = page.locator('tr[data-notification-id]');
    expect(await row.count()).toBe(1);
    const text = await row.innerText();
    expect(text).toContain('[U+202E]gnp.exe[U+202C]');
    expect(text).not.toContain('\u202E');
    expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(1280);
    await page.close();
  });
});
