import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import type { Express } from 'express';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll } from 'vitest';
import { ROOT } from './process.js';

/** Debian's Chromium (`.ci/run` installs it); Playwright's own browser download cannot work offline. */
export const CHROMIUM = '/usr/bin/chromium';

/**
 * A folder for a test's screenshots, for a person to look at after the run:
 * `test-results/screenshots/<name>` (ignored by git), emptied first, so runs do not pile up.
 */
export function screenshotFolder(name: string): string {
  const folder = path.join(ROOT, 'test-results', 'screenshots', name);
  fs.rmSync(folder, { recursive: true, force: true });
  fs.mkdirSync(folder, { recursive: true });
  return folder;
}

export function launchChromium(): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM,
    // Quiet and offline: no GPU, no background updates or sync that would reach the network, and
    // no host name but localhost resolves (stayOffline).
    args: [
      '--disable-gpu',
      '--disable-dev-shm-usage',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
      '--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE localhost, EXCLUDE 127.0.0.1',
    ],
  });
}

/**
 * For the describe block it is called in: Chromium and `app` served on 127.0.0.1, opened before its
 * tests and closed after them. `app` is asked for in beforeAll, once the file's own setup has made it.
 */
export function chromiumBeside(app: () => Express): { readonly browser: Browser; readonly url: string } {
  let browser: Browser | undefined;
  let server: Awaited<ReturnType<typeof listen>> | undefined;
  beforeAll(async () => {
    server = await listen(app());
    browser = await launchChromium();
  });
  afterAll(async () => {
    await browser?.close();
    await server?.close();
  });
  const opened = <T>(value: T | undefined): T => {
    if (value === undefined) throw new Error('chromiumBeside: used outside its tests');
    return value;
  };
  return {
    get browser() {
      return opened(browser);
    },
    get url() {
      return opened(server).url;
    },
  };
}

/** Serves an app on 127.0.0.1 on a free port, as a browser or another process reaches it. */
export async function listen(app: Express): Promise<{ url: string; close(): Promise<void> }> {
  const server = http.createServer(app);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/**
 * Records every request the page makes for a host other than this machine; the browser cannot
 * reach one (launchChromium resolves no other name). Watched, not intercepted: while Playwright
 * intercepts a page's requests (page.route) it answers CORS preflights itself, and a page of
 * another origin then reads answers that a real browser would refuse it.
 */
export async function stayOffline(page: Page): Promise<string[]> {
  const attempted: string[] = [];
  page.on('request', (request) => {
    const url = new URL(request.url());
    if (!['127.0.0.1', 'localhost'].includes(url.hostname) && !['data:', 'blob:'].includes(url.protocol)) attempted.push(url.href);
  });
  return attempted;
}
