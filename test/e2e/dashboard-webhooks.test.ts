// Webhooks on /dashboard: an owner adds an endpoint, sends it a test event, retries a delivery,
// rotates its secret and turns it off and on, against a real receiver on 127.0.0.1 that verifies
// each request with `standardwebhooks`; over HTTP on both databases, and in Chromium.
import path from 'node:path';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.js';
import { chromiumBeside, screenshotFolder } from '../helpers/browser.js';
import { startWebhookReceiver } from '../helpers/webhook.js';
import { createOwner, OWNER_PASSWORD, Visitor } from '../helpers/dashboard.js';
import { JobRunner } from '../../src/engine/runner.js';
import { systemClock } from '../../src/clock.js';

let t: TestApp;
let visitor: Visitor;
let receiver: Awaited<ReturnType<typeof startWebhookReceiver>>;
// The runner signs with the real clock (the receiver's library checks the timestamp against it).
const deliver = () => new JobRunner({ ...t.deps, clock: systemClock }, { random: () => 0.5 }).runUntilIdle();

beforeAll(async () => {
  t = await startTestApp();
  // The app's clock at the real time, so that what it writes and the runner's clock agree (the
  // session is made after, so it lives as long as the file).
  t.clock.advance(Date.now() - t.clock.now().getTime());
  await createOwner(t, t.environments.a, 'ada@example.com');
  visitor = new Visitor(t.app);
  expect((await visitor.signIn('ada@example.com')).status).toBe(303);
});
beforeEach(async () => {
  t.clock.advance(Date.now() - t.clock.now().getTime());
  receiver = await startWebhookReceiver();
});
afterEach(async () => {
  await receiver.close();
  await t.assertContract();
});
afterAll(async () => t?.close());

const env = (environmentId = t.environments.a) => `environment=${environmentId}`;
const post = async (path: string, form: Record<string, string | string[]> = {}, environmentId = t.environments.a) => {
  await visitor.get(`/dashboard/webhooks?${env(environmentId)}`);
  const res = await visitor.agent
    .post(`/dashboard${path}?${env(environmentId)}`)
    .type('form')
    .send({ _csrf: visitor.csrf, ...form });
  return res;
};

/** Adds an endpoint through the form: its id and the secret the answer showed. */
async function addEndpoint(form: Record<string, string | string[]> = {}) {
  const res = await post('/webhooks', { url: `${receiver.url}/hooks`, ...form });
  expect(res.status).toBe(201);
  const secret = /<code id="new-secret">(whsec_[^<]+)<\/code>/.exec(res.text)![1];
  const endpointId = /\/dashboard\/webhooks\/([0-9a-f]{24})\?/.exec(res.text)![1];
  return { endpointId, secret, page: res.text };
}

