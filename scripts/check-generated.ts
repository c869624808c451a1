// Fails when generated/ is not what `npm run generate` makes of openapi/ today: the bundle
// (generated/openapi.yaml, what the server, the docs and the tests read) and the types generated
// from it, so neither can drift from the contract. Run `npm run generate` to fix.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import YAML from 'yaml';

const work = fs.mkdtempSync(path.join(os.tmpdir(), 'herald-gen-'));
const bundle = path.join(work, 'openapi.yaml');
const types = path.join(work, 'v1.d.ts');
// The flags of `npm run generate`: open objects (payloads, `data`) are Record<string, unknown> rather
// than Record<string, never>, and a write shape's field with a default stays optional for its sender.
const FLAGS = ['--empty-objects-unknown', '--default-non-nullable', 'false'];
const env = { ...process.env, REDOCLY_TELEMETRY: 'off' };
function run(args: string[]): void {
  try {
    execFileSync('npx', ['--no-install', ...args], { stdio: 'pipe', env });
  } catch (err) {
    process.stderr.write(`${args[0]} failed:\n${(err as { stderr?: Buffer }).stderr?.toString() ?? String(err)}\n`);
    process.exit(1);
  }
}
run(['redocly', 'bundle', 'openapi/v1.yaml', '-o', bundle]);
run(['openapi-typescript', bundle, '-o', types, ...FLAGS]);

const stale = [
  ['generated/openapi.yaml', bundle],
  ['generated/v1.d.ts', types],
].filter(([committed, fresh]) => !fs.existsSync(committed) || fs.readFileSync(committed, 'utf8') !== fs.readFileSync(fresh, 'utf8'));

// The layout: every file of openapi/components/<kind>/ is listed in the root under its own name, and
// the bundle has no component that the root does not list (redocly bundle makes one, named after
// the file, for a file that a path reaches without the root's listing).
const problems = stale.map(([committed]) => `${committed} differs from what openapi/ generates: run "npm run generate" and commit it.`);
const listed = (YAML.parse(fs.readFileSync('openapi/v1.yaml', 'utf8')).components ?? {}) as Record<string, Record<string, unknown>>;
const bundled = (YAML.parse(fs.readFileSync(bundle, 'utf8')).components ?? {}) as Record<string, Record<string, unknown>>;
for (const kind of fs.readdirSync('openapi/components')) {
  for (const file of fs.readdirSync(path.join('openapi/components', kind))) {
    const name = path.basename(file, '.yaml');
    const ref = (listed[kind]?.[name] as { $ref?: string } | undefined)?.$ref;
    if (ref !== `./components/${kind}/${file}`) problems.push(`openapi/components/${kind}/${file} is not listed in openapi/v1.yaml as components.${kind}.${name}.`);
  }
}
for (const [kind, components] of Object.entries(bundled)) {
  for (const name of Object.keys(components)) {
    if (!listed[kind]?.[name]) problems.push(`the bundle has components.${kind}.${name}, which openapi/v1.yaml does not list: list it there.`);
  }
}
fs.rmSync(work, { recursive: true, force: true });
if (problems.length) {
  process.stderr.write(`${problems.join('\n')}\n`);
  process.exit(1);
}
process.stdout.write('generated/openapi.yaml and generated/v1.d.ts are current.\n');
