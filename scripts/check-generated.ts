// Fails when generated/ is not what openapi-typescript makes of openapi/v1.yaml today, so the
// committed types can never drift from the contract. Run `npm run generate` to fix.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const committed = 'generated/v1.d.ts';
const fresh = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'herald-gen-')), 'v1.d.ts');
// The flags of `npm run generate`: open objects (payloads, `data`) are Record<string, unknown> rather
// than Record<string, never>, and a write shape's field with a default stays optional for its sender.
const FLAGS = ['--empty-objects-unknown', '--default-non-nullable', 'false'];
execFileSync('npx', ['--no-install', 'openapi-typescript', 'openapi/v1.yaml', '-o', fresh, ...FLAGS], { stdio: 'pipe' });
if (!fs.existsSync(committed) || fs.readFileSync(committed, 'utf8') !== fs.readFileSync(fresh, 'utf8')) {
  process.stderr.write(`${committed} differs from what openapi/v1.yaml generates: run "npm run generate" and commit it.\n`);
  process.exit(1);
}
process.stdout.write(`${committed} is current.\n`);