describe('Monitor → Webhooks', () => {
  it('sends a visitor without a session to sign in, and refuses a form without the CSRF token', async () => {
    expect((await t.http.get('/dashboard/webhooks').expect(303)).headers.location).toBe('/dashboard/sign-in');
    const forged = await visitor.agent.post(`/dashboard/webhooks?${env()}`).type('form').send({ url: `${receiver.url}/forged` });
    expect(forged.status).toBe(403);
    expect((await t.a.get('/v1/webhook-endpoints').expect(200)).body.data.map((e: { url: string }) => e.url)).not.toContain(`${receiver.url}/forged`);
  });

  it('adds an endpoint for the events ticked and shows its secret once; the API lists it', async () => {
    const { endpointId, secret } = await addEndpoint({ description: 'billing <service>', eventTypes: ['message.sent', 'message.failed'] });
    expect(secret).toMatch(/^whsec_[A-Za-z0-9+/]+=*$/);
    const got = (await t.a.get(`/v1/webhook-endpoints/${endpointId}`).expect(200)).body.data;
    expect(got).toMatchObject({ url: `${receiver.url}/hooks`, description: 'billing <service>', eventTypes: ['message.sent', 'message.failed'], disabled: false });
    const list = await visitor.get(`/dashboard/webhooks?${env()}`);
    expect(list.text).toContain(`data-endpoint-id="${endpointId}"`);
    expect(list.text).toContain('billing &lt;service&gt;');
    expect(list.text).not.toContain(secret);
  });

  it('refuses a URL the outbound guard refuses, saying why, and keeps the form', async () => {
    const res = await post('/webhooks', { url: 'http://10.0.0.1/hook', description: 'internal' });
    expect(res.status).toBe(422);
    expect(res.text).toContain('The webhook endpoint URL cannot be used');
    expect(res.text).toContain('value="http://10.0.0.1/hook"');
    expect((await t.a.get('/v1/webhook-endpoints').expect(200)).body.data.map((e: { url: string }) => e.url)).not.toContain('http://10.0.0.1/hook');
  });

  it('refuses what the API refuses: a URL that is not one, one too long, a description too long; and shows no stray notice', async () => {
    const cases = [
      [{ url: `${receiver.url}/a b<"c>` }, 'url must match format'],
      [{ url: `${receiver.url}/${'x'.repeat(3_000)}` }, 'url must NOT have more than 2048 characters'],
      [{ url: `${receiver.url}/hooks`, description: 'd'.repeat(5_000) }, 'description must NOT have more than 500 characters'],
    ] as const;
    const before = (await t.a.get('/v1/webhook-endpoints').expect(200)).body.totalCount;
    for (const [form, message] of cases) {
      const res = await post('/webhooks', form);
      expect(res.status, message).toBe(422);
      expect(res.text).toContain(message);
    }
    expect((await t.a.get('/v1/webhook-endpoints').expect(200)).body.totalCount).toBe(before);
    // A notice is one the page knows, not whatever an object holds under that name.
    for (const done of ['constructor', '__proto__', 'toString']) {
      const page = await visitor.get(`/dashboard/webhooks?${env()}&done=${done}`);
      expect(page.text).not.toMatch(/native code|\[object Object\]/);
    }
  });

  it('sends a test event the receiver verifies, lists the delivery with its try, and retries it with the same webhook-id', async () => {
    const { endpointId, secret } = await addEndpoint();
    const sent = await post(`/webhooks/${endpointId}/test`);
    expect(sent.status).toBe(303);
    expect(sent.headers.location).toBe(`/dashboard/webhooks/${endpointId}?${env()}&done=test`);
    await deliver();
    expect(receiver.verified(secret).map((event) => event.type)).toEqual(['webhook.test']);

    const page = await visitor.get(sent.headers.location);
    expect(page.text).toContain('A webhook.test event is on its way');
    const deliveryId = /<tr data-delivery-id="([0-9a-f]{24})">/.exec(page.text)![1];
    expect(page.text).toContain('badge status-completed">succeeded');
    expect(page.text).toContain('1 try, last 200');
    expect(page.text).toContain('&quot;ok&quot;:true');

    const retried = await post(`/webhooks/deliveries/${deliveryId}/retry`);
    expect(retried.status).toBe(303);
    expect(retried.headers.location).toBe(`/dashboard/webhooks/${endpointId}?${env()}&done=retry`);
    await deliver();
    expect(receiver.requests).toHaveLength(2);
    expect(receiver.requests[1].headers['webhook-id']).toBe(receiver.requests[0].headers['webhook-id']);
    expect((await visitor.get(retried.headers.location)).text).toContain('2 tries, last 200');
  });

  it('shows the secret on request only, and rotates it: during the grace both secrets verify', async () => {
    const { endpointId, secret } = await addEndpoint();
    expect((await visitor.get(`/dashboard/webhooks/${endpointId}?${env()}`)).text).not.toContain(secret);
    const shown = await post(`/webhooks/${endpointId}/secret`);
    expect(shown.text).toContain(`<code id="endpoint-secret">${secret}</code>`);

    const rotated = await post(`/webhooks/${endpointId}/rotate`, { gracePeriodSeconds: '3600' });
    expect(rotated.status).toBe(200);
    const fresh = /<code id="endpoint-secret">(whsec_[^<]+)<\/code>/.exec(rotated.text)![1];
    expect(fresh).not.toBe(secret);
    expect(rotated.text).toContain('each delivery carries a signature with the previous secret too');
    expect((await t.a.get(`/v1/webhook-endpoints/${endpointId}/secret`).expect(200)).body.data.secret).toBe(fresh);

    await post(`/webhooks/${endpointId}/test`);
    await deliver();
    expect(receiver.verified(fresh).map((event) => event.type)).toEqual(['webhook.test']);
    expect(receiver.verified(secret).map((event) => event.type)).toEqual(['webhook.test']);
  });

  it('disables, enables and deletes an endpoint', async () => {
    const { endpointId } = await addEndpoint();
    expect((await post(`/webhooks/${endpointId}/disable`)).status).toBe(303);
    expect((await t.a.get(`/v1/webhook-endpoints/${endpointId}`).expect(200)).body.data.disabled).toBe(true);
    expect((await visitor.get(`/dashboard/webhooks/${endpointId}?${env()}`)).text).toContain('>Enable</button>');
    expect((await post(`/webhooks/${endpointId}/enable`)).status).toBe(303);
    expect((await t.a.get(`/v1/webhook-endpoints/${endpointId}`).expect(200)).body.data.disabled).toBe(false);
    const deleted = await post(`/webhooks/${endpointId}/delete`);
    expect(deleted.headers.location).toBe(`/dashboard/webhooks?${env()}&done=deleted`);
    await t.a.get(`/v1/webhook-endpoints/${endpointId}`).expect(404);
  });

  it("shows nothing of another organization's endpoints and changes none", async () => {
    const foreign = (await t.b.post('/v1/webhook-endpoints', { url: `${receiver.url}/b` }).expect(201)).body.data;
    expect((await visitor.get(`/dashboard/webhooks/${foreign.endpointId}?${env()}`)).status).toBe(404);
    expect((await visitor.get(`/dashboard/webhooks?${env(t.environments.b)}`)).status).toBe(404);
    expect((await post(`/webhooks/${foreign.endpointId}/delete`)).status).toBe(404);
    expect((await post(`/webhooks/${foreign.endpointId}/delete`, {}, t.environments.b)).status).toBe(404);
    await t.b.get(`/v1/webhook-endpoints/${foreign.endpointId}`).expect(200);
  });
});

