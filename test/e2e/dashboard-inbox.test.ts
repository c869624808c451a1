// Settings → Inbox on /dashboard: an owner sets the browser origins allowed to call an
// environment's inbox, adds and retires its signing secrets, and turns sessions from a subscriber
// hash on and off; over HTTP on both databases, and in Chromium.
import { createHmac } from 'node:crypto';
import { SignJWT } from 'jose';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.js';
import { chromiumBeside, screenshotFolder } from '../helpers/browser.js';
import { createSubscriber } from '../helpers/factories.js';
import { createOwner, OWNER_PASSWORD, Visitor } from '../helpers/dashboard.js';
import { builtClient } from '../helpers/client-build.js';

let t: TestApp;
let visitor: Visitor;
beforeAll(async () => {
  t = await startTestApp();
  await createOwner(t, t.environments.a, 'ada@example.com');
  visitor = new Visitor(t.app);
  expect((await visitor.signIn('ada@example.com')).status).toBe(303);
  await createSubscriber(t.a, { subscriberId: 'ada' });
});
afterEach(async () => t.assertContract());
afterAll(async () => t?.close());

const page = (environmentId = t.environments.a) => visitor.get(`/dashboard/settings/inbox?environment=${environmentId}`);
const post = (path: string, form: Record<string, string> = {}, environmentId = t.environments.a) =>
  visitor.post(`/dashboard/settings/inbox/${path}?environment=${environmentId}`, { _csrf: visitor.csrf, ...form });
/** The live secrets a page lists, newest first: [kid, secret]. */
const secretsOf = (text: string) => [...text.matchAll(/<tr data-kid="([^"]+)">[\s\S]*?<code id="secret-\d+">([^<]+)<\/code>/g)].map((m) => [m[1], m[2]]);

/** A subscriber token signed as a customer's backend signs it. */
const sign = (kid: string, secret: string, subscriberId = 'ada') => {
  const now = Math.floor(t.clock.now().getTime() / 1000); // the app's clock, which Herald checks the token against
  return new SignJWT({}).setProtectedHeader({ alg: 'HS256', kid }).setSubject(subscriberId).setAudience('herald-inbox').setIssuedAt(now).setExpirationTime(now + 3600).sign(Buffer.from(secret, 'base64url'));
};
const counts = (token: string) => t.http.get('/v1/inbox/counts').set('Authorization', `Bearer ${token}`);

