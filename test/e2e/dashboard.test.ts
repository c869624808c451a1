import path from 'node:path';
import { spawn } from 'node:child_process';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import supertest from 'supertest';
import { createApp } from '../../src/app.js';
import { hashPassword } from '../../src/accounts/passwords.js';
import { saveOwner } from '../../src/db/repos/owners.js';
import { createApiKey } from '../../src/db/repos/accounts.js';
import { startTestApp, type TestApp } from '../helpers/app.js';
import { chromiumBeside, screenshotFolder } from '../helpers/browser.js';
import { processDatabaseUrl } from '../helpers/db.js';
import { OWNER_PASSWORD as PASSWORD, Visitor as BaseVisitor } from '../helpers/dashboard.js';
import { ROOT, runScript } from '../helpers/process.js';

let t: TestApp;
let organizationA: string;
let organizationB: string;
beforeAll(async () => {
  t = await startTestApp();
  const organizationOf = async (environmentId: string) =>
    (await t.db('environments').where({ id: environmentId }).first('organization_id')).organization_id as string;
  organizationA = await organizationOf(t.environments.a);
  organizationB = await organizationOf(t.environments.b);
  const passwordHash = await hashPassword(PASSWORD);
  await saveOwner(t.db, { organizationId: organizationA, email: 'ada@example.com', passwordHash, now: t.clock.now() });
  await saveOwner(t.db, { organizationId: organizationA, email: 'grace@example.com', passwordHash, now: t.clock.now() });
  await saveOwner(t.db, { organizationId: organizationA, email: 'lockme@example.com', passwordHash, now: t.clock.now() });
});
afterEach(async () => t.assertContract());
afterAll(async () => t?.close());

/** A visitor of this file's app; signs in as ada unless told otherwise. */
class Visitor extends BaseVisitor {
  constructor(app: ConstructorParameters<typeof BaseVisitor>[0] = t.app) {
    super(app);
  }
  override signIn(email = 'ada@example.com', password = PASSWORD) {
    return super.signIn(email, password);
  }
}

const cookieHeader = (res: supertest.Response, name: string) =>
  ([] as string[]).concat(res.headers['set-cookie'] ?? []).find((c) => c.startsWith(`${name}=`));

