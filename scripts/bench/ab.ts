// An A/B of two versions of Herald on this machine, in one session: each side builds and runs its
// own harness (`npm run bench -- --json …`), in the order A,B,B,A,A,B,… so that a shared machine's
// slow drift falls on both sides alike. It prints, per database and row, each side's mean CPU per
// operation and throughput, B ÷ A, and a 90% interval of that ratio from the rounds' pairs: a claim
// such as "no more than 10% slower" holds when the interval's upper end is under 1.10, not when one
// pair says so.
//
//   npx tsx scripts/bench/ab.ts <A> <B> [--rounds N] [--json FILE] [--keep] -- <bench options>
//
// A side is a commit (anything `git rev-parse` takes) or `.`, this working tree as it is. A commit is
// checked out into a temporary worktree; its dependencies are this checkout's node_modules when its
// package-lock.json is the same, else installed there with `npm ci`. DATABASE_URL and the other
// variables pass through to both sides. Example:
//
//   DATABASE_URL=postgres://… npx tsx scripts/bench/ab.ts 1e8949b . --rounds 4 -- --both --only trigger,get
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { ratioInterval, ROOT } from './lib.js';

// Everything after `--` is the bench's.
const dash = process.argv.indexOf('--', 2);
const benchArgs = dash === -1 ? [] : process.argv.slice(dash + 1);
const { values, positionals: sides } = parseArgs({
  args: process.argv.slice(2, dash === -1 ? undefined : dash),
  allowPositionals: true,
  options: {
    rounds: { type: 'string', default: '4' },
    json: { type: 'string' },
    keep: { type: 'boolean', default: false },
  },
});
if (sides.length !== 2) {
  console.error('usage: npx tsx scripts/bench/ab.ts <A> <B> [--rounds N] [--json FILE] [--keep] -- <bench options>');
  process.exit(2);
}
const rounds = Number(values.rounds);
if (!Number.isInteger(rounds) || rounds < 1) throw new Error('--rounds takes a whole number of at least 1');

function run(command: string, args: string[], cwd: string): string {
  const result = spawnSync(command, args, { cwd, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], maxBuffer: 64 * 1024 * 1024 });
  if (result.status !== 0) throw new Error(`${command} ${args.join(' ')} failed in ${cwd}:\n${result.stderr || result.stdout}`);
  return result.stdout;
}

interface Side {
  name: string;
  /** What was measured: the commit and its subject, or the working tree. */
  code: string;
  dir: string;
}

const scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'herald-ab-'));
/** Worktrees made for the sides, removed at the end (unless --keep). */
const worktrees: string[] = [];

function prepare(spec: string, label: string): Side {
  if (spec === '.') return { name: label, code: 'this working tree', dir: ROOT };
  const commit = run('git', ['rev-parse', '--verify', `${spec}^{commit}`], ROOT).trim();
  const dir = path.join(scratch, label);
  run('git', ['worktree', 'add', '--detach', dir, commit], ROOT);
  worktrees.push(dir);
  const sameLock = fs.readFileSync(path.join(dir, 'package-lock.json'), 'utf8') === fs.readFileSync(path.join(ROOT, 'package-lock.json'), 'utf8');
  if (sameLock) fs.symlinkSync(path.join(ROOT, 'node_modules'), path.join(dir, 'node_modules'));
  else {
    console.log(`[ab] ${label}: its package-lock.json differs, npm ci …`);
    run('npm', ['ci', '--no-audit', '--no-fund'], dir);
  }
  return { name: label, code: run('git', ['log', '-1', '--format=%h %s', commit], ROOT).trim(), dir };
}

interface BenchRow {
  id: string;
  label: string;
  throughput: number;
  unit: string;
  cpuMsPerOp?: number;
}
interface BenchJson {
  suites: Array<{ database: string; rows: BenchRow[] }>;
}

/** One run's figures by `database row-id`. */
type Figures = Map<string, { label: string; cpu?: number; throughput: number; unit: string }>;

function benchOnce(side: Side, index: number): Figures {
  const file = path.join(scratch, `${side.name}-${index}.json`);
  const log = path.join(scratch, `${side.name}-${index}.log`);
  const started = Date.now();
  const result = spawnSync('npm', ['run', 'bench', '--', ...benchArgs, '--json', file], { cwd: side.dir, encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 });
  fs.writeFileSync(log, `${result.stdout}\n${result.stderr}`);
  if (result.status !== 0 || !fs.existsSync(file)) throw new Error(`the bench of ${side.name} failed (its output: ${log})`);
  const json = JSON.parse(fs.readFileSync(file, 'utf8')) as BenchJson;
  const figures: Figures = new Map();
  for (const suite of json.suites) {
    for (const row of suite.rows) figures.set(`${suite.database} ${row.id}`, { label: row.label, cpu: row.cpuMsPerOp, throughput: row.throughput, unit: row.unit });
  }
  console.log(`[ab] ${side.name} run ${index} in ${Math.round((Date.now() - started) / 1000)} s`);
  return figures;
}

