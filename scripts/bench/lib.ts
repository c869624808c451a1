// Helpers for `npm run bench`: child processes, /proc readings, and the load generator (wrk, or
// autocannon when wrk cannot be had).
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { build } from 'esbuild';
import { buildServer } from '../build.js';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** A port nobody listens on right now, on 127.0.0.1. */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

export interface NodeChild {
  name: string;
  child: ChildProcess;
  pid: number;
  /** The last 64 KB of stdout and stderr together. */
  output(): string;
  exited: Promise<number | null>;
  /** SIGTERM, then SIGKILL after `graceMs`; resolves with the exit code. */
  stop(graceMs?: number): Promise<number | null>;
}

/**
 * Compiles the server as `npm start` does (`npm run build`, into dist/src) and the bench's own
 * helper servers beside it (dist/bench), so every process runs plain JavaScript: no TypeScript
 * loader, which would add its own thread and memory to each figure.
 */
export async function buildForBench(): Promise<void> {
  await buildServer();
  const outdir = path.join(ROOT, 'dist', 'bench');
  const helpers = ['scripts/bench/baseline.ts', 'scripts/bench/webhook.ts', 'scripts/bench/hanging-webhooks.ts', 'scripts/bench/stack-floor.ts', 'scripts/bench/health-prober.ts'].map((file) => path.join(ROOT, file));
  // Bundled (packages stay imports): the stack floor uses Herald's own router module from src/.
  await build({ entryPoints: helpers, outdir, bundle: true, packages: 'external', platform: 'node', format: 'esm', logLevel: 'warning' });
}

/** Starts `node [nodeArgs] <script> [args]` in the repository; TypeScript (`.ts`) through tsx. */
export function startNode(
  name: string,
  script: string,
  args: string[],
  env: Record<string, string>,
  nodeArgs: string[] = [],
  logFile?: string,
): NodeChild {
  const loader = script.endsWith('.ts') ? ['--import', 'tsx'] : [];
  const child = spawn(process.execPath, [...nodeArgs, ...loader, script, ...args], {
    cwd: ROOT,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const log = logFile ? fs.createWriteStream(logFile, { flags: 'a' }) : undefined;
  let output = '';
  const onData = (chunk: Buffer) => {
    log?.write(chunk);
    output += chunk.toString('utf8');
    if (output.length > 65_536) output = output.slice(-65_536);
  };
  child.stdout!.on('data', onData);
  child.stderr!.on('data', onData);
  const exited = new Promise<number | null>((resolve) =>
    child.on('close', (code) => {
      log?.end();
      resolve(code);
    }),
  );
  return {
    name,
    child,
    pid: child.pid!,
    output: () => output,
    exited,
    async stop(graceMs = 40_000) {
      if (child.exitCode !== null || child.signalCode !== null) return child.exitCode;
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
      const code = await exited;
      clearTimeout(timer);
      return code;
    },
  };
}

/** Resolves once `pattern` appears in the child's output (or rejects when it exits or times out). */
export async function waitForOutput(proc: NodeChild, pattern: RegExp, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let exited = false;
  void proc.exited.then(() => (exited = true));
  while (!pattern.test(proc.output())) {
    if (exited) throw new Error(`${proc.name} exited before it was ready:\n${proc.output()}`);
    if (Date.now() > deadline) throw new Error(`${proc.name} was not ready after ${timeoutMs} ms:\n${proc.output()}`);
    await sleep(10);
  }
}

/** Resolves once GET `url` answers 2xx. */
export async function waitForHttp(proc: NodeChild, url: string, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (proc.child.exitCode !== null) throw new Error(`${proc.name} exited before it was ready:\n${proc.output()}`);
    try {
      const res = await fetch(url);
      if (res.ok) return;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) throw new Error(`${proc.name} did not answer ${url} within ${timeoutMs} ms:\n${proc.output()}`);
    await sleep(50);
  }
}

function procStatusKb(pid: number, field: string): number | undefined {
  try {
    const match = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
    return match ? Number(match[1]) : undefined;
  } catch {
    return undefined;
  }
}

/** Peak resident set size (VmHWM) of a process, in MB. */
export function peakRssMb(pid: number): number | undefined {
  const kb = procStatusKb(pid, 'VmHWM');
  return kb === undefined ? undefined : kb / 1024;
}

/** Resets a process's VmHWM to its current RSS (Linux ≥ 4.0: `5` > clear_refs); false if not allowed. */
export function resetPeakRss(pid: number): boolean {
  try {
    fs.writeFileSync(`/proc/${pid}/clear_refs`, '5');
    return true;
  } catch {
    return false;
  }
}

/** CPU time a process has used (user + system), in milliseconds. */
export function cpuMs(pid: number): number {
  return cpuTicks(pid) * 10; // USER_HZ = 100
}

function cpuTicks(pid: number): number {
  const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return Number(fields[11]) + Number(fields[12]); // utime + stime (fields 14 and 15 of the whole line)
}

/** Below this share of one core a process counts as settled. */
let idleThreshold = 0.05;

/**
 * A process under `--cpu-prof` takes 10–15% of a core idle (the sampler): below 5% it never
 * settles, and every wait would run to its timeout.
 */
export function allowProfilerOverhead(): void {
  idleThreshold = 0.25;
}

/**
 * Waits until a process has settled (under `threshold` of one core over `windowMs`): a server that
 * has just started compiles its validators in the background, which no measurement should see.
 */
export async function waitIdle(pid: number, { threshold = idleThreshold, windowMs = 500, timeoutMs = 30_000 } = {}): Promise<void> {
  const hz = 100; // USER_HZ on Linux
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const before = cpuTicks(pid);
    const started = Date.now();
    await sleep(windowMs);
    const used = (cpuTicks(pid) - before) / hz / ((Date.now() - started) / 1000);
    if (used < threshold) return;
  }
}

