import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { buildServer as build } from '../../scripts/build.js';
import { LOCAL_PEERS_ENV } from './peers.js';

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

/** Runs a TypeScript entry point of the project (as `npm start` and `npm run keys` do) to its end. */
export function runScript(
  script: string,
  args: string[],
  env: Record<string, string>,
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', script, ...args], {
      cwd: ROOT,
      env: { ...process.env, ...LOCAL_PEERS_ENV, ...env },
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk) => (stdout += chunk));
    child.stderr.on('data', (chunk) => (stderr += chunk));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

/**
 * Compiles the server as `npm start` does, into a folder of its own under dist/ (test files run
 * side by side): the path of its main.js, relative to the repository.
 */
export async function buildServer(): Promise<string> {
  const outdir = path.join('dist', `test-${process.pid}-${Date.now()}`, 'src');
  await build(path.join(ROOT, outdir));
  return path.join(outdir, 'main.js');
}

/**
 * Starts a long-running entry point and resolves once its output shows every `ready` pattern.
 * TypeScript (`.ts`) runs through tsx; JavaScript (the build) runs on node alone, as `npm start` does.
 */
export function startScript(
  script: string,
  { env, ready, args = [], timeoutMs = 20_000 }: { env: Record<string, string>; ready: RegExp[]; args?: string[]; timeoutMs?: number },
): Promise<{ child: ChildProcess; output: () => string; exited: Promise<number | null> }> {
  return new Promise((resolve, reject) => {
    const loader = script.endsWith('.ts') ? ['--import', 'tsx'] : [];
    const child = spawn(process.execPath, [...loader, script, ...args], { cwd: ROOT, env: { ...process.env, ...LOCAL_PEERS_ENV, ...env } });
    let output = '';
    const exited = new Promise<number | null>((done) => child.on('close', done));
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`${script} was not ready after ${timeoutMs} ms:\n${output}`));
    }, timeoutMs);
    const onData = (chunk: Buffer) => {
      output += chunk;
      if (ready.every((pattern) => pattern.test(output))) {
        clearTimeout(timer);
        resolve({ child, output: () => output, exited });
      }
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    exited.then((code) => reject(new Error(`${script} exited with ${code} before it was ready:\n${output}`)));
  });
}
