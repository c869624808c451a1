import fs from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { buildClient, CLIENT_DIR, clientSourcesChangedAt } from '../../scripts/build-client.js';

const LOCK = `${CLIENT_DIR}.lock`;
const STAMP = path.join(CLIENT_DIR, 'package.json');

/**
 * herald/client as consumers get it: dist/client, built by `npm run build:client`. Built here when
 * it is missing or older than its sources; test files that run side by side take turns through a
 * lock file, so one builds and the others find it fresh.
 */
export async function builtClient(): Promise<string> {
  fs.mkdirSync(path.dirname(CLIENT_DIR), { recursive: true });
  for (const deadline = Date.now() + 120_000; ; ) {
    try {
      fs.closeSync(fs.openSync(LOCK, 'wx'));
      break;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      // A lock left by a killed run is older than any build takes.
      if (Date.now() - (fs.statSync(LOCK, { throwIfNoEntry: false })?.mtimeMs ?? Date.now()) > 120_000) fs.rmSync(LOCK, { force: true });
      if (Date.now() > deadline) throw new Error(`${LOCK} is held by another build`);
      await sleep(100);
    }
  }
  try {
    const builtAt = fs.statSync(STAMP, { throwIfNoEntry: false })?.mtimeMs ?? 0;
    if (builtAt < clientSourcesChangedAt()) await buildClient();
  } finally {
    fs.rmSync(LOCK, { force: true });
  }
  return CLIENT_DIR;
}
