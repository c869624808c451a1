// The example notification centre (/examples/inbox/) on the built herald/client, in Chromium: two
// tabs of one subscriber's inbox, kept in step live by the inbox's event stream.
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { Browser, Page } from 'playwright-core';
import { startTestApp, type TestApp } from '../helpers/app.js';
import { chromiumBeside, stayOffline } from '../helpers/browser.js';
import { builtClient } from '../helpers/client-build.js';
import { ROOT } from '../helpers/process.js';
import { BROWSER_BUNDLE, CLIENT_DIR } from '../../scripts/build-client.js';
import { createSubscriber, createWorkflow, step } from '../helpers/factories.js';
import { JobRunner } from '../../src/engine/runner.js';

let t: TestApp;
let runner: JobRunner;
beforeAll(async () => {
  await builtClient();
  t = await startTestApp();
  // Deliveries as a server makes them: the runner wakes when a trigger commits.
  runner = new JobRunner(t.deps);
  runner.start();
});
afterEach(async () => t.assertContract());
afterAll(async () => {
  await runner?.stop();
  await t?.close();
});

describe('/examples/inbox/', () => {
  it('serves the page, its script and the built client module, each under a policy that allows only this origin', async () => {
    const redirect = await t.http.get('/examples/inbox?x=1').expect(301);
    expect(redirect.headers.location).toBe('/examples/inbox/?x=1');
    const page = await t.http.get('/examples/inbox/').expect(200);
    expect(page.headers['content-type']).toMatch(/^text\/html/);
    expect(page.headers['content-security-policy']).toContain("connect-src 'self'");
    expect(page.headers['content-security-policy']).toContain("script-src 'self'");
    expect(page.text).toContain('<script type="module" src="inbox.js"></script>');
    expect((await t.http.get('/examples/inbox/inbox.js').expect(200)).text).toContain("from './herald-client.js'");
    const client = await t.http.get('/examples/inbox/herald-client.js').expect(200);
    expect(client.headers['content-type']).toMatch(/^text\/javascript/);
    expect(client.text).toContain('createInboxClient');
    await t.http.get('/examples/inbox/nothing-here.js').expect(404);
  });
});

