import fs from 'node:fs';
import path from 'node:path';
import { createHash } from 'node:crypto';
import { Worker, type WorkerOptions } from 'node:worker_threads';
import { createRequire } from 'node:module';
import { fileURLToPath, pathToFileURL } from 'node:url';

const require = createRequire(import.meta.url);

/**
 * Starts a thread running a sibling module of the caller, named without its extension (for example
 * `new URL('./checkpointer-thread', import.meta.url)`). From the build it runs the compiled `.js`
 * file; from src/ (tsx, vitest) it runs the `.ts` file compiled to JavaScript (threadFromSource).
 */
export function startThread(module: URL, options: WorkerOptions = {}): Worker {
  const fromSource = import.meta.url.endsWith('.ts');
  if (!fromSource) return new Worker(new URL(`${module.href}.js`), options);
  return new Worker(threadFromSource(new URL(`${module.href}.ts`)), options);
}

const compiled = new Map<string, URL>();

/**
 * A thread does not inherit tsx, and registering it there costs each thread a module-loader thread
 * of its own and about half a second of CPU: a test suite that opens a database per file paid it
 * dozens of times. So the `.ts` file is compiled once, by esbuild (tsx's own compiler), into
 * node_modules/.cache, where its packages resolve as they do from src/; its own relative imports
 * are bundled in. The file is named by a hash of the source, so an edit gives a new one.
 */
function threadFromSource(file: URL): URL {
  let url = compiled.get(file.href);
  if (url) return url;
  const esbuild = require('esbuild') as typeof import('esbuild');
  const { outputFiles } = esbuild.buildSync({
    entryPoints: [fileURLToPath(file)],
    bundle: true,
    packages: 'external',
    format: 'esm',
    platform: 'node',
    target: 'node20',
    write: false,
  });
  const code = outputFiles[0]!.text;
  const hash = createHash('sha256').update(code).digest('hex').slice(0, 16);
  const nodeModules = path.join(path.dirname(require.resolve('esbuild/package.json')), '..');
  const dir = path.join(nodeModules, '.cache', 'herald-threads');
  const out = path.join(dir, `${path.basename(fileURLToPath(file), '.ts')}-${hash}.mjs`);
  if (!fs.existsSync(out)) {
    fs.mkdirSync(dir, { recursive: true });
    // Written whole, then renamed: another process may start the same thread meanwhile.
    const partial = `${out}.${process.pid}.tmp`;
    fs.writeFileSync(partial, code);
    fs.renameSync(partial, out);
  }
  url = pathToFileURL(out);
  compiled.set(file.href, url);
  return url;
}