describe.runIf(process.env.HERALD_TEST_DB === 'sqlite')('Webhooks in Chromium', () => {
  const chromium = chromiumBeside(() => t.app);

  it('adds an endpoint, sends a test event, reads its try, and rotates the secret', { timeout: 60_000 }, async () => {
    const context = await chromium.browser.newContext({ viewport: { width: 1280, height: 900 } });
    await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: chromium.url });
    const tab = await context.newPage();
    const problems: string[] = [];
    tab.on('pageerror', (error) => problems.push(error.message));
    tab.on('dialog', (dialog) => dialog.accept());
    await tab.goto(`${chromium.url}/dashboard/sign-in`);
    await tab.fill('#email', 'ada@example.com');
    await tab.fill('#password', OWNER_PASSWORD);
    await Promise.all([tab.waitForURL(/settings\/api-keys/), tab.click('button[type=submit]')]);
    await tab.getByRole('link', { name: 'Webhooks' }).click();
    await tab.waitForURL(/\/dashboard\/webhooks/);

    await tab.fill('#endpoint-url', `${receiver.url}/browser`);
    await tab.check('input[value="webhook.test"]');
    await tab.getByRole('button', { name: 'Add endpoint' }).click();
    const secret = (await tab.locator('#new-secret').innerText()).trim();
    await tab.click('button[data-copy=new-secret]');
    await expect.poll(() => tab.evaluate(() => navigator.clipboard.readText())).toBe(secret);

    await tab.getByRole('link', { name: 'Open the endpoint' }).click();
    await Promise.all([tab.waitForURL(/done=test/), tab.getByRole('button', { name: 'Send a test event' }).click()]);
    await deliver();
    expect(receiver.verified(secret).map((event) => event.type)).toEqual(['webhook.test']);
    await tab.reload();
    const row = tab.locator('tr[data-delivery-id]').first();
    expect(await row.locator('.badge').innerText()).toBe('succeeded');
    await row.locator('summary').click();
    expect(await row.locator('li.detail').first().innerText()).toContain('200');

    await tab.getByRole('button', { name: 'Rotate secret' }).click();
    await expect.poll(() => tab.getByRole('status').innerText()).toContain('rotated');
    expect((await tab.locator('#endpoint-secret').innerText()).trim()).not.toBe(secret);
    const shots = screenshotFolder('webhooks');
    await tab.screenshot({ path: path.join(shots, 'webhooks.png'), fullPage: true });
    console.info(`webhooks screenshot: ${shots}`);
    expect(problems).toEqual([]);
    await context.close();
  });
});
