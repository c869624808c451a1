// herald/client as a user meets it, built (dist/client): the README example and the docs'
// TypeScript samples compiled by tsc against its declarations, and the README example run by node
// on its JavaScript against a listening server.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { codeSamples, loadSpec, operationsOf } from '../../scripts/docs.js';
import { startTestApp, type TestApp } from '../helpers/app.js';
import { listen } from '../helpers/browser.js';
import { ROOT } from '../helpers/process.js';
import { builtClient } from '../helpers/client-build.js';

const run = promisify(execFile);

/** The README's client example: the code block right after its marker comment. */
function readmeExample(): string {
  const readme = fs.readFileSync(path.join(ROOT, 'README.md'), 'utf8');
  const block = /<!-- client-example[^>]*-->\s*```ts\n([\s\S]*?)```/.exec(readme);
  if (!block) throw new Error('README.md has no client example after <!-- client-example --> ');
  return block[1];
}

let t: TestApp;
let server: Awaited<ReturnType<typeof listen>>;
// Inside the package, so that `import … from 'herald/client'` resolves as it does for a user
// (a package may import itself by name through its `exports`).
let workDir: string;
beforeAll(async () => {
  await builtClient();
  t = await startTestApp();
  server = await listen(t.app);
  workDir = path.join(ROOT, '.vitest-tmp', `client-${randomBytes(4).toString('hex')}`);
  fs.mkdirSync(workDir, { recursive: true });
  fs.writeFileSync(path.join(workDir, 'readme-example.ts'), readmeExample());
});
afterEach(async () => t.assertContract());
afterAll(async () => {
  if (workDir) fs.rmSync(workDir, { recursive: true, force: true });
  await server?.close();
  await t?.close();
});

describe('herald/client', () => {
  // Compiling does not depend on the database: once is enough.
  it.runIf(process.env.HERALD_TEST_DB === 'sqlite')(
    'compiles the README example and the TypeScript sample of every operation in the docs',
    { timeout: 60_000 },
    async () => {
      const spec = loadSpec();
      const samples = operationsOf(spec).map(({ path: apiPath, method, operationId }) => {
        const file = `sample-${operationId}.ts`;
        fs.writeFileSync(path.join(workDir, file), codeSamples(spec, apiPath, method).find((s) => s.lang === 'TypeScript')!.source);
        return file;
      });
      fs.writeFileSync(
        path.join(workDir, 'tsconfig.json'),
        // The samples import the package by the name a frontend project installs it under.
        JSON.stringify({
          extends: '../../tsconfig.json',
          compilerOptions: { noEmit: true, paths: { '@herald/client': ['../../dist/client/index.d.ts'] } },
          include: [],
          files: ['readme-example.ts', ...samples],
        }),
      );
      const tsc = path.join(ROOT, 'node_modules', '.bin', 'tsc');
      const result = await run(tsc, ['-p', path.join(workDir, 'tsconfig.json')], { cwd: ROOT }).then(
        () => '',
        (err: { stdout?: string }) => err.stdout ?? String(err),
      );
      expect(result).toBe('');
      expect(samples.length).toBe(operationsOf(spec).length);
    },
  );

  // A project of its own, outside the repository, with the package in its node_modules as `npm
  // install` puts it there: both entry points resolve to their declarations through the package's
  // `exports`, under Node's resolution and under a bundler's.
  it.runIf(process.env.HERALD_TEST_DB === 'sqlite')(
    'gives a project that installs it types for @herald/client and @herald/client/browser',
    { timeout: 60_000 },
    async () => {
      const project = fs.mkdtempSync(path.join(os.tmpdir(), 'herald-client-user-'));
      try {
        const modules = path.join(project, 'node_modules');
        fs.cpSync(await builtClient(), path.join(modules, '@herald', 'client'), { recursive: true });
        fs.symlinkSync(path.join(ROOT, 'node_modules', 'openapi-fetch'), path.join(modules, 'openapi-fetch'));
        fs.writeFileSync(
          path.join(project, 'inbox.ts'),
          [
            "import { createInboxClient } from '@herald/client/browser';",
            "import { createHeraldClient } from '@herald/client';",
            "const inbox = createInboxClient({ baseUrl: 'http://localhost:3000', token: 'a-subscriber-token' });",
            "const herald = createHeraldClient({ baseUrl: 'http://localhost:3000', apiKey: 'a-secret-key' });",
            // Typed, not `any`: a path the contract lacks does not compile.
            "// @ts-expect-error no such path",
            "void inbox.api.GET('/no-such-path');",
            "void inbox.api.GET('/inbox/counts');",
            "// @ts-expect-error a message state the contract lacks",
            "void inbox.mark('m1', { pinned: true });",
            "// @ts-expect-error no such path",
            "void herald.GET('/no-such-path');",
            "void herald.GET('/subscribers/{subscriberId}', { params: { path: { subscriberId: 'ada' } } });",
            'export {};',
            '',
          ].join('\n'),
        );
        const tsc = path.join(ROOT, 'node_modules', '.bin', 'tsc');
        for (const [module, moduleResolution] of [['NodeNext', 'NodeNext'], ['ESNext', 'Bundler']]) {
          const compilerOptions = { noEmit: true, strict: true, skipLibCheck: true, target: 'ES2022', lib: ['ES2022', 'DOM'], types: [], module, moduleResolution };
          fs.writeFileSync(path.join(project, 'tsconfig.json'), JSON.stringify({ compilerOptions, files: ['inbox.ts'] }));
          const result = await run(tsc, ['-p', project], { cwd: project }).then(
            () => '',
            (err: { stdout?: string }) => err.stdout ?? String(err),
          );
          expect(result, moduleResolution).toBe('');
        }
      } finally {
        fs.rmSync(project, { recursive: true, force: true });
      }
    },
  );

  it('runs the README example against a real server: it creates a subscriber and lists it, and runs again', { timeout: 30_000 }, async () => {
    const runExample = () =>
      run(process.execPath, ['--import', 'tsx', path.join(workDir, 'readme-example.ts')], {
        cwd: ROOT,
        env: { ...process.env, HERALD_URL: server.url, HERALD_API_KEY: t.a.key },
      });
    expect((await runExample()).stdout.trim()).toBe('1 subscriber(s): ada');
    // A reader runs an example more than once: the second run finds ada there and says the same.
    expect((await runExample()).stdout.trim()).toBe('1 subscriber(s): ada');
    expect((await t.a.get('/v1/subscribers/ada').expect(200)).body.data).toMatchObject({ email: 'ada@example.com', firstName: 'Ada' });
  });
});