// ---------------------------------------------------------------------------------------------
// The load generator

export interface LoadSpec {
  url: string;
  method: 'GET' | 'POST';
  headers: Record<string, string>;
  body?: string;
}

export interface LoadResult {
  rps: number;
  p50Ms: number;
  p99Ms: number;
  requests: number;
  /** Responses that were not 2xx/3xx. */
  non2xx: number;
  /** Connect, read, write errors and timeouts. */
  socketErrors: number;
}

export type LoadTool = 'wrk' | 'autocannon';

function hasWrk(): boolean {
  return spawnSync('wrk', ['--version'], { stdio: 'ignore' }).error === undefined;
}

/**
 * wrk when it is there; else, when running as root, `apt-get install wrk`; else autocannon through
 * npx. `BENCH_LOADGEN=autocannon` forces the fallback.
 */
export function chooseLoadTool(log: (line: string) => void): LoadTool {
  if (process.env.BENCH_LOADGEN === 'autocannon') return 'autocannon';
  if (hasWrk()) return 'wrk';
  if (process.getuid?.() === 0 && spawnSync('apt-get', ['--version'], { stdio: 'ignore' }).error === undefined) {
    log('wrk is missing: apt-get install -y --no-install-recommends wrk');
    const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
    let result = spawnSync('apt-get', ['install', '-y', '-qq', '--no-install-recommends', 'wrk'], { stdio: 'inherit', env });
    if (result.status !== 0) {
      spawnSync('apt-get', ['update', '-qq'], { stdio: 'inherit', env });
      result = spawnSync('apt-get', ['install', '-y', '-qq', '--no-install-recommends', 'wrk'], { stdio: 'inherit', env });
    }
    if (result.status === 0 && hasWrk()) return 'wrk';
  }
  log('wrk is not available: falling back to autocannon (it shares the 2 cores with the server, so figures are lower)');
  return 'autocannon';
}

export function loadToolVersion(tool: LoadTool): string {
  if (tool === 'wrk') {
    const out = spawnSync('wrk', ['--version'], { encoding: 'utf8' });
    return /wrk \S+/.exec(`${out.stdout}${out.stderr}`)?.[0] ?? 'wrk';
  }
  const out = spawnSync('npx', ['--no-install', 'autocannon', '--version'], { cwd: ROOT, encoding: 'utf8' });
  return /autocannon v?\S+/.exec(out.stdout)?.[0] ?? 'autocannon';
}

function run(command: string, args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk) => (stdout += chunk));
    child.stderr.on('data', (chunk) => (stderr += chunk));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

/** "12.34ms", "850.00us", "1.02s" → milliseconds. */
function wrkDuration(text: string): number {
  const match = /^([\d.]+)(us|ms|s|m)$/.exec(text.trim());
  if (!match) return Number.NaN;
  const value = Number(match[1]);
  return match[2] === 'us' ? value / 1000 : match[2] === 'ms' ? value : match[2] === 's' ? value * 1000 : value * 60_000;
}

export function parseWrk(out: string): LoadResult {
  const percentile = (p: string) => {
    const match = new RegExp(`^\\s+${p}%\\s+(\\S+)`, 'm').exec(out);
    return match ? wrkDuration(match[1]) : Number.NaN;
  };
  const socket = /Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)/.exec(out);
  return {
    rps: Number(/Requests\/sec:\s+([\d.]+)/.exec(out)?.[1] ?? Number.NaN),
    p50Ms: percentile('50'),
    p99Ms: percentile('99'),
    requests: Number(/(\d+) requests in/.exec(out)?.[1] ?? 0),
    non2xx: Number(/Non-2xx or 3xx responses: (\d+)/.exec(out)?.[1] ?? 0),
    socketErrors: socket ? socket.slice(1).reduce((sum, n) => sum + Number(n), 0) : 0,
  };
}