describe('Settings → Inbox', () => {
  it('sends a visitor without a session to sign in, and refuses a form without the CSRF token', async () => {
    expect((await t.http.get('/dashboard/settings/inbox').expect(303)).headers.location).toBe('/dashboard/sign-in');
    await page();
    const forged = await visitor.agent.post(`/dashboard/settings/inbox/origins?environment=${t.environments.a}`).type('form').send({ origins: 'https://evil.example' });
    expect(forged.status).toBe(403);
    expect((await t.a.get('/v1/inbox/settings').expect(200)).body.data.allowedOrigins).toEqual([]);
  });

  it('saves the allowed origins the API then answers with, and refuses one that is not an origin', async () => {
    await page();
    const saved = await post('origins', { origins: 'https://app.example.com\nhttp://localhost:5173\n' });
    expect(saved.status).toBe(303);
    const after = await visitor.get(saved.headers.location);
    expect(after.text).toContain('The allowed origins are saved.');
    expect((await t.a.get('/v1/inbox/settings').expect(200)).body.data.allowedOrigins).toEqual(['http://localhost:5173', 'https://app.example.com']);

    const refused = await post('origins', { origins: 'https://app.example.com/path<script>' });
    expect(refused.status).toBe(422);
    expect(refused.text).toContain('is not an origin');
    expect(refused.text).toContain('https://app.example.com/path&lt;script&gt;');
    expect(refused.text).not.toContain('/path<script>');
    expect((await t.a.get('/v1/inbox/settings').expect(200)).body.data.allowedOrigins).toHaveLength(2);
    // The API's own rules: no wildcard, a port that is one, at most 50.
    for (const origins of ['https://*.example.com', 'https://app.example.com:99999']) {
      const wrong = await post('origins', { origins });
      expect(wrong.status).toBe(422);
      expect(wrong.text).toContain(`“${origins}” is not an origin`);
    }
    const many = await post('origins', { origins: Array.from({ length: 51 }, (_, i) => `https://app${i}.example.com`).join('\n') });
    expect(many.status).toBe(422);
    expect(many.text).toContain('At most 50 origins.');
    expect((await t.a.get('/v1/inbox/settings').expect(200)).body.data.allowedOrigins).toHaveLength(2);
  });

  it('shows the secret a backend signs tokens with; a new one signs from then on and the old one still verifies until it is retired', async () => {
    const [[firstKid, firstSecret]] = secretsOf((await page()).text);
    const firstToken = await sign(firstKid, firstSecret);
    await counts(firstToken).expect(200);

    expect((await post('secrets')).status).toBe(303);
    const secrets = secretsOf((await page()).text);
    expect(secrets).toHaveLength(2);
    expect(secrets[1][0]).toBe(firstKid);
    const [newKid, newSecret] = secrets[0];
    // Herald's own tokens are now signed with the new secret.
    const minted = (await t.a.post('/v1/subscribers/ada/inbox-tokens', {}).expect(201)).body.data.token;
    expect(JSON.parse(Buffer.from(minted.split('.')[0], 'base64url').toString()).kid).toBe(newKid);
    await counts(await sign(newKid, newSecret)).expect(200);
    await counts(firstToken).expect(200);

    const retired = await post(`secrets/${firstKid}/retire`);
    expect(retired.status).toBe(303);
    expect((await visitor.get(retired.headers.location)).text).toContain('The secret is retired');
    // Processes remember a secret a few seconds: past that, the retired one opens nothing.
    await expect.poll(async () => (await counts(firstToken)).status, { timeout: 10_000, interval: 500 }).toBe(401);
    await counts(await sign(newKid, newSecret)).expect(200);
    expect((await post(`secrets/${firstKid}/retire`)).status).toBe(404);
  });

  it('mints a token for a subscriber of the environment, shown once, and says when there is no such subscriber', async () => {
    await page();
    const res = await post('tokens', { subscriberId: 'ada' });
    expect(res.status).toBe(201);
    const token = /<code id="new-token">([^<]+)<\/code>/.exec(res.text)![1];
    await counts(token).expect(200);
    expect((await page()).text).not.toContain(token);
    const unknown = await post('tokens', { subscriberId: '<nobody>' });
    expect(unknown.status).toBe(404);
    expect(unknown.text).toContain('There is no subscriber “&lt;nobody&gt;” in this environment.');
  });

  it('shows the application identifier, and turns sessions from a subscriber hash on and off as the API then answers', async () => {
    const { applicationIdentifier } = (await t.a.get('/v1/inbox/settings').expect(200)).body.data;
    const before = await page();
    expect(before.text).toContain(`<code id="application-identifier">${applicationIdentifier}</code>`);
    expect(before.text).toContain('id="sessions-state">off<');
    const [[, secret]] = secretsOf(before.text);
    const session = () =>
      t.http.post('/v1/inbox/session').send({ applicationIdentifier, subscriberId: 'ada', subscriberHash: createHmac('sha256', secret).update('ada').digest('hex') });
    await session().expect(403);

    const on = await post('sessions', { enabled: 'on' });
    expect(on.status).toBe(303);
    const after = await visitor.get(on.headers.location);
    expect(after.text).toContain('Sessions from a subscriber hash are on');
    expect(after.text).toContain('id="sessions-state">on<');
    expect((await t.a.get('/v1/inbox/settings').expect(200)).body.data.subscriberHashSessions).toBe(true);
    await counts((await session().expect(201)).body.data.token).expect(200);

    expect((await post('sessions', { enabled: 'off' })).status).toBe(303);
    expect((await t.a.get('/v1/inbox/settings').expect(200)).body.data.subscriberHashSessions).toBe(false);
    await session().expect(403);
  });

  it("keeps to the organization's environments", async () => {
    expect((await page(t.environments.b)).status).toBe(404);
    await page();
    expect((await post('secrets', {}, t.environments.b)).status).toBe(404);
    expect((await post('origins', { origins: 'https://evil.example' }, t.environments.b)).status).toBe(404);
    expect((await post('sessions', { enabled: 'on' }, t.environments.b)).status).toBe(404);
    expect((await t.b.get('/v1/inbox/settings').expect(200)).body.data).toMatchObject({ allowedOrigins: [], subscriberHashSessions: false });
  });
});