describe('signing in to /dashboard', () => {
  it('serves its pages at their paths only, letter for letter: a session cookie is for /dashboard', async () => {
    for (const path of ['/DASHBOARD/sign-in', '/Dashboard/settings/api-keys']) {
      const res = await t.http.get(path);
      expect(res.status, path).toBe(404);
      expect(res.headers['set-cookie'], path).toBeUndefined();
    }
  });

  it('sends a visitor without a session to the sign-in page', async () => {
    const res = await t.http.get('/dashboard/settings/api-keys').expect(303);
    expect(res.headers.location).toBe('/dashboard/sign-in');
    expect((await t.http.get('/dashboard').expect(303)).headers.location).toBe('/dashboard/sign-in');
  });

  it('signs the owner in with an HttpOnly, SameSite=Lax session cookie and keeps only its hash', async () => {
    const visitor = new Visitor();
    const res = await visitor.signIn('ADA@example.com');
    expect(res.status).toBe(303);
    expect(res.headers.location).toBe('/dashboard/settings/api-keys');
    const cookie = cookieHeader(res, 'herald_session')!;
    expect(cookie).toMatch(/HttpOnly/);
    expect(cookie).toMatch(/SameSite=Lax/);
    expect(cookie).toMatch(/Path=\/dashboard/);
    expect(cookie).not.toMatch(/Secure/);
    const token = /^herald_session=([^;]+)/.exec(cookie)![1];
    expect(await t.db('dashboard_sessions').where({ id: token }).first()).toBeUndefined();
    expect((await visitor.get('/dashboard/settings/api-keys')).status).toBe(200);
  });

  it("refuses a form over 16 KiB, or in another charset, saying what the dashboard's limit and encoding are", async () => {
    const big = await t.http.post('/dashboard/sign-in').type('form').send({ email: 'x'.repeat(20_000) }).expect(413);
    expect(big.body.message).toBe('The request body is larger than 16 KiB');
    const latin1 = await t.http.post('/dashboard/sign-in').set('Content-Type', 'application/x-www-form-urlencoded; charset=latin1').send('email=x').expect(400);
    expect(latin1.body.message).toBe('The request body must be encoded as UTF-8');
  });

  it('marks the cookie Secure when the request came over HTTPS', async () => {
    // How a deployment behind a TLS proxy says so (HERALD_TRUST_PROXY=loopback).
    const app = await createApp({ ...t.deps, config: { ...t.deps.config, trustProxy: ['loopback'] } });
    // By hand: a cookie jar would rightly keep Secure cookies off this plain-HTTP test connection.
    const page = await supertest(app).get('/dashboard/sign-in').set('X-Forwarded-Proto', 'https');
    const csrf = /name="_csrf" value="([^"]+)"/.exec(page.text)![1];
    const res = await supertest(app)
      .post('/dashboard/sign-in')
      .set({ 'X-Forwarded-Proto': 'https', Cookie: `herald_sign_in=${csrf}` })
      .type('form')
      .send({ _csrf: csrf, email: 'ada@example.com', password: PASSWORD });
    expect(res.status).toBe(303);
    expect(cookieHeader(res, 'herald_session')).toMatch(/; Secure/);
    expect(cookieHeader(page, 'herald_sign_in')).toMatch(/; Secure/);
  });

  it('refuses a wrong password or an unknown email with the same message', async () => {
    const wrong = await new Visitor().signIn('grace@example.com', 'not the password');
    const unknown = await new Visitor().signIn('nobody@example.com', PASSWORD);
    for (const res of [wrong, unknown]) {
      expect(res.status).toBe(401);
      expect(res.text).toContain('That email and password do not match.');
      expect(cookieHeader(res, 'herald_session')).toBeUndefined();
    }
  });

  it('refuses a sign-in form that did not come from the sign-in page', async () => {
    const res = await t.http.post('/dashboard/sign-in').type('form').send({ email: 'ada@example.com', password: PASSWORD });
    expect(res.status).toBe(403);
    expect(cookieHeader(res, 'herald_session')).toBeUndefined();
  });

  it('refuses a form sent from another origin (a sibling port or subdomain included), whatever token it carries', async () => {
    // What a page on 127.0.0.1:4102 does to the dashboard on :4101: it plants its own sign-in
    // cookie (browsers keep cookies by host, not port) and posts the form with the same token.
    const planted = 'tossed-token';
    const post = (headers: Record<string, string>) =>
      t.http.post('/dashboard/sign-in').set('Cookie', `herald_sign_in=${planted}`).set(headers).type('form').send({ _csrf: planted, email: 'ada@example.com', password: PASSWORD });
    // Without Sec-Fetch-Site (a plain-HTTP address that is not localhost), by Origin; `null` is
    // what a page with no-referrer sends.
    const foreign: Record<string, string>[] = [{ 'Sec-Fetch-Site': 'same-site' }, { 'Sec-Fetch-Site': 'cross-site' }, { Origin: 'http://127.0.0.1:4102' }, { Origin: 'null' }, { Origin: 'https://127.0.0.1' }];
    for (const headers of foreign) {
      const res = await post(headers);
      expect(res.status, JSON.stringify(headers)).toBe(403);
      expect(res.text).toContain('This form was sent from another site');
      expect(cookieHeader(res, 'herald_session')).toBeUndefined();
    }
    // The dashboard's own forms, as browsers send them, and a client that sends no Origin.
    const own = async (withOrigin: boolean, fetchSite?: string) => {
      const page = await t.http.get('/dashboard/sign-in');
      expect(page.headers['referrer-policy']).toBe('same-origin');
      const cookie = ([] as string[]).concat(page.headers['set-cookie'])[0].split(';')[0];
      const csrf = /name="_csrf" value="([^"]+)"/.exec(page.text)![1];
      // supertest serves each request on a port of its own: the host is named, as a browser names it.
      const headers: Record<string, string> = { Cookie: cookie, Host: 'herald.example:3000' };
      if (withOrigin) headers.Origin = 'http://herald.example:3000';
      if (fetchSite) headers['Sec-Fetch-Site'] = fetchSite;
      return t.http.post('/dashboard/sign-in').set(headers).type('form').send({ _csrf: csrf, email: 'ada@example.com', password: PASSWORD });
    };
    for (const [withOrigin, fetchSite] of [[true, 'same-origin'], [true, undefined], [false, undefined]] as const) {
      expect((await own(withOrigin, fetchSite)).status, `${withOrigin} ${fetchSite}`).toBe(303);
    }
  });

  it('takes a cookie sent twice under one name as none: a cookie planted for a longer path does not choose the session', async () => {
    const ada = new Visitor();
    const adaToken = /^herald_session=([^;]+)/.exec(cookieHeader(await ada.signIn(), 'herald_session')!)![1];
    const grace = new Visitor();
    const graceToken = /^herald_session=([^;]+)/.exec(cookieHeader(await grace.signIn('grace@example.com'), 'herald_session')!)![1];
    // A browser sends the cookie of the longer path first: the planted one.
    const both = await t.http.get('/dashboard/webhooks').set('Cookie', `herald_session=${graceToken}; herald_session=${adaToken}`);
    expect(both.status).toBe(303);
    expect(both.headers.location).toBe('/dashboard/sign-in');
    await t.http.get('/dashboard/webhooks').set('Cookie', `herald_session=${adaToken}`).expect(200);
    // The sign-in form's token too.
    const res = await t.http.post('/dashboard/sign-in').set('Cookie', 'herald_sign_in=a; herald_sign_in=b').type('form').send({ _csrf: 'a', email: 'ada@example.com', password: PASSWORD });
    expect(res.status).toBe(403);
  });

  it('locks an email out from an address after five failed sign-ins, until the window ends', async () => {
    const visitor = new Visitor();
    for (let attempt = 1; attempt <= 5; attempt++) expect((await visitor.signIn('lockme@example.com', 'wrong')).status).toBe(401);
    const limited = await visitor.signIn('lockme@example.com', PASSWORD);
    expect(limited.status).toBe(429);
    expect(Number(limited.headers['retry-after'])).toBeGreaterThan(800);
    expect(limited.text).toContain('Too many failed sign-ins');
    // Another account from the same address is not locked out with it.
    expect((await new Visitor().signIn('grace@example.com', PASSWORD)).status).toBe(303);

    t.clock.advance(15 * 60 * 1000 + 1000);
    expect((await visitor.signIn('lockme@example.com', PASSWORD)).status).toBe(303);
  });

  it('limits one address across emails: after twenty failures any sign-in from it waits, before any password is hashed', async () => {
    t.clock.advance(15 * 60 * 1000 + 1000); // a window of its own
    const visitor = new Visitor();
    for (let attempt = 1; attempt <= 20; attempt++) expect((await visitor.signIn(`spray-${attempt}@example.com`, 'guess')).status).toBe(401);
    const limited = await visitor.signIn('ada@example.com', PASSWORD);
    expect(limited.status).toBe(429);
    expect(limited.text).toContain('Too many failed sign-ins from your address');
    expect((await new Visitor().signIn('spray-21@example.com', 'guess')).status).toBe(429);

    t.clock.advance(15 * 60 * 1000 + 1000);
    expect((await visitor.signIn('ada@example.com', PASSWORD)).status).toBe(303);
  });

  it('does not count successful sign-ins against the limit', async () => {
    for (let attempt = 1; attempt <= 7; attempt++) expect((await new Visitor().signIn('grace@example.com')).status).toBe(303);
  });

  it('signs out: the session is deleted and its cookie no longer opens the dashboard', async () => {
    const visitor = new Visitor();
    await visitor.signIn();
    await visitor.get('/dashboard/settings/api-keys');
    const before = Number((await t.db('dashboard_sessions').count({ n: '*' }))[0].n);
    const res = await visitor.post('/dashboard/sign-out', { _csrf: visitor.csrf });
    expect(res.status).toBe(303);
    expect(Number((await t.db('dashboard_sessions').count({ n: '*' }))[0].n)).toBe(before - 1);
    expect((await visitor.get('/dashboard/settings/api-keys')).status).toBe(303);
  });

  it('ends a session after 12 hours', async () => {
    const visitor = new Visitor();
    await visitor.signIn();
    expect((await visitor.get('/dashboard/settings/api-keys')).status).toBe(200);
    t.clock.advance(12 * 60 * 60 * 1000 + 1000);
    expect((await visitor.get('/dashboard/settings/api-keys')).status).toBe(303);
  });
});