const luaString = (text: string) => {
  let level = '';
  while (text.includes(`]${level}]`)) level += '=';
  return `[${level}[${text}]${level}]`;
};

/** Runs the load for `seconds` with `connections` open connections and reads the figures. */
export async function runLoad(tool: LoadTool, spec: LoadSpec, seconds: number, connections: number, threads: number): Promise<LoadResult> {
  if (tool === 'wrk') {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'herald-wrk-'));
    const script = path.join(dir, 'request.lua');
    const lines = [`wrk.method = "${spec.method}"`];
    if (spec.body !== undefined) lines.push(`wrk.body = ${luaString(spec.body)}`);
    for (const [name, value] of Object.entries(spec.headers)) lines.push(`wrk.headers[ ${luaString(name)} ] = ${luaString(value)}`);
    fs.writeFileSync(script, `${lines.join('\n')}\n`);
    try {
      const out = await run('wrk', ['-t', String(threads), '-c', String(connections), '-d', `${seconds}s`, '--timeout', '30s', '--latency', '-s', script, spec.url]);
      if (out.code !== 0) throw new Error(`wrk failed (${out.code}): ${out.stderr}${out.stdout}`);
      return parseWrk(out.stdout);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  }
  return runAutocannon(spec, seconds, connections, []);
}

/**
 * Runs the load at a fixed rate (`rate` requests per second in all, whatever the answers' pace:
 * autocannon's overall rate) for `seconds`: the load a steady stream of triggers makes.
 */
export async function runPacedLoad(spec: LoadSpec, seconds: number, rate: number, connections: number): Promise<LoadResult> {
  return runAutocannon(spec, seconds, connections, ['-R', String(rate)]);
}

/** One autocannon run of `spec` (with `extra` flags, e.g. a fixed rate), read from its JSON summary. */
async function runAutocannon(spec: LoadSpec, seconds: number, connections: number, extra: string[]): Promise<LoadResult> {
  const args = ['--no-install', 'autocannon', '-j', '-c', String(connections), '-d', String(seconds), ...extra, '-m', spec.method];
  for (const [name, value] of Object.entries(spec.headers)) args.push('-H', `${name}=${value}`);
  if (spec.body !== undefined) args.push('-b', spec.body);
  args.push(spec.url);
  const out = await run('npx', args);
  const start = out.stdout.indexOf('{');
  if (out.code !== 0 || start < 0) throw new Error(`autocannon failed (${out.code}): ${out.stderr}${out.stdout}`);
  const json = JSON.parse(out.stdout.slice(start)) as {
    requests: { average: number; total: number };
    latency: { p50: number; p99: number };
    non2xx: number;
    errors: number;
    timeouts: number;
  };
  return {
    rps: json.requests.average,
    p50Ms: json.latency.p50,
    p99Ms: json.latency.p99,
    requests: json.requests.total,
    non2xx: json.non2xx,
    socketErrors: json.errors + json.timeouts,
  };
}

/** Student's t for a two-sided 90% interval, by degrees of freedom (1–10; past 10, 1.8). */
const T90 = [6.314, 2.92, 2.353, 2.132, 2.015, 1.943, 1.895, 1.86, 1.833, 1.812];

/**
 * A 90% interval of B ÷ A from paired runs: each pair's B over its A (the two runs next to each
 * other, so a drift of the machine shared by both cancels), as a t-interval of their logs.
 * Undefined with fewer than two pairs.
 */
export function ratioInterval(pairs: Array<[a: number, b: number]>): [number, number] | undefined {
  if (pairs.length < 2) return undefined;
  const logs = pairs.map(([a, b]) => Math.log(b / a));
  const m = logs.reduce((sum, x) => sum + x, 0) / logs.length;
  const sd = Math.sqrt(logs.reduce((sum, x) => sum + (x - m) ** 2, 0) / (logs.length - 1));
  const half = (T90[logs.length - 2] ?? 1.8) * (sd / Math.sqrt(logs.length));
  return [Math.exp(m - half), Math.exp(m + half)];
}

/**
 * B ÷ A of paired runs' means, and the same with its 90% interval (ratioInterval) as text:
 * `1.03 (90% interval 0.92–1.15, 5 pairs)`.
 */
export function pairedRatio(pairs: Array<[a: number, b: number]>): { ratio: number; text: string } {
  const sum = (side: 0 | 1) => pairs.reduce((total, pair) => total + pair[side], 0);
  const ratio = sum(1) / sum(0);
  const interval = ratioInterval(pairs);
  return { ratio, text: `${ratio.toFixed(2)}${interval ? ` (90% interval ${interval[0].toFixed(2)}–${interval[1].toFixed(2)}, ${pairs.length} pairs)` : ''}` };
}