describe.runIf(process.env.HERALD_TEST_DB === 'sqlite')('Settings → Inbox in Chromium', () => {
  const chromium = chromiumBeside(() => t.app);

  it('saves origins, reveals and adds a secret, and mints a token the example page opens with', { timeout: 60_000 }, async () => {
    // The example page loads herald/client's browser module: built here, not left to whichever test ran first.
    await builtClient();
    const context = await chromium.browser.newContext({ viewport: { width: 1280, height: 900 } });
    const tab = await context.newPage();
    const problems: string[] = [];
    tab.on('pageerror', (error) => problems.push(error.message));
    tab.on('dialog', (dialog) => dialog.accept());
    await tab.goto(`${chromium.url}/dashboard/sign-in`);
    await tab.fill('#email', 'ada@example.com');
    await tab.fill('#password', OWNER_PASSWORD);
    await Promise.all([tab.waitForURL(/settings\/api-keys/), tab.click('button[type=submit]')]);
    await tab.getByRole('link', { name: 'Inbox' }).click();
    await tab.waitForURL(/settings\/inbox/);

    await tab.fill('#origins', 'https://shop.example.com');
    await Promise.all([tab.waitForURL(/done=origins/), tab.getByRole('button', { name: 'Save origins' }).click()]);
    await expect.poll(() => tab.getByRole('status').innerText()).toContain('saved');
    expect(await tab.inputValue('#origins')).toBe('https://shop.example.com');

    const before = await tab.locator('tr[data-kid]').count();
    await Promise.all([tab.waitForURL(/done=added/), tab.getByRole('button', { name: 'Add a secret' }).click()]);
    expect(await tab.locator('tr[data-kid]').count()).toBe(Math.min(before + 1, 2));
    await tab.locator('tr[data-kid]').first().locator('summary').click();
    expect(await tab.locator('#secret-0').innerText()).toMatch(/^[A-Za-z0-9_-]{43}$/);

    expect(await tab.locator('#application-identifier').innerText()).toMatch(/^app_[0-9a-f]{24}$/);
    await Promise.all([tab.waitForURL(/done=sessions-on/), tab.getByRole('button', { name: 'Turn sessions on' }).click()]);
    expect(await tab.locator('#sessions-state').innerText()).toBe('on');
    await Promise.all([tab.waitForURL(/done=sessions-off/), tab.getByRole('button', { name: 'Turn sessions off' }).click()]);
    expect(await tab.locator('#sessions-state').innerText()).toBe('off');

    await tab.fill('#token-subscriber', 'ada');
    await tab.getByRole('button', { name: 'Mint a token' }).click();
    const token = (await tab.locator('#new-token').innerText()).trim();
    const example = await context.newPage();
    example.on('pageerror', (error) => problems.push(error.message));
    await example.goto(`${chromium.url}/examples/inbox/`);
    await example.fill('#token', token);
    await example.click('#token-form button[type=submit]');
    await example.click('#bell');
    await expect.poll(() => example.locator('#status').innerText()).toBe('live');
    const shots = screenshotFolder('inbox-settings');
    await tab.screenshot({ path: path.join(shots, 'inbox-settings.png'), fullPage: true });
    console.info(`inbox-settings screenshot: ${shots}`);
    expect(problems).toEqual([]);
    await context.close();
  });
});