describe('Settings → API keys', () => {
  let visitor: Visitor;
  beforeAll(async () => {
    visitor = new Visitor();
    await visitor.signIn();
  });

  it("lists the organization's environments and keys, and nothing of other organizations", async () => {
    await createApiKey(t.db, { environmentId: t.environments.b, name: 'Key of B' });
    const page = await visitor.get('/dashboard/settings/api-keys');
    expect(page.status).toBe(200);
    expect(page.headers['content-security-policy']).toMatch(/script-src 'nonce-/);
    expect(page.headers['cache-control']).toBe('no-store');
    expect(page.text).toContain(t.environments.a);
    expect(page.text).toContain(t.environments.aProduction);
    expect(page.text).not.toContain(t.environments.b);
    expect(page.text).not.toContain('Key of B');
  });

  it('creates a named key in an environment and shows it once; the key opens that environment', async () => {
    const res = await visitor.post('/dashboard/settings/api-keys', { _csrf: visitor.csrf, name: 'Billing <service>', environmentId: t.environments.aProduction });
    expect(res.status).toBe(201);
    const key = /<code id="new-key">(hk_[0-9a-f]{48})<\/code>/.exec(res.text)![1];
    expect(res.text).toContain('Billing &lt;service&gt;');
    expect(res.text).not.toContain('Billing <service>');
    await t.aProduction.post('/v1/subscribers', { subscriberId: 'prod-only' }).expect(201);
    const listed = await t.http.get('/v1/subscribers').set('Authorization', `Bearer ${key}`).expect(200);
    expect(listed.body.data.map((s: { subscriberId: string }) => s.subscriberId)).toEqual(['prod-only']);
    expect((await visitor.get('/dashboard/settings/api-keys')).text).not.toContain(key);
  });

  it('rejects a key without a name, or in an environment of another organization, with 422', async () => {
    expect((await visitor.post('/dashboard/settings/api-keys', { _csrf: visitor.csrf, name: ' ', environmentId: t.environments.a })).status).toBe(422);
    const foreign = await visitor.post('/dashboard/settings/api-keys', { _csrf: visitor.csrf, name: 'sneaky', environmentId: t.environments.b });
    expect(foreign.status).toBe(422);
    expect(await t.db('api_keys').where({ name: 'sneaky' }).first()).toBeUndefined();
  });

  it('refuses every form without the session CSRF token with 403', async () => {
    const noToken = await visitor.post('/dashboard/settings/api-keys', { name: 'forged', environmentId: t.environments.a });
    const wrongToken = await visitor.post('/dashboard/settings/api-keys', { _csrf: 'x'.repeat(43), name: 'forged', environmentId: t.environments.a });
    expect(noToken.status).toBe(403);
    expect(wrongToken.status).toBe(403);
    expect(await t.db('api_keys').where({ name: 'forged' }).first()).toBeUndefined();
    await visitor.get('/dashboard/settings/api-keys');
  });

  it('revokes a key: it answers 401 from then on', async () => {
    const { id, key } = await createApiKey(t.db, { environmentId: t.environments.a, name: 'to revoke' });
    await t.http.get('/v1/subscribers').set('Authorization', `Bearer ${key}`).expect(200);
    const res = await visitor.post(`/dashboard/settings/api-keys/${id}/revoke`, { _csrf: visitor.csrf });
    expect(res.status).toBe(303);
    expect(res.headers.location).toBe('/dashboard/settings/api-keys?revoked=1');
    const denied = await t.http.get('/v1/subscribers').set('Authorization', `Bearer ${key}`).expect(401);
    expect(denied.body.message).toBe('This API key has been revoked');
  });

  it("cannot revoke another organization's key", async () => {
    const { id, key } = await createApiKey(t.db, { environmentId: t.environments.b, name: 'B keeps this' });
    expect((await visitor.post(`/dashboard/settings/api-keys/${id}/revoke`, { _csrf: visitor.csrf })).status).toBe(404);
    await t.http.get('/v1/subscribers').set('Authorization', `Bearer ${key}`).expect(200);
  });
});

/** `npm run keys -- …` with `input` on standard input. */
function keysWithInput(args: string[], env: Record<string, string>, input: string): Promise<{ code: number | null; stdout: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', 'scripts/keys.ts', ...args], { cwd: ROOT, env: { ...process.env, ...env } });
    let stdout = '';
    child.stdout.on('data', (chunk) => (stdout += chunk));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout }));
    child.stdin.end(input);
  });
}

