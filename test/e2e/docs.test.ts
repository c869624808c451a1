import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { describe, expect, it, onTestFinished } from 'vitest';
import YAML from 'yaml';
import { ROOT } from '../helpers/process.js';
import { CONTRACT_PATH } from '../../src/contract.js';

// The real Redocly build, as `npm run docs` runs it. Only once: it does not depend on the database.
describe.runIf(process.env.HERALD_TEST_DB === 'sqlite')('npm run docs', () => {
  it('builds one self-contained page that documents every tag and operation', () => {
    const folder = fs.mkdtempSync(path.join(os.tmpdir(), 'herald-docs-'));
    onTestFinished(() => fs.rmSync(folder, { recursive: true, force: true }));
    const out = path.join(folder, 'index.html');
    execFileSync('npx', ['--no-install', 'redocly', 'build-docs', CONTRACT_PATH, '--inlineBundle', '-o', out], {
      cwd: ROOT,
      stdio: 'pipe',
      env: { ...process.env, REDOCLY_TELEMETRY: 'off' },
    });
    const html = fs.readFileSync(out, 'utf8');
    // Nothing the page needs comes from the network: no external scripts, styles or fonts.
    expect(html).not.toMatch(/<script[^>]+src=["']https?:/i);
    expect(html).not.toMatch(/<link[^>]+href=["']https?:[^"']*["'][^>]*rel=["']?(stylesheet|modulepreload)/i);
    expect(html).not.toMatch(/url\(\s*['"]?https?:|fonts\.googleapis/);

    const spec = YAML.parse(fs.readFileSync(CONTRACT_PATH, 'utf8'));
    for (const tag of spec.tags) expect(html).toContain(tag.name);
    for (const methods of Object.values(spec.paths) as Array<Record<string, { summary?: string; operationId?: string }>>) {
      for (const operation of Object.values(methods)) {
        if (operation.operationId) expect(html, operation.operationId).toContain(operation.summary);
      }
    }
  });
});
