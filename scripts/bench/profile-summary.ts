// Summarises a V8 CPU profile (`node --cpu-prof`, as `npm run bench -- --profile` writes them):
// where the time went by package, and the functions with the most self and total time.
//
//   npx tsx scripts/bench/profile-summary.ts <file.cpuprofile> [--top N] [--focus TEXT] [--from S --to S] [--timeline]
//
// --focus TEXT: only samples whose stack has a function or file matching TEXT (e.g. "trigger").
// --from/--to: only samples between these seconds after the profile started (the process's start;
// --timeline prints how busy each second was, to find a row's window).
import fs from 'node:fs';
import { parseArgs } from 'node:util';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number; columnNumber: number };
  children?: number[];
}
interface Profile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
  startTime: number;
  endTime: number;
}

const { values, positionals } = parseArgs({ allowPositionals: true, options: { top: { type: 'string', default: '25' }, focus: { type: 'string' }, from: { type: 'string' }, to: { type: 'string' }, timeline: { type: 'boolean', default: false } } });
const from = Number(values.from ?? 0) * 1000;
const to = values.to === undefined ? Infinity : Number(values.to) * 1000;
if (positionals.length !== 1) {
  process.stderr.write('usage: npx tsx scripts/bench/profile-summary.ts <file.cpuprofile> [--top N] [--focus TEXT]\n');
  process.exit(2);
}
const top = Number(values.top);
const profile = JSON.parse(fs.readFileSync(positionals[0], 'utf8')) as Profile;

const byId = new Map(profile.nodes.map((node) => [node.id, node]));
const parent = new Map<number, number>();
for (const node of profile.nodes) for (const child of node.children ?? []) parent.set(child, node.id);

const shortUrl = (url: string) => url.replace(/^file:\/\//, '').replace(/^.*\/node_modules\//, '~/').replace(/^.*\/work\/[^/]+\/[^/]+\//, '');
const keyOf = (node: ProfileNode) => {
  const { functionName, url, lineNumber } = node.callFrame;
  return `${functionName || '(anonymous)'} ${url ? `${shortUrl(url)}:${lineNumber + 1}` : ''}`.trim();
};
const packageOf = (node: ProfileNode) => {
  const url = node.callFrame.url;
  if (!url) return node.callFrame.functionName.startsWith('(') ? node.callFrame.functionName : '(native)';
  const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (pkg) return pkg[1];
  if (url.startsWith('node:')) return 'node: (core)';
  const own = /\/(src|scripts)\/(.+)$/.exec(url);
  return own ? `herald ${own[1]}/${own[2].split('/').slice(0, -1).join('/') || '.'}` : url;
};

const self = new Map<string, number>();
const total = new Map<string, number>();
const packages = new Map<string, number>();
let sampled = 0;
let idle = 0;
const focus = values.focus?.toLowerCase();
const busyPerSecond: number[] = [];
let clock = 0;
for (let i = 0; i < profile.samples.length; i++) {
  const dt = (profile.timeDeltas[i] ?? 0) / 1000; // ms
  clock += dt;
  if (profile.samples[i] !== undefined && byId.get(profile.samples[i])!.callFrame.functionName !== '(idle)') {
    const second = Math.floor(clock / 1000);
    busyPerSecond[second] = (busyPerSecond[second] ?? 0) + dt;
  }
  if (clock < from || clock > to) continue;
  const leaf = byId.get(profile.samples[i])!;
  const stack: ProfileNode[] = [];
  for (let id: number | undefined = leaf.id; id !== undefined; id = parent.get(id)) stack.push(byId.get(id)!);
  if (leaf.callFrame.functionName === '(idle)') {
    idle += dt;
    continue;
  }
  if (focus && !stack.some((node) => keyOf(node).toLowerCase().includes(focus))) continue;
  sampled += dt;
  self.set(keyOf(leaf), (self.get(keyOf(leaf)) ?? 0) + dt);
  packages.set(packageOf(leaf), (packages.get(packageOf(leaf)) ?? 0) + dt);
  for (const key of new Set(stack.map(keyOf))) total.set(key, (total.get(key) ?? 0) + dt);
}

const wall = (profile.endTime - profile.startTime) / 1000;
const pct = (ms: number) => `${((ms / sampled) * 100).toFixed(1).padStart(5)}%`;
const list = (title: string, map: Map<string, number>) => {
  process.stdout.write(`\n${title}\n`);
  for (const [key, ms] of [...map].sort((a, b) => b[1] - a[1]).slice(0, top)) {
    process.stdout.write(`  ${pct(ms)} ${ms.toFixed(0).padStart(7)} ms  ${key}\n`);
  }
};
process.stdout.write(
  `${positionals[0]}\nwall ${wall.toFixed(0)} ms, busy ${sampled.toFixed(0)} ms${focus ? ` (stacks matching "${values.focus}")` : ''}, idle ${idle.toFixed(0)} ms\n`,
);
if (values.timeline) {
  process.stdout.write('\nBusy per second (% of one core):\n');
  for (let second = 0; second < busyPerSecond.length; second++) {
    const pctBusy = Math.round(((busyPerSecond[second] ?? 0) / 1000) * 100);
    process.stdout.write(`  ${String(second).padStart(4)} s ${String(pctBusy).padStart(3)}% ${'#'.repeat(Math.round(pctBusy / 4))}\n`);
  }
}
list('Self time by package (leaf frames)', packages);
list('Self time by function', self);
list('Total time by function (inclusive)', total);