describe('npm run keys -- owner', () => {
  it('creates an owner who can sign in, and resets the password of an existing one', { timeout: 60_000 }, async () => {
    const env = { DATABASE_URL: processDatabaseUrl(t.testDb) };
    const created = await runScript('scripts/keys.ts', ['owner', '--email', 'Linus@Example.com', '--password', 'first password', '--organization', organizationB], env);
    expect(created.code).toBe(0);
    expect(created.stdout).toContain('Created owner linus@example.com of B');
    expect((await new Visitor().signIn('linus@example.com', 'first password')).status).toBe(303);

    const short = await runScript('scripts/keys.ts', ['owner', '--email', 'linus@example.com', '--password', 'short'], env);
    expect(short.code).toBe(1);
    expect(short.stderr).toContain('at least 8 characters');

    // The password piped in, as the README shows for keeping it out of shell history.
    const reset = await keysWithInput(['owner', '--email', 'linus@example.com', '--organization', organizationB], env, 'second password\n');
    expect(reset.stdout).toContain('Updated owner');
    expect((await new Visitor().signIn('linus@example.com', 'first password')).status).toBe(401);
    const visitor = new Visitor();
    expect((await visitor.signIn('linus@example.com', 'second password')).status).toBe(303);
    expect((await visitor.get('/dashboard/settings/api-keys')).text).toContain(t.environments.b);
  });
});

