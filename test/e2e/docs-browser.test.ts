import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Express } from 'express';
import type { Locator } from 'playwright-core';
import { createApp } from '../../src/app.js';
import { loadConfig } from '../../src/config.js';
import { createLogger } from '../../src/logger.js';
import { loadSpec, operationsOf } from '../../scripts/docs.js';
import { ManualClock } from '../helpers/app.js';
import { createTestDb, type TestDb } from '../helpers/db.js';
import { chromiumBeside, screenshotFolder, stayOffline } from '../helpers/browser.js';

const escapeRegExp = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

// /docs as a reader sees it: the real server builds the page on first request and a real browser,
// offline, renders it. Once: the page does not depend on the database.
describe.runIf(process.env.HERALD_TEST_DB === 'sqlite')('GET /docs in Chromium', () => {
  let testDb: TestDb;
  let app: Express;
  let workDir: string;
  let docsFile: string;

  beforeAll(async () => {
    testDb = await createTestDb();
    workDir = fs.mkdtempSync(path.join(os.tmpdir(), 'herald-docs-browser-'));
    docsFile = path.join(workDir, 'docs', 'index.html');
    const deps = { db: testDb.db, clock: new ManualClock(), config: loadConfig({}), logger: createLogger('silent') };
    app = await createApp(deps, { docsFile });
  });
  // afterAll hooks run last registered first: this one, registered before the browser's, runs after it.
  afterAll(async () => {
    await testDb?.close();
    // The 2.6 MB page goes; the screenshot, in its own folder, stays for a person to look at.
    if (workDir) fs.rmSync(workDir, { recursive: true, force: true });
  });
  // Opened once the app exists, closed before its database.
  const chromium = chromiumBeside(() => app);

  it('builds the page on the first request, then serves it from the file', { timeout: 60_000 }, async () => {
    expect(fs.existsSync(docsFile)).toBe(false);
    const first = await fetch(`${chromium.url}/docs`);
    expect(first.status).toBe(200);
    expect(first.headers.get('content-type')).toMatch(/^text\/html/);
    expect(fs.existsSync(docsFile)).toBe(true);
    const builtAt = fs.statSync(docsFile).mtimeMs;
    expect((await fetch(`${chromium.url}/docs`)).status).toBe(200);
    expect(fs.statSync(docsFile).mtimeMs).toBe(builtAt);
  });

  it("renders every tag and operation, with curl and TypeScript samples, asking the network for nothing, not even for Redoc's footer logo, and breaking no policy", { timeout: 300_000 }, async () => {
    const spec = loadSpec();
    const page = await chromium.browser.newPage({ viewport: { width: 1440, height: 900 } });
    const outside = await stayOffline(page);
    const violations: string[] = [];
    page.on('console', (message) => {
      if (message.type() === 'error' && /Content Security Policy/i.test(message.text())) violations.push(message.text());
    });
    await page.goto(`${chromium.url}/docs`);
    const menu = page.locator('[data-component-name="Menu/MenuItem"] > a');
    // Redoc keeps the active item in view by scrolling the sidebar just far enough, which can leave
    // the next item at its edge, under a tag's header: a person would scroll it into the middle first.
    const centre = (item: Locator, timeout?: number) => item.evaluate((element) => element.scrollIntoView({ block: 'center' }), undefined, { timeout });
    const open = async (item: Locator) => {
      await centre(item);
      await item.click();
    };

    for (const tag of spec.tags as Array<{ name: string }>) {
      // Clicking a tag opens its operations only once Redoc has hydrated the static page.
      await open(menu.filter({ hasText: new RegExp(`^${escapeRegExp(tag.name)}$`) }));
      const operations = operationsOf(spec).filter((op) => spec.paths[op.path][op.method].tags.includes(tag.name));
      expect(operations.length, tag.name).toBeGreaterThan(0);
      for (const { path: apiPath, method } of operations) {
        const { summary } = spec.paths[apiPath][method];
        await open(menu.filter({ hasText: new RegExp(`^${escapeRegExp(summary)}\\s*${method}$`, 'i') }));
        const heading = page.locator('h1, h2').filter({ hasText: new RegExp(`^${escapeRegExp(summary)}$`) });
        await expect.poll(() => heading.first().isVisible(), { message: summary, timeout: 15_000 }).toBe(true);
      }
    }

    // One operation read closely: its samples panel offers curl and TypeScript, built from its example.
    const updateSubscriber = menu.filter({ hasText: /^Update a subscriber\s*PUT$/i });
    if (!(await updateSubscriber.isVisible())) await open(menu.filter({ hasText: /^Subscribers$/ }));
    await open(updateSubscriber);
    const operation = page.locator('[data-item-kind="httpItem"]').filter({ has: page.locator('h2', { hasText: /^Update a subscriber$/ }) });
    const samples = operation.locator('.panel-request-samples');
    await expect.poll(() => samples.innerText(), { timeout: 15_000 }).toContain(`curl -X PUT 'http://localhost:3000/v1/subscribers/user-123'`);
    // Pick TypeScript in the language dropdown. Each try looks at the page first and then does one
    // step (open the dropdown, or pick the item), each bounded, because under load Redoc may re-render
    // the panel between two steps, closing the dropdown: clicking the button blindly would toggle it.
    // The button is brought to the middle of the view first: the menu opens below it, and when the
    // button sits at the bottom edge the menu is out of view and no click can reach its items.
    const typeScriptSample = `await herald.PUT('/subscribers/{subscriberId}'`;
    const language = samples.getByRole('button', { name: /^(curl|TypeScript)$/ });
    const typeScript = page.getByRole('menuitem', { name: 'TypeScript' });
    await expect
      .poll(async () => {
        if ((await samples.innerText()).includes(typeScriptSample)) return true;
        await centre(language, 2_000).catch(() => undefined);
        const expanded = await language.getAttribute('aria-expanded', { timeout: 2_000 }).catch(() => null);
        const step = expanded === 'true' ? typeScript : language;
        await step.click({ timeout: 2_000 }).catch(() => undefined);
        return false;
      }, { timeout: 60_000, interval: 250 })
      .toBe(true);

    const screenshot = path.join(screenshotFolder('docs'), 'docs.png');
    await page.screenshot({ path: screenshot });
    expect(fs.statSync(screenshot).size).toBeGreaterThan(10_000);
    console.info(`docs screenshot: ${screenshot}`);

    expect(outside).toEqual([]);
    expect(violations).toEqual([]);
    await page.close();
  });
});
