import { Worker, type WorkerOptions } from 'node:worker_threads';
import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';

/**
 * Starts a thread running a sibling module of the caller, named without its extension (for example
 * `new URL('./checkpointer-thread', import.meta.url)`). From the build it runs the compiled `.js`
 * file; from src/ (tsx, vitest) it runs the `.ts` file through tsx, which a thread does not inherit.
 */
export function startThread(module: URL, options: WorkerOptions = {}): Worker {
  const fromSource = import.meta.url.endsWith('.ts');
  const file = new URL(`${module.href}${fromSource ? '.ts' : '.js'}`);
  if (!fromSource) return new Worker(file, options);
  const tsx = pathToFileURL(createRequire(import.meta.url).resolve('tsx/esm/api').replace(/\.cjs$/, '.mjs')).href;
  const boot = `import { register } from ${JSON.stringify(tsx)}; register(); await import(${JSON.stringify(file.href)});`;
  return new Worker(new URL(`data:text/javascript,${encodeURIComponent(boot)}`), options);
}