const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;

const fmt = (n: number, digits = 3) => n.toFixed(digits);
const pct = (ratio: number) => `${ratio >= 1 ? '+' : '−'}${Math.abs((ratio - 1) * 100).toFixed(0)}%`;

const runs: Record<'A' | 'B', Figures[]> = { A: [], B: [] };
let failed = true;
try {
  const a = prepare(sides[0], 'A');
  const b = prepare(sides[1], 'B');
  console.log(`[ab] A: ${a.code}\n[ab] B: ${b.code}\n[ab] ${rounds} round(s) of npm run bench -- ${benchArgs.join(' ')}; load average ${os.loadavg().map((l) => l.toFixed(2)).join(' ')}`);
  for (let round = 0; round < rounds; round++) {
    const order = round % 2 === 0 ? [a, b] : [b, a];
    for (const side of order) runs[side.name as 'A' | 'B'].push(benchOnce(side, round + 1));
  }

  // Rows every run of both sides measured the CPU of; the others are named, not compared.
  const every = [...runs.A, ...runs.B];
  const allKeys = new Set(every.flatMap((figures) => [...figures.keys()]));
  const keys = [...allKeys].filter((key) => every.every((figures) => typeof figures.get(key)?.cpu === 'number'));
  const leftOut = [...allKeys].filter((key) => !keys.includes(key));
  const lines = [
    `A: ${a.code}`,
    `B: ${b.code}`,
    `${rounds} round(s), A,B,B,A…: npm run bench -- ${benchArgs.join(' ')}`,
    '',
    '| DB | Row | A: CPU/op (runs) | B: CPU/op | B ÷ A | 90% interval | throughput A → B |',
    '|---|---|---|---|---|---|---|',
  ];
  const results = [];
  for (const key of keys) {
    const [database] = key.split(' ');
    const { label, unit } = runs.A[0].get(key)!;
    const cpuA = runs.A.map((f) => f.get(key)!.cpu!);
    const cpuB = runs.B.map((f) => f.get(key)!.cpu!);
    const tputA = mean(runs.A.map((f) => f.get(key)!.throughput));
    const tputB = mean(runs.B.map((f) => f.get(key)!.throughput));
    const ratio = mean(cpuB) / mean(cpuA);
    const interval = ratioInterval(cpuA.map((x, i) => [x, cpuB[i]]));
    results.push({ database, row: label, cpuA, cpuB, ratio, interval, throughputA: tputA, throughputB: tputB, unit });
    lines.push(
      `| ${database} | ${label} | ${fmt(mean(cpuA))} ms (${cpuA.map((x) => fmt(x)).join(', ')}) | ${fmt(mean(cpuB))} ms (${cpuB.map((x) => fmt(x)).join(', ')}) | ${fmt(ratio, 2)} (${pct(ratio)}) | ${interval ? `${fmt(interval[0], 2)}–${fmt(interval[1], 2)}` : 'n/a (one round)'} | ${Math.round(tputA).toLocaleString('en-US')} → ${Math.round(tputB).toLocaleString('en-US')} ${unit} |`,
    );
  }
  if (leftOut.length > 0) lines.push('', `Not compared (no CPU figure in every run): ${leftOut.join(', ')}`);
  console.log(`\n${lines.join('\n')}`);
  if (values.json) fs.writeFileSync(values.json, JSON.stringify({ a: a.code, b: b.code, rounds, benchArgs, results, leftOut }, null, 2));
  failed = false;
} finally {
  if (!values.keep) {
    for (const dir of worktrees) {
      try {
        run('git', ['worktree', 'remove', '--force', dir], ROOT);
      } catch (err) {
        console.error(`[ab] could not remove the worktree ${dir} (git worktree prune will): ${err instanceof Error ? err.message : String(err)}`);
      }
    }
  }
  // The runs' output stays for a look when something failed.
  if (values.keep || failed) console.log(`[ab] the runs' JSON and output are in ${scratch}`);
  else fs.rmSync(scratch, { recursive: true, force: true });
}