// Once, on SQLite: the inbox's own tests cover both databases.
describe.runIf(process.env.HERALD_TEST_DB === 'sqlite')('the example notification centre in Chromium', () => {
  const chromium = chromiumBeside(() => t.app);

  /** A tab with the inbox open on `token`, its panel shown and its stream live: the page served by Herald, or from `pageUrl`. */
  async function openTab(context: Awaited<ReturnType<Browser['newContext']>>, token: string, problems: string[], pageUrl = `${chromium.url}/examples/inbox/`): Promise<Page> {
    const page = await context.newPage();
    const offline = await stayOffline(page);
    page.on('pageerror', (error) => problems.push(error.message));
    await page.goto(pageUrl);
    await page.fill('#token', token);
    await page.click('#token-form button[type=submit]');
    await page.click('#bell');
    await expect.poll(() => page.locator('#status').innerText()).toBe('live');
    expect(offline).toEqual([]);
    return page;
  }

  const unread = (page: Page) => page.locator('#unread-count').innerText();

  it('loads without an error and says so when a token is refused', { timeout: 30_000 }, async () => {
    const page = await chromium.browser.newPage();
    const problems: string[] = [];
    page.on('pageerror', (error) => problems.push(error.message));
    await page.goto(`${chromium.url}/examples/inbox/`);
    await page.fill('#token', 'not-a-token');
    await page.click('#token-form button[type=submit]');
    await expect.poll(() => page.locator('#error').innerText()).toBe('The token expired or is not valid: paste a new one.');
    // A fixed token that was refused is not tried again.
    await expect.poll(() => page.locator('#status').innerText()).toMatch(/^stopped: /);
    expect(problems).toEqual([]);
    await page.close();
  });

  it('raises the count on two open tabs within a second of a trigger; reading on one lowers it on the other', { timeout: 60_000 }, async () => {
    await createSubscriber(t.a, { subscriberId: 'ada' });
    await createWorkflow(t.a, { workflowId: 'comment', steps: [step.inApp({ subject: 'New comment', content: '{{payload.who}} wrote: {{payload.text}}' })] });
    const { token } = (await t.a.post('/v1/subscribers/ada/inbox-tokens', {}).expect(201)).body.data;

    const context = await chromium.browser.newContext();
    const problems: string[] = [];
    const [first, second] = [await openTab(context, token, problems), await openTab(context, token, problems)];
    expect([await unread(first), await unread(second)]).toEqual(['0', '0']);

    const trigger = (text: string) => t.a.post('/v1/events/trigger', { name: 'comment', to: 'ada', payload: { who: 'Grace', text } }).expect(201);
    const started = Date.now();
    await trigger('<img src=x onerror="window.__xss=1">');
    // The bound: the bell of every open tab rings within a second of the trigger.
    await Promise.all([first, second].map((page) => expect.poll(() => unread(page), { timeout: 1000, interval: 25 }).toBe('1')));
    console.info(`trigger → both tabs' counts: ${Date.now() - started} ms`);
    await trigger('second');
    await Promise.all([first, second].map((page) => expect.poll(() => unread(page), { timeout: 1000, interval: 25 }).toBe('2')));
    for (const page of [first, second]) expect(await page.locator('li.item.unread').count()).toBe(2);
    // What the message says is shown as text, and runs nowhere.
    expect(await first.locator('li.item .body').last().innerText()).toBe('Grace wrote: <img src=x onerror="window.__xss=1">');

    // Reading the newest on the first tab: the second tab's count and item follow.
    const newest = first.locator('li.item').first();
    const messageId = await newest.getAttribute('data-message-id');
    await newest.locator('.mark-read').click();
    await expect.poll(() => unread(second), { timeout: 1000, interval: 25 }).toBe('1');
    await expect.poll(() => second.locator(`li.item[data-message-id="${messageId}"]`).getAttribute('class')).toBe('item');
    await expect.poll(() => unread(first)).toBe('1');

    // "Mark all read" on the second tab empties both badges.
    await second.click('#mark-all');
    await Promise.all([first, second].map((page) => expect.poll(() => unread(page), { timeout: 1000, interval: 25 }).toBe('0')));
    await expect.poll(() => first.locator('li.item.unread').count()).toBe(0);
    const counts = (await t.http.get('/v1/inbox/counts').set('Authorization', `Bearer ${token}`).expect(200)).body.data;
    expect(counts).toMatchObject({ unread: 0, total: 2 });

    for (const page of [first, second]) expect(await page.evaluate(() => (window as unknown as { __xss?: number }).__xss)).toBeUndefined();
    expect(problems).toEqual([]);
    await context.close();
  });

  it('works embedded in an app of another origin, as the README says: the stream goes live and the count follows a trigger', { timeout: 60_000 }, async () => {
    // The app: the example's three files and the client's browser module, served from another
    // port (another origin), with baseUrl pointed at Herald.
    const files: Record<string, [string, string]> = {
      '/': [path.join(ROOT, 'examples', 'inbox', 'index.html'), 'text/html'],
      '/inbox.css': [path.join(ROOT, 'examples', 'inbox', 'inbox.css'), 'text/css'],
      '/inbox.js': [path.join(ROOT, 'examples', 'inbox', 'inbox.js'), 'text/javascript'],
      '/herald-client.js': [path.join(CLIENT_DIR, BROWSER_BUNDLE), 'text/javascript'],
    };
    const app = http.createServer((req, res) => {
      const file = files[req.url ?? ''];
      if (!file) return void res.writeHead(404).end();
      const text = fs.readFileSync(file[0], 'utf8');
      res.writeHead(200, { 'Content-Type': file[1] }).end(req.url === '/inbox.js' ? text.replace('baseUrl: location.origin', `baseUrl: ${JSON.stringify(chromium.url)}`) : text);
    });
    await new Promise<void>((resolve) => app.listen(0, '127.0.0.1', resolve));
    const appOrigin = `http://127.0.0.1:${(app.address() as AddressInfo).port}`;
    try {
      expect((await fs.promises.readFile(files['/inbox.js'][0], 'utf8')).includes('baseUrl: location.origin')).toBe(true);
      await t.a.put('/v1/inbox/settings', { allowedOrigins: [appOrigin] }).expect(200);
      await createSubscriber(t.a, { subscriberId: 'embedded' });
      await createWorkflow(t.a, { workflowId: 'embedded-note', steps: [step.inApp({ subject: 'Note', content: '{{payload.text}}' })] });
      const { token } = (await t.a.post('/v1/subscribers/embedded/inbox-tokens', {}).expect(201)).body.data;

      const context = await chromium.browser.newContext();
      const problems: string[] = [];
      const page = await openTab(context, token, problems, `${appOrigin}/`);
      expect(await unread(page)).toBe('0');
      await t.a.post('/v1/events/trigger', { name: 'embedded-note', to: 'embedded', payload: { text: 'from afar' } }).expect(201);
      await expect.poll(() => unread(page), { timeout: 2000, interval: 25 }).toBe('1');
      expect(problems).toEqual([]);
      await context.close();
    } finally {
      await new Promise<void>((resolve) => app.close(() => resolve()));
    }
  });
});
