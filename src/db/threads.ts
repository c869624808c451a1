import fs from 'node:fs';
import path from 'node:path';
import { createHash, randomUUID } from 'node:crypto';
import { Worker, type WorkerOptions } from 'node:worker_threads';
import { createRequire } from 'node:module';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { ROOT } from '../paths.js';

const require = createRequire(import.meta.url);

/**
 * Starts a thread running a sibling module of the caller, named without its extension (for example
 * `new URL('./checkpointer-thread', import.meta.url)`). From the build it runs the compiled `.js`
 * file; from src/ (tsx, vitest) it runs the `.ts` file compiled to JavaScript (compiledFromSource),
 * or through tsx when that cannot be written.
 */
export function startThread(module: URL, options: WorkerOptions = {}): Worker {
  const fromSource = import.meta.url.endsWith('.ts');
  if (!fromSource) return new Worker(new URL(`${module.href}.js`), options);
  const file = new URL(`${module.href}.ts`);
  let compiled: URL | undefined;
  try {
    compiled = compiledFromSource(file);
  } catch {
    // A read-only node_modules, say: the slower way still works.
  }
  return new Worker(compiled ?? throughTsx(file), options);
}

const compiled = new Map<string, URL>();

/**
 * A thread does not inherit tsx, and registering it there starts a module-loader thread beside
 * each thread, which costs more CPU than the thread's own start: a test suite that opens a
 * database per file paid it dozens of times. So the `.ts` file is compiled once, by esbuild (tsx's own compiler), into
 * node_modules/.cache, where its packages resolve as they do from src/. Its own relative imports
 * are bundled in, where `import.meta.url` names the compiled file, not theirs. The file is named
 * by a hash of the compiled code, so an edit gives a new one.
 */
function compiledFromSource(file: URL): URL {
  const source = fileURLToPath(file);
  const key = `${file.href} ${fs.statSync(source).mtimeMs}`;
  let url = compiled.get(key);
  if (url) return url;
  const esbuild = require('esbuild') as typeof import('esbuild');
  const { outputFiles } = esbuild.buildSync({
    entryPoints: [source],
    bundle: true,
    packages: 'external',
    format: 'esm',
    platform: 'node',
    target: 'node20',
    write: false,
  });
  const code = outputFiles[0]!.text;
  const hash = createHash('sha256').update(code).digest('hex').slice(0, 16);
  const dir = path.join(ROOT, 'node_modules', '.cache', 'herald-threads');
  const out = path.join(dir, `${path.basename(source, '.ts')}-${hash}.mjs`);
  if (!fs.existsSync(out)) {
    fs.mkdirSync(dir, { recursive: true });
    // Written whole under a name of its own, then renamed: other threads and processes may be
    // writing the same file meanwhile, and one that renamed first has written the same code.
    const partial = `${out}.${randomUUID()}.tmp`;
    fs.writeFileSync(partial, code);
    try {
      fs.renameSync(partial, out);
    } catch (error) {
      fs.rmSync(partial, { force: true });
      if (!fs.existsSync(out)) throw error;
    }
  }
  url = pathToFileURL(out);
  compiled.set(key, url);
  return url;
}

/** The `.ts` file run through tsx, registered in the thread first. */
function throughTsx(file: URL): URL {
  const tsx = pathToFileURL(require.resolve('tsx/esm/api').replace(/\.cjs$/, '.mjs')).href;
  const boot = `import { register } from ${JSON.stringify(tsx)}; register(); await import(${JSON.stringify(file.href)});`;
  return new URL(`data:text/javascript,${encodeURIComponent(boot)}`);
}