// The same flow in a real browser: what the owner sees and clicks. Once: the flows above already
// run on both databases.
describe.runIf(process.env.HERALD_TEST_DB === 'sqlite')('the dashboard in Chromium', () => {
  const chromium = chromiumBeside(() => t.app);
  let screenshots: string;
  beforeAll(() => {
    screenshots = screenshotFolder('dashboard');
  });

  it('signs in, creates and copies a key that works over HTTP, revokes it and sees the 401', { timeout: 60_000 }, async () => {
    const context = await chromium.browser.newContext({ viewport: { width: 1280, height: 860 } });
    await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: chromium.url });
    const page = await context.newPage();
    page.on('dialog', (dialog) => dialog.accept());

    await page.goto(`${chromium.url}/dashboard`);
    await expect.poll(() => page.url()).toBe(`${chromium.url}/dashboard/sign-in`);
    await page.screenshot({ path: path.join(screenshots, 'sign-in.png') });
    await page.fill('#email', 'ada@example.com');
    await page.fill('#password', 'wrong password');
    await page.click('button[type=submit]');
    await expect.poll(() => page.getByRole('alert').innerText()).toContain('do not match');

    await page.fill('#password', PASSWORD);
    await page.click('button[type=submit]');
    await page.waitForURL(`${chromium.url}/dashboard/settings/api-keys`);
    await expect.poll(() => page.locator('.env-card b').allTextContents()).toEqual(['development', 'production']);

    await page.fill('#key-name', 'Browser key');
    await page.selectOption('#key-environment', { label: 'production' });
    await page.click('text=Create key');
    const key = (await page.locator('#new-key').innerText()).trim();
    expect(key).toMatch(/^hk_[0-9a-f]{48}$/);
    await page.click('button[data-copy=new-key]');
    await expect.poll(() => page.evaluate(() => navigator.clipboard.readText())).toBe(key);
    await page.screenshot({ path: path.join(screenshots, 'new-key.png'), fullPage: true });

    const useKey = () => fetch(`${chromium.url}/v1/subscribers`, { headers: { Authorization: `Bearer ${key}` } });
    expect((await useKey()).status).toBe(200);

    const row = page.locator('tr', { hasText: 'Browser key' });
    await row.getByRole('button', { name: 'Revoke' }).click();
    await expect.poll(() => page.getByRole('status').innerText()).toContain('revoked');
    await expect.poll(() => row.locator('.badge.revoked').isVisible()).toBe(true);
    const denied = await useKey();
    expect(denied.status).toBe(401);
    expect((await denied.json()).message).toBe('This API key has been revoked');
    await page.screenshot({ path: path.join(screenshots, 'revoked.png'), fullPage: true });

    // A form posted from elsewhere carries the session cookie (SameSite=Lax allows top-level
    // navigations) but not the token: refused.
    const forged = await page.request.post(`${chromium.url}/dashboard/settings/api-keys`, {
      form: { name: 'forged in browser', environmentId: t.environments.a },
      maxRedirects: 0,
    });
    expect(forged.status()).toBe(403);

    await page.click('text=Sign out');
    await page.waitForURL(`${chromium.url}/dashboard/sign-in`);
    await context.close();
    console.info(`dashboard screenshots: ${screenshots}`);
  });

  it('shows the rate-limit page after too many failed sign-ins', { timeout: 60_000 }, async () => {
    await saveOwner(t.db, { organizationId: organizationA, email: 'mallory@example.com', passwordHash: await hashPassword(PASSWORD), now: t.clock.now() });
    const page = await chromium.browser.newPage();
    let lastStatus = 0;
    page.on('response', (response) => {
      if (response.url().endsWith('/dashboard/sign-in') && response.request().method() === 'POST') lastStatus = response.status();
    });
    await page.goto(`${chromium.url}/dashboard/sign-in`);
    for (let attempt = 1; attempt <= 6; attempt++) {
      if (attempt === 6) await page.goto(`${chromium.url}/dashboard/sign-in`);
      await page.fill('#email', 'mallory@example.com');
      await page.fill('#password', attempt === 6 ? PASSWORD : `guess ${attempt}`);
      await Promise.all([page.waitForNavigation(), page.click('button[type=submit]')]);
    }
    expect(lastStatus).toBe(429);
    expect(await page.locator('h1').innerText()).toBe('Too many attempts');
    await page.screenshot({ path: path.join(screenshots, 'rate-limited.png') });
    await page.close();
  });
});
