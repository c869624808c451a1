// npm run bench [-- options]: Herald's performance figures on this machine, as one table.
//
// A fresh database (SQLite in a temporary folder; with DATABASE_URL=postgres://… a fresh schema on
// that server, dropped afterwards), the API in its own process (`main.js --role api`), the
// load from wrk in another (autocannon when wrk cannot be had), and in the same run a bare express
// app as the baseline for every HTTP row, and the "stack floor" (express + openapi-backend as Herald
// uses them, doing no work of its own: scripts/bench/stack-floor.ts). Workers run as
// `--role worker` processes. Every process runs the build (`npm run build`), as `npm start` does.
//
//   --quick            shorter runs (1 s warm-up, 3 s per row; 2,000 fan-out subscribers, 500 chat jobs)
//   --large            a large environment instead of the table (scripts/bench/large.ts): 1,000,000
//                      notifications and 100,000 subscribers seeded, each list's latency and the event
//                      loop's worst delay meanwhile, a 100,000 fan-out with the API's p99 during it
//                      (with --quick: 100,000 and 10,000)
//   --soak [MIN]       with --large: then MIN minutes (default 15) of steady load, the API's RSS every 30 s
//   --soak-rate N      requests a second during the soak (default 300)
//   --notifications N  with --large: notifications to seed
//   --both             SQLite, then PostgreSQL (DATABASE_URL), side by side in one table
//   --only a,b         only these rows: trigger, get, list, bulk, fanout, chat, slow, cpu, webhooks, streams, stream-latency
//   --streams N        open inbox streams for the streams row (default 5,000; --quick 1,000)
//   --duration S       seconds per HTTP row (default 10)      --warmup S   seconds of warm-up (default 2)
//   --connections N    open connections (default 50)          --threads N  wrk threads (default 1)
//   --subscribers N    fan-out topic size (default 10,000)    --deliveries N  chat jobs (default 2,000)
//   --pairs N          the cpu and webhooks rows' A/Bs: N pairs of runs, in alternating order (default 2)
//   --profile [DIR]    run every process (API, workers, baseline, stack floor) with --cpu-prof, profiles into DIR (bench/profiles)
//   --node-args="…"    extra Node flags for the API and worker processes, e.g. --node-args="--max-semi-space-size=4"
//   --logs DIR         write every child process's output to DIR/<database>-<process>.log
//   --json FILE        also write the figures as JSON
//   --keep             keep the database (prints where it is)
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { randomBytes } from 'node:crypto';
import { createDb, isPostgresUrl, migrate, type Db } from '../src/db/knex.js';
import { createApiKey, createOrganization } from '../src/db/repos/accounts.js';
import { addMembers, findTopicRow, insertTopic } from '../src/db/repos/topics.js';
import { newId } from '../src/ids.js';
import { DEFAULT_INBOX_MAX_STREAMS } from '../src/config.js';
import { SUBSCRIPTIONS_TTL_MS } from '../src/db/webhook-subscriptions.js';
import {
  ROOT,
  buildForBench,
  chooseLoadTool,
  cpuMs,
  freePort,
  loadToolVersion,
  peakRssMb,
  resetPeakRss,
  runLoad,
  runPacedLoad,
  sleep,
  startNode,
  waitForHttp,
  waitForOutput,
  waitIdle,
  allowProfilerOverhead,
  pairedRatio,
  type LoadResult,
  type LoadSpec,
  type LoadTool,
  type NodeChild,
} from './bench/lib.js';
import { runLarge } from './bench/large.js';
import { mintTokens, openStreams, pacedTriggers, percentile, rssMb } from './bench/inbox.js';

const ROW_IDS = ['trigger', 'get', 'list', 'bulk', 'fanout', 'chat', 'slow', 'cpu', 'webhooks', 'streams', 'stream-latency'] as const;
/** Members of the topic a fan-out worker warms up on before its timed fan-out. */
const WARM_UP_FANOUT = 2_000;
type RowId = (typeof ROW_IDS)[number];

interface Options {
  quick: boolean;
  /** --large: subscribers and notifications to seed (large.ts's defaults when not given), the soak. */
  largeSubscribers?: number;
  notifications?: number;
  soakMinutes?: number;
  soakRate: number;
  large: boolean;
  rows: Set<RowId>;
  duration: number;
  warmup: number;
  connections: number;
  threads: number;
  subscribers: number;
  deliveries: number;
  /** The cpu and webhooks rows: pairs of runs of their two sides, in alternating order (A,B, B,A…). */
  pairs: number;
  streams: number;
  profileDir?: string;
  nodeArgs: string[];
  logsDir?: string;
  json?: string;
  keep: boolean;
  both: boolean;
}

interface Row {
  id: RowId;
  label: string;
  throughput: number;
  unit: string;
  /** Per-event figure for the bulk row. */
  extra?: string;
  p50Ms?: number;
  p99Ms?: number;
  /** CPU time the server (or worker) used per request (or delivery): steadier than throughput on a busy machine. */
  cpuMsPerOp?: number;
  rssMb?: number;
  /** Which process the RSS is of. */
  rssOf: 'api' | 'worker';
  baseline?: LoadResult & { cpuMsPerOp: number };
  ratio?: number;
  /** Slow destinations: the figures with the slow webhooks over those without. */
  slow?: { p50Ratio: number; p99Ratio: number; chatRatio: number };
  /** CPU per delivery: at 500 triggers/s over at 2,000/s. */
  cpuRatio?: number;
  /** The same ratio for the bare express baseline's CPU per request, paced the same way. */
  expressCpuRatio?: number;
  /** cpu: the same ratio of a worker's CPU per delivery with the runner in a process of its own. */
  workerCpuRatio?: number;
  /** Webhooks: the trigger row with one endpoint taking every event over the same row with none. */
  webhookRatio?: number;
  /** webhookRatio with the worker and endpoint on one core, the API and the load on another. */
  webhookRatioPinned?: number;
  notes: string[];
}

interface Suite {
  database: 'sqlite' | 'postgres';
  databaseVersion: string;
  /** Peak RSS of the API process from its start to the first row (validators compiled). */
  apiStartRssMb?: number;
  /** Peak RSS of the bare express baseline (node + express): the floor. */
  baselineRssMb?: number;
  rows: Row[];
}

const log = (line: string) => process.stderr.write(`[bench] ${line}\n`);

function parseOptions(): Options {
  const { values } = parseArgs({
    options: {
      quick: { type: 'boolean', default: false },
      large: { type: 'boolean', default: false },
      soak: { type: 'string' },
      'soak-rate': { type: 'string' },
      notifications: { type: 'string' },
      both: { type: 'boolean', default: false },
      only: { type: 'string' },
      duration: { type: 'string' },
      warmup: { type: 'string' },
      connections: { type: 'string' },
      threads: { type: 'string' },
      subscribers: { type: 'string' },
      deliveries: { type: 'string' },
      pairs: { type: 'string' },
      streams: { type: 'string' },
      profile: { type: 'string' },
      'node-args': { type: 'string' },
      logs: { type: 'string' },
      json: { type: 'string' },
      keep: { type: 'boolean', default: false },
      help: { type: 'boolean', default: false },
    },
    // `--profile` alone means the default folder.
    // `--soak` alone means 15 minutes.
    args: process.argv
      .slice(2)
      .flatMap((arg, i, all) => (arg === '--profile' && (all[i + 1] === undefined || all[i + 1].startsWith('--')) ? ['--profile', ''] : [arg]))
      .flatMap((arg, i, all) => (arg === '--soak' && (all[i + 1] === undefined || all[i + 1].startsWith('--')) ? ['--soak', '15'] : [arg])),
  });
  if (values.help) {
    process.stdout.write(fs.readFileSync(new URL(import.meta.url), 'utf8').split('\nimport ')[0].replace(/^\/\/ ?/gm, '') + '\n');
    process.exit(0);
  }
  const number = (value: string | undefined, fallback: number) => {
    if (value === undefined) return fallback;
    const n = Number(value);
    if (!Number.isFinite(n) || n <= 0) throw new Error(`not a positive number: ${value}`);
    return n;
  };
  const rows = new Set<RowId>(values.only ? (values.only.split(',').map((r) => r.trim()) as RowId[]) : ROW_IDS);
  for (const row of rows) if (!ROW_IDS.includes(row)) throw new Error(`--only takes ${ROW_IDS.join(', ')}; not ${row}`);
  const quick = values.quick!;
  return {
    quick,
    large: values.large!,
    rows,
    duration: number(values.duration, quick ? 3 : 10),
    warmup: number(values.warmup, quick ? 1 : 2),
    connections: number(values.connections, 50),
    threads: number(values.threads, 1),
    subscribers: number(values.subscribers, quick ? 2_000 : 10_000),
    largeSubscribers: values.subscribers === undefined ? undefined : number(values.subscribers, 0),
    notifications: values.notifications === undefined ? undefined : number(values.notifications, 0),
    soakMinutes: values.soak === undefined ? undefined : number(values.soak, 15),
    soakRate: number(values['soak-rate'], 300),
    deliveries: number(values.deliveries, quick ? 500 : 2_000),
    pairs: Math.max(1, Math.round(number(values.pairs, 2))),
    streams: number(values.streams, quick ? 1_000 : 5_000),
    profileDir: values.profile === undefined ? undefined : path.resolve(ROOT, values.profile || 'bench/profiles'),
    nodeArgs: (values['node-args'] ?? '').split(/\s+/).filter(Boolean),
    logsDir: values.logs === undefined ? undefined : path.resolve(values.logs),
    json: values.json,
    keep: values.keep!,
    both: values.both!,
  };
}

// ---------------------------------------------------------------------------------------------
// The database

interface BenchDb {
  kind: 'sqlite' | 'postgres';
  db: Db;
  /** The URL the child processes open. */
  childUrl: string;
  version: string;
  close(keep: boolean): Promise<void>;
}

async function openDatabase(kind: 'sqlite' | 'postgres'): Promise<BenchDb> {
  if (kind === 'postgres') {
    const url = process.env.DATABASE_URL!;
    const schema = `bench_${randomBytes(5).toString('hex')}`;
    const admin = createDb(url);
    await admin.raw(`CREATE SCHEMA ${schema}`);
    const version = String((await admin.raw('SHOW server_version')).rows[0].server_version);
    await admin.destroy();
    const db = createDb(url, { schema });
    await migrate(db);
    const separator = url.includes('?') ? '&' : '?';
    return {
      kind,
      db,
      childUrl: `${url}${separator}options=${encodeURIComponent(`-c search_path=${schema}`)}`,
      version: `PostgreSQL ${version} (schema ${schema})`,
      async close(keep) {
        if (keep) log(`kept the schema ${schema}`);
        else await db.raw(`DROP SCHEMA ${schema} CASCADE`);
        await db.destroy();
      },
    };
  }
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'herald-bench-'));
  const file = path.join(dir, 'herald.db');
  const db = createDb(`sqlite:${file}`);
  await migrate(db);
  const version = (await db.raw('select sqlite_version() as v'))[0].v as string;
  return {
    kind,
    db,
    childUrl: `sqlite:${file}`,
    version: `SQLite ${version} (WAL, synchronous=${(process.env.HERALD_SQLITE_SYNCHRONOUS || 'full').toUpperCase()}; file in ${dir})`,
    async close(keep) {
      await db.destroy();
      if (keep) log(`kept the database ${file}`);
      else fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}

const subscriberId = (i: number) => `s${String(i).padStart(6, '0')}`;

/** Subscribers s000000…, in multi-row inserts (the repos insert one at a time: 100,000 would take minutes on PostgreSQL). */
async function seedSubscribers(db: Db, environmentId: string, count: number): Promise<string[]> {
  const keys: string[] = [];
  const now = new Date().toISOString();
  await db.transaction(async (trx) => {
    for (let from = 0; from < count; from += 500) {
      const rows = [];
      for (let i = from; i < Math.min(count, from + 500); i++) {
        const id = newId();
        keys.push(id);
        rows.push({
          id,
          environment_id: environmentId,
          subscriber_id: subscriberId(i),
          email: `${subscriberId(i)}@example.com`,
          first_name: `First${i}`,
          last_name: `Last${i}`,
          locale: 'en',
          data: JSON.stringify({ plan: 'pro', index: i }),
          created_at: now,
          updated_at: now,
        });
      }
      await trx('subscribers').insert(rows);
    }
  });
  return keys;
}

// ---------------------------------------------------------------------------------------------
// One suite: every row on one database

async function runSuite(kind: 'sqlite' | 'postgres', options: Options, tool: LoadTool): Promise<Suite> {
  const bench = await openDatabase(kind);
  const suite: Suite = { database: kind, databaseVersion: bench.version, rows: [] };
  const children: NodeChild[] = [];
  const scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'herald-bench-run-'));
  const logOf = (name: string) => (options.logsDir ? path.join(options.logsDir, `${kind}-${name}.log`) : undefined);
  // One folder per process: each thread of a process writes a profile of its own
  // (CPU.<date>.<time>.<pid>.<thread>.…; the main thread's is the largest, thread id 0).
  const cpuProfileArgs = (name: string) =>
    options.profileDir ? ['--cpu-prof', `--cpu-prof-dir=${path.join(options.profileDir, `${kind}-${name}-${Date.now()}`)}`] : [];
  // Herald's processes run with --node-args; the baseline and the stack floor as they are.
  const profileArgs = (name: string) => [...options.nodeArgs, ...cpuProfileArgs(name)];
  try {
    const { db } = bench;
    // Seed: an organization, a key, the subscribers and a topic of all of them.
    const seedStarted = Date.now();
    const { environmentIds } = await createOrganization(db, { name: 'Bench', plan: 'enterprise', environments: ['development', 'production'] });
    const env = environmentIds.development;
    const { key } = await createApiKey(db, { environmentId: env, name: 'bench' });
    const fanout = options.rows.has('fanout');
    const inboxStreams = options.rows.has('streams') ? options.streams : 0;
    const subscriberCount = Math.max(150, fanout ? options.subscribers : 0, inboxStreams);
    const keys = await seedSubscribers(db, env, subscriberCount);
    if (fanout) {
      const now = new Date();
      await insertTopic(db, env, { topicKey: 'everyone', name: 'Everyone' }, now);
      const topic = (await findTopicRow(db, env, 'everyone'))!;
      await addMembers(db, topic.id, keys.slice(0, options.subscribers), now);
      // A smaller topic for the worker's first fan-out, which warms it up as the HTTP rows' warm-up
      // does the API: a worker that has been running has its code compiled.
      await insertTopic(db, env, { topicKey: 'warm-up', name: 'Warm-up' }, now);
      await addMembers(db, (await findTopicRow(db, env, 'warm-up'))!.id, keys.slice(0, WARM_UP_FANOUT), now);
    }
    if (inboxStreams > 0) {
      const now = new Date();
      await insertTopic(db, env, { topicKey: 'inbox-all', name: 'Every open inbox' }, now);
      await addMembers(db, (await findTopicRow(db, env, 'inbox-all'))!.id, keys.slice(0, inboxStreams), now);
    }
    // A PostgreSQL server that has been running has statistics (autovacuum analyzes a table once a
    // tenth of it changed); a freshly loaded one has none, and plans a page of subscribers as a sort
    // of all of them (17 ms instead of 0.2 ms for 10,000). SQLite gathers none unless asked, so it is
    // measured as it is.
    if (kind === 'postgres') await db.raw('ANALYZE');
    log(`${kind}: seeded ${subscriberCount} subscribers in ${Date.now() - seedStarted} ms`);

    // The API, alone: no job runner in it.
    const apiPort = await freePort();
    const base = `http://127.0.0.1:${apiPort}`;
    // The chat rows' webhook receiver listens on 127.0.0.1, which the outbound guard refuses unless allowed.
    const serverEnv = {
      DATABASE_URL: bench.childUrl,
      HOST: '127.0.0.1',
      PORT: String(apiPort),
      HERALD_API_KEY: key,
      LOG_LEVEL: 'warn',
      HERALD_ALLOWED_NETWORKS: '127.0.0.1/32',
      // The streams row's browsers are all of one environment, which may hold half of them.
      HERALD_INBOX_MAX_STREAMS: String(Math.max(DEFAULT_INBOX_MAX_STREAMS, 2 * inboxStreams)),
    };
    const api = startNode('API', 'dist/src/main.js', ['--role', 'api'], serverEnv, profileArgs('api'), logOf('api'));
    children.push(api);
    await waitForHttp(api, `${base}/health`);
    const headers = { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json' };
    const call = async (method: string, pathname: string, body?: unknown, expect = [200, 201]) => {
      const res = await fetch(`${base}/v1${pathname}`, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
      const text = await res.text();
      if (!expect.includes(res.status)) throw new Error(`${method} ${pathname} answered ${res.status}: ${text}`);
      return { status: res.status, text, json: text ? (JSON.parse(text) as Record<string, any>) : {} };
    };
    const content = 'Hello {{subscriber.firstName}}: {{payload.title}}';
    await call('POST', '/workflows', { workflowId: 'bench-in-app', name: 'Bench in-app', steps: [{ type: 'in_app', template: { subject: 'Bench', content } }] });
    await call('POST', '/workflows', { workflowId: 'bench-chat', name: 'Bench chat', steps: [{ type: 'chat', template: { content } }] });
    await call('POST', '/workflows', { workflowId: 'bench-inbox', name: 'Bench inbox', steps: [{ type: 'in_app', template: { content: '{{payload.n}}' } }] });
    await waitIdle(api.pid); // start-up's own work (the runner's first looks, the checkpointer) settles first
    suite.apiStartRssMb = peakRssMb(api.pid);

    // The requests of the HTTP rows, and Herald's answers to them, which the baseline answers too.
    const triggerBody = JSON.stringify({ name: 'bench-in-app', to: subscriberId(0), payload: { title: 'A benchmark', n: 1 } });
    const bulkBody = JSON.stringify({
      events: Array.from({ length: 100 }, (_, i) => ({ name: 'bench-in-app', to: subscriberId(i % 150), payload: { title: 'A benchmark', n: i } })),
    });
    const specs: Record<'trigger' | 'get' | 'list' | 'bulk', LoadSpec & { status: number; basePath: string }> = {
      trigger: { method: 'POST', url: `${base}/v1/events/trigger`, headers, body: triggerBody, status: 201, basePath: '/v1/events/trigger' },
      get: { method: 'GET', url: `${base}/v1/subscribers/${subscriberId(42)}`, headers, status: 200, basePath: `/v1/subscribers/${subscriberId(42)}` },
      list: { method: 'GET', url: `${base}/v1/subscribers?limit=100`, headers, status: 200, basePath: '/v1/subscribers' },
      bulk: { method: 'POST', url: `${base}/v1/events/trigger/bulk`, headers, body: bulkBody, status: 201, basePath: '/v1/events/trigger/bulk' },
    };
    const answers: Record<string, unknown> = {};
    for (const [id, spec] of Object.entries(specs)) {
      const res = await fetch(spec.url, { method: spec.method, headers: spec.headers, body: spec.body });
      const text = await res.text();
      if (res.status !== spec.status) throw new Error(`${id}: ${spec.method} ${spec.url} answered ${res.status}, not ${spec.status}: ${text}`);
      answers[id] = JSON.parse(text);
    }
    if ((answers.list as { data: unknown[] }).data.length !== 100) throw new Error('GET /subscribers?limit=100 did not answer 100 subscribers');

    // The baseline, in its own process, on the same host.
    const baselinePort = await freePort();
    const routesFile = path.join(scratch, 'baseline-routes.json');
    fs.writeFileSync(
      routesFile,
      JSON.stringify({
        port: baselinePort,
        host: '127.0.0.1',
        routes: Object.entries(specs).map(([id, spec]) => ({ method: spec.method, path: spec.basePath, status: spec.status, body: answers[id] })),
      }),
    );
    const baseline = startNode('baseline', 'dist/bench/baseline.js', [routesFile], {}, cpuProfileArgs('baseline'), logOf('baseline'));
    children.push(baseline);
    await waitForHttp(baseline, `http://127.0.0.1:${baselinePort}/health`);
    await waitIdle(baseline.pid);
    // The stack floor: express + openapi-backend as Herald uses them, answering the same bodies.
    const floorPort = await freePort();
    const floorRoutesFile = path.join(scratch, 'floor-routes.json');
    fs.writeFileSync(floorRoutesFile, JSON.stringify({ ...JSON.parse(fs.readFileSync(routesFile, 'utf8')), port: floorPort }));
    const floor = startNode('stack floor', 'dist/bench/stack-floor.js', [floorRoutesFile], {}, cpuProfileArgs('floor'), logOf('stack-floor'));
    children.push(floor);
    await waitForHttp(floor, `http://127.0.0.1:${floorPort}/health`);
    await waitIdle(floor.pid);

    const eventCount = async () => Number((await db('events').count({ n: '*' }).first())!.n);
    const measure = async (spec: LoadSpec, pid: number, countEvents = false) => {
      await runLoad(tool, spec, options.warmup, options.connections, options.threads); // warm-up, discarded
      await waitIdle(pid, { timeoutMs: 120_000 }); // requests the warm-up left in flight
      const cpuBefore = cpuMs(pid);
      const eventsBefore = countEvents ? await eventCount() : 0;
      const started = Date.now();
      const result = await runLoad(tool, spec, options.duration, options.connections, options.threads);
      // Events the server stored while the load ran (requests still in flight at the end included).
      const events = countEvents ? (await eventCount()) - eventsBefore : 0;
      const cpuUsed = cpuMs(pid) - cpuBefore;
      const eventsPerSecond = countEvents ? events / ((Date.now() - started) / 1000) : undefined;
      return { ...result, cpuMsPerOp: cpuUsed / Math.max(1, result.requests), cpuMsPerEvent: events ? cpuUsed / events : undefined, eventsPerSecond };
    };
    const httpRow = async (id: 'trigger' | 'get' | 'list' | 'bulk', label: string) => {
      if (!options.rows.has(id)) return;
      const spec = specs[id];
      log(`${kind}: ${label}: baseline`);
      const baseResult = await measure({ ...spec, url: spec.url.replace(base, `http://127.0.0.1:${baselinePort}`) }, baseline.pid);
      log(`${kind}: ${label}: stack floor`);
      const floorResult = await measure({ ...spec, url: spec.url.replace(base, `http://127.0.0.1:${floorPort}`) }, floor.pid);
      log(`${kind}: ${label}: Herald`);
      resetPeakRss(api.pid);
      const result = await measure(spec, api.pid, id === 'trigger' || id === 'bulk');
      const notes: string[] = [];
      if (id === 'trigger') notes.push(`server stored ${fmt(result.eventsPerSecond)} events/s`);
      if (id === 'bulk' && result.requests === 0) notes.push(`no bulk request finished within ${options.duration} s`);
      if (result.non2xx > 0) {
        const sample = await fetch(spec.url, { method: spec.method, headers: spec.headers, body: spec.body });
        notes.push(`INVALID: ${result.non2xx} of ${result.requests} answers not 2xx (now: ${sample.status} ${(await sample.text()).slice(0, 120)})`);
      }
      if (result.socketErrors > 0) notes.push(`${result.socketErrors} socket errors`);
      if (baseResult.non2xx + baseResult.socketErrors > 0) notes.push(`baseline: ${baseResult.non2xx} non-2xx, ${baseResult.socketErrors} socket errors`);
      if (floorResult.non2xx + floorResult.socketErrors > 0) notes.push(`stack floor: ${floorResult.non2xx} non-2xx, ${floorResult.socketErrors} socket errors`);
      const floorRatio = floorResult.rps / baseResult.rps;
      notes.push(`stack floor ${fmt(floorResult.rps)} req/s = ${fmt(floorRatio, 2)}× baseline, CPU ${fmt(floorResult.cpuMsPerOp, 3)} ms/req`);
      // A bulk request at 50 connections can take longer than the whole run, so the bulk row counts
      // what the server stored (events per second, CPU per event) rather than answers that came back.
      const bulk = id === 'bulk';
      suite.rows.push({
        id,
        label,
        throughput: bulk ? result.eventsPerSecond! : result.rps,
        unit: bulk ? 'events/s' : 'req/s',
        extra: bulk ? `${fmt(result.rps, 1)} req/s answered` : undefined,
        p50Ms: result.p50Ms,
        p99Ms: result.p99Ms,
        cpuMsPerOp: bulk ? result.cpuMsPerEvent : result.cpuMsPerOp,
        rssMb: peakRssMb(api.pid),
        rssOf: 'api',
        baseline: bulk ? { ...baseResult, cpuMsPerOp: baseResult.cpuMsPerOp / 100 } : baseResult,
        ratio: bulk ? result.eventsPerSecond! / (baseResult.rps * 100) : result.rps / baseResult.rps,
        notes,
      });
      await waitIdle(api.pid, { timeoutMs: 120_000 });
    };
    await httpRow('trigger', '1. POST /v1/events/trigger (1 subscriber, in-app)');
    await httpRow('get', '2a. GET /v1/subscribers/:id');
    await httpRow('list', '2b. GET /v1/subscribers?limit=100');
    await httpRow('bulk', '3. POST /v1/events/trigger/bulk (100 events)');
    suite.baselineRssMb = peakRssMb(baseline.pid);
    await Promise.all([baseline.stop(), floor.stop()]);

    // The in-app jobs the trigger rows left are not part of what follows: take them out of the queue
    // (they stay in the tables, which keeps the database the size a busy one has).
    const backlog = await db('jobs').whereIn('status', ['pending', 'queued', 'delayed']).update({ status: 'canceled' });
    if (backlog > 0) log(`${kind}: took ${backlog} jobs left by the trigger rows out of the queue`);
    const workerEnv = { ...serverEnv, LOG_LEVEL: 'info', PORT: '0' };
    const startWorker = async (name: string) => {
      const worker = startNode(`worker (${name})`, 'dist/src/main.js', ['--role', 'worker'], workerEnv, profileArgs(`worker-${name}`), logOf(`worker-${name}`));
      children.push(worker);
      await waitForOutput(worker, /Herald worker is running jobs/);
      return worker;
    };
    /** Polls `done()` every `everyMs` until it reaches `total`; gives up when nothing moves for a minute. */
    const until = async (what: string, total: number, done: () => Promise<number>, stalled?: () => Promise<string>, everyMs = 100) => {
      let last = -1;
      let lastChange = Date.now();
      for (;;) {
        const n = await done();
        if (n >= total) return;
        if (n !== last) {
          last = n;
          lastChange = Date.now();
        } else if (Date.now() - lastChange > 60_000) {
          throw new Error(`${what}: stuck at ${n} of ${total} for a minute${stalled ? `; ${await stalled()}` : ''}`);
        }
        await sleep(everyMs);
      }
    };
    const count = async (query: ReturnType<Db>) => Number((await query.count({ n: '*' }).first())!.n);

    // 4. Fan-out: one trigger to a topic, until the last member's in-app message is stored.
    /** Triggers the in-app workflow to a topic and waits until each member's notification is done. */
    const fanOut = async (topicKey: string, members: number) => {
      const started = Date.now();
      const answer = await call('POST', '/events/trigger', { name: 'bench-in-app', to: { type: 'Topic', topicKey }, payload: { title: 'Fan-out' } });
      const acknowledgedMs = Date.now() - started;
      const transactionId = answer.json.data.transactionId as string;
      const event = await db('events').where({ environment_id: env, transaction_id: transactionId }).first('id');
      const notifications = () => db('notifications').where({ event_id: event.id });
      const stalled = async () =>
        `${await count(notifications())} notifications, ${await count(db('messages').where({ transaction_id: transactionId }))} messages`;
      // Timed by the notifications' own updated_at, so the poll only has to notice the end. It
      // watches the fan-out jobs, found once: counting 100,000 notifications every 100 ms took 20 ms
      // of PostgreSQL's CPU each time, a fifth of a core away from the fan-out being measured. A
      // fan-out job finishes with its last batch's notifications, which are written completed.
      const fanoutJobs = (await db('jobs').where({ event_id: event.id, kind: 'fanout' }).select('id')).map((job: { id: string }) => job.id);
      await until(`fan-out to ${topicKey}`, fanoutJobs.length, () => count(db('jobs').whereIn('id', fanoutJobs).whereIn('status', ['completed', 'canceled', 'failed'])), stalled);
      await until(`fan-out to ${topicKey}`, members, () => count(notifications().where({ status: 'completed' })), stalled);
      const finished = (await notifications().select('updated_at')).map((row: { updated_at: string }) => Date.parse(row.updated_at) - started).sort((a, b) => a - b);
      const messages = await count(db('messages').where({ transaction_id: transactionId }));
      return { finished, elapsed: finished.at(-1)!, acknowledgedMs, messages };
    };
    if (options.rows.has('fanout')) {
      const worker = await startWorker('fanout');
      await waitIdle(worker.pid);
      const members = options.subscribers;
      const warmUp = await fanOut('warm-up', Math.min(WARM_UP_FANOUT, members));
      log(`${kind}: fan-out to ${members.toLocaleString('en-US')} subscribers`);
      const workerCpu = cpuMs(worker.pid);
      const { finished, elapsed, acknowledgedMs, messages } = await fanOut('everyone', members);
      const workerCpuUsed = cpuMs(worker.pid) - workerCpu;
      const notes = [
        `${members.toLocaleString('en-US')} subscribers in ${(elapsed / 1000).toFixed(2)} s`,
        `trigger answered in ${acknowledgedMs} ms`,
        `the fresh worker's first fan-out (${Math.min(WARM_UP_FANOUT, members).toLocaleString('en-US')}, untimed warm-up): ${fmt((Math.min(WARM_UP_FANOUT, members) / warmUp.elapsed) * 1000)}/s`,
      ];
      if (messages !== members) notes.push(`${messages} messages stored, expected ${members}`);
      suite.rows.push({
        id: 'fanout',
        label: `4. Fan-out: topic of ${members.toLocaleString('en-US')}, in-app`,
        throughput: (members / elapsed) * 1000,
        unit: 'deliveries/s',
        p50Ms: finished[Math.floor(finished.length * 0.5)],
        p99Ms: finished[Math.min(finished.length - 1, Math.floor(finished.length * 0.99))],
        cpuMsPerOp: workerCpuUsed / members,
        rssMb: peakRssMb(worker.pid),
        rssOf: 'worker',
        notes,
      });
      await worker.stop();
    }

    /**
     * Where the inbox rows hold their streams: on SQLite one process serving the API and running the
     * jobs (as `npm start`: its streams are woken after its own commits); on PostgreSQL the API
     * process, with a worker beside it (the scale-out shape: woken by NOTIFY).
     */
    const inboxServer = async (name: string) => {
      await db('jobs').whereIn('status', ['pending', 'queued', 'delayed']).update({ status: 'canceled' });
      if (kind === 'postgres') {
        const worker = await startWorker(name);
        return { base, pid: api.pid, headers, stop: () => worker.stop() };
      }
      const port = await freePort();
      const both = startNode(`API + runner (${name})`, 'dist/src/main.js', [], { ...serverEnv, PORT: String(port) }, profileArgs(`api-runner-${name}`), logOf(`api-runner-${name}`));
      children.push(both);
      await waitForHttp(both, `http://127.0.0.1:${port}/health`);
      await waitIdle(both.pid);
      return { base: `http://127.0.0.1:${port}`, pid: both.pid, headers, stop: () => both.stop() };
    };

    // 9. Inbox streams: many open, one topic trigger to all of them.
    if (options.rows.has('streams')) {
      const server = await inboxServer('streams');
      const ids = Array.from({ length: inboxStreams }, (_, i) => subscriberId(i));
      log(`${kind}: minting ${inboxStreams} subscriber tokens`);
      const tokens = await mintTokens(server.base, headers, ids);
      await waitIdle(server.pid);
      const before = rssMb(server.pid);
      log(`${kind}: opening ${inboxStreams} inbox streams`);
      const streams = await openStreams(server.base, tokens);
      await waitIdle(server.pid, { timeoutMs: 120_000 });
      const after = rssMb(server.pid);
      const arrived: number[] = [];
      let started = 0;
      for (const stream of streams) stream.onCreated((_data, at) => arrived.push(at - started));
      resetPeakRss(server.pid);
      const apiCpu = cpuMs(server.pid);
      started = Date.now();
      const triggered = await fetch(`${server.base}/v1/events/trigger`, { method: 'POST', headers, body: JSON.stringify({ name: 'bench-inbox', to: { type: 'Topic', topicKey: 'inbox-all' }, payload: { n: 'all' } }) });
      if (triggered.status !== 201) throw new Error(`the topic trigger answered ${triggered.status}: ${await triggered.text()}`);
      await until('inbox streams', inboxStreams, async () => arrived.length, undefined, 50);
      const sorted = [...arrived].sort((a, b) => a - b);
      const apiCpuUsed = cpuMs(server.pid) - apiCpu;
      for (const stream of streams) stream.close();
      suite.rows.push({
        id: 'streams',
        label: `9. Inbox: ${inboxStreams.toLocaleString('en-US')} open streams, one topic trigger to all`,
        throughput: (inboxStreams / sorted.at(-1)!) * 1000,
        unit: 'events/s',
        p50Ms: percentile(sorted, 0.5),
        p99Ms: percentile(sorted, 0.99),
        cpuMsPerOp: apiCpuUsed / inboxStreams,
        rssMb: peakRssMb(server.pid),
        rssOf: 'api',
        notes: [
          kind === 'sqlite' ? 'streams on one process serving the API and running the jobs' : 'streams on the API process, the jobs on a worker (NOTIFY)',
          `last event ${ms(sorted.at(-1))} after the trigger`,
          `API memory per open stream ${fmt(((after - before) * 1024) / inboxStreams, 1)} KB (RSS ${fmt(before, 1)} → ${fmt(after, 1)} MB)`,
          'CPU per op: the API process, per stream event',
        ],
      });
      await waitIdle(server.pid, { timeoutMs: 60_000 });
      await server.stop();
    }

    // 10. Inbox latency: trigger → notification.created on the subscriber's stream, at a fixed rate.
    if (options.rows.has('stream-latency')) {
      const server = await inboxServer('stream-latency');
      const subscribers = 100;
      const rate = 500;
      const seconds = options.quick ? 5 : 10;
      const tokens = await mintTokens(server.base, headers, Array.from({ length: subscribers }, (_, i) => subscriberId(i)));
      const streams = await openStreams(server.base, tokens);
      const sentAt = new Map<string, number>();
      const latencies: number[] = [];
      for (const stream of streams) {
        stream.onCreated((data, at) => {
          const sent = sentAt.get(data.item.body);
          if (sent !== undefined) latencies.push(at - sent);
        });
      }
      await waitIdle(server.pid);
      log(`${kind}: ${rate} triggers/s for ${seconds} s, each to one open stream`);
      const total = rate * seconds;
      const { failed, seconds: sendSeconds } = await pacedTriggers(
        server.base,
        headers,
        total,
        rate,
        (n) => ({ name: 'bench-inbox', to: subscriberId(n % subscribers), payload: { n: `t${n}` } }),
        (n, at) => sentAt.set(`t${n}`, at),
      );
      await until('inbox latency', total - failed, async () => latencies.length, undefined, 50);
      for (const stream of streams) stream.close();
      const sorted = [...latencies].sort((a, b) => a - b);
      suite.rows.push({
        id: 'stream-latency',
        label: `10. Inbox: trigger → stream event at ${rate} triggers/s`,
        throughput: total / sendSeconds,
        unit: 'triggers/s',
        p50Ms: percentile(sorted, 0.5),
        p99Ms: percentile(sorted, 0.99),
        rssMb: peakRssMb(server.pid),
        rssOf: 'api',
        notes: [
          `${subscribers} open streams, ${total.toLocaleString('en-US')} triggers over 50 connections${failed ? `, ${failed} failed` : ''}`,
          'p50/p99: trigger sent → its notification.created received',
          kind === 'sqlite' ? 'one process serving the API and running the jobs' : 'the API process, the jobs on a worker (NOTIFY)',
        ],
      });
      await server.stop();
    }

    // 5. Chat through an HTTP provider: N jobs queued first, then a worker drains them.
    if (options.rows.has('chat')) {
      const hookPort = await freePort();
      const hook = startNode('webhook', 'dist/bench/webhook.js', [String(hookPort)], {}, [], logOf('webhook'));
      children.push(hook);
      await waitForOutput(hook, /webhook listening/);
      // The row measures Herald's delivery, not Slack's one message a second per webhook: no send limits.
      await call('POST', '/integrations', { providerId: 'slack', identifier: 'bench-slack', sendLimits: { perDestination: [] } });
      await call('POST', '/subscribers', { subscriberId: 'chat-0', firstName: 'Chat' });
      await call('PUT', '/subscribers/chat-0/credentials', { providerId: 'slack', credentials: { webhookUrl: `http://127.0.0.1:${hookPort}/hook` } });
      const total = options.deliveries;
      for (let sent = 0; sent < total; sent += 100) {
        const events = Array.from({ length: Math.min(100, total - sent) }, (_, i) => ({ name: 'bench-chat', to: 'chat-0', payload: { title: 'Chat', n: sent + i } }));
        const answer = await call('POST', '/events/trigger/bulk', { events });
        const refused = (answer.json.data as Array<{ status: string }>).filter((r) => r.status !== 'processed');
        if (refused.length > 0) throw new Error(`chat triggers refused: ${JSON.stringify(refused[0])}`);
      }
      log(`${kind}: ${total} chat jobs queued; a worker drains them`);
      const chatJobs = () => db('jobs').where({ environment_id: env, type: 'chat' });
      const worker = await startWorker('chat');
      const started = Date.now();
      const workerCpu = cpuMs(worker.pid);
      // Timed by the jobs' own updated_at, so a slow poll costs no accuracy. Polled every 100 ms,
      // this count (a scan of every job: 40–70 ms on PostgreSQL after the rows before) took most of
      // a core from the database the worker was being measured on.
      await until(
        'chat',
        total,
        () => count(chatJobs().whereIn('status', ['completed', 'failed'])),
        async () => JSON.stringify(await chatJobs().groupBy('status').select('status').count({ n: '*' })),
        1_000,
      );
      const workerCpuUsed = cpuMs(worker.pid) - workerCpu;
      const last = Date.parse((await chatJobs().max({ at: 'updated_at' }).first())!.at);
      const elapsed = last - started;
      const failed = await count(chatJobs().where({ status: 'failed' }));
      const retried = await count(chatJobs().where('attempts', '>', 1));
      const received = ((await (await fetch(`http://127.0.0.1:${hookPort}/stats`)).json()) as { received: number }).received;
      const notes = [`${total.toLocaleString('en-US')} jobs in ${(elapsed / 1000).toFixed(2)} s`, `webhook received ${received}`];
      if (failed > 0) notes.push(`${failed} failed`);
      if (retried > 0) notes.push(`${retried} retried`);
      suite.rows.push({
        id: 'chat',
        label: '5. Chat via HTTP webhook (queued jobs drained)',
        throughput: (total / elapsed) * 1000,
        unit: 'jobs/s',
        cpuMsPerOp: workerCpuUsed / total,
        rssMb: peakRssMb(worker.pid),
        rssOf: 'worker',
        notes,
      });
      await worker.stop();
      await hook.stop();
    }
    // 6. Slow destinations: a steady in-app and healthy chat load, first alone, then while 20
    // webhooks of another environment (each a destination of its own) hang 30 s.
    if (options.rows.has('slow')) {
      const seconds = options.duration;
      const hookPort = await freePort();
      const hook = startNode('webhook (healthy)', 'dist/bench/webhook.js', [String(hookPort)], {}, [], logOf('webhook-healthy'));
      children.push(hook);
      await waitForOutput(hook, /webhook listening/);
      const hanging = startNode('hanging webhooks', 'dist/bench/hanging-webhooks.js', ['20', '30000'], {}, [], logOf('hanging-webhooks'));
      children.push(hanging);
      await waitForOutput(hanging, /hanging webhooks listening on/);
      const hangPorts = /listening on ([\d,]+)/.exec(hanging.output())![1].split(',');
      // Another environment for the slow webhooks, with a key of its own.
      const prod = environmentIds.production;
      const prodHeaders = { Authorization: `Bearer ${(await createApiKey(db, { environmentId: prod, name: 'bench-slow' })).key}`, 'Content-Type': 'application/json' };
      const callAs = async (h: Record<string, string>, method: string, pathname: string, body?: unknown) => {
        const res = await fetch(`${base}/v1${pathname}`, { method, headers: h, body: body === undefined ? undefined : JSON.stringify(body) });
        if (res.status >= 300) throw new Error(`${method} ${pathname} answered ${res.status}: ${await res.text()}`);
        return (await res.json()) as Record<string, any>;
      };
      const slackIn = async (h: Record<string, string>) => {
        const listed = await callAs(h, 'GET', '/integrations');
        // Without send limits, as in the chat row: the steady load posts 5 a second to each webhook.
        if (!(listed.data as Array<{ providerId: string }>).some((i) => i.providerId === 'slack')) {
          await callAs(h, 'POST', '/integrations', { providerId: 'slack', sendLimits: { perDestination: [] } });
        }
      };
      await slackIn(headers);
      await slackIn(prodHeaders);
      await callAs(prodHeaders, 'POST', '/workflows', { workflowId: 'bench-chat', name: 'Bench chat', steps: [{ type: 'chat', template: { content } }] });
      const healthyIds = Array.from({ length: 10 }, (_, i) => `healthy-${i}`);
      for (const id of healthyIds) {
        await callAs(headers, 'POST', '/subscribers', { subscriberId: id });
        await callAs(headers, 'PUT', `/subscribers/${id}/credentials`, { providerId: 'slack', credentials: { webhookUrl: `http://127.0.0.1:${hookPort}/hook/${id}` } });
      }
      const hangIds = hangPorts.map((_, i) => `hang-${i}`);
      for (const [i, id] of hangIds.entries()) {
        await callAs(prodHeaders, 'POST', '/subscribers', { subscriberId: id });
        await callAs(prodHeaders, 'PUT', `/subscribers/${id}/credentials`, { providerId: 'slack', credentials: { webhookUrl: `http://127.0.0.1:${hangPorts[i]}/hook` } });
      }
      const worker = await startWorker('slow');
      await waitIdle(worker.pid);
      const chatDone = () => db('jobs').where({ environment_id: env, type: 'chat', status: 'completed' });
      /** The steady load for `seconds`: in-app 50/s to one subscriber, chat 50/s to the healthy webhooks; in-app latencies and chat jobs/s. */
      const steady = async () => {
        const sentAt = new Map<string, number>();
        const pending: Array<Promise<unknown>> = [];
        const chatBefore = await count(chatDone());
        const started = Date.now();
        let tick = 0;
        while (Date.now() - started < seconds * 1000) {
          tick++;
          const at = Date.now();
          pending.push(
            fetch(`${base}/v1/events/trigger`, { method: 'POST', headers, body: JSON.stringify({ name: 'bench-in-app', to: subscriberId(1), payload: { title: 'Steady' } }) })
              .then((res) => res.json() as Promise<{ data: { transactionId: string } }>)
              .then((answer) => sentAt.set(answer.data.transactionId, at)),
            fetch(`${base}/v1/events/trigger`, { method: 'POST', headers, body: JSON.stringify({ name: 'bench-chat', to: healthyIds[tick % healthyIds.length], payload: { title: 'Steady' } }) }).then((res) => res.text()),
          );
          await sleep(Math.max(0, started + tick * 20 - Date.now()));
        }
        await Promise.all(pending);
        const elapsed = (Date.now() - started) / 1000;
        // Healthy chat jobs done while the load ran, not after.
        const chatJobsPerSecond = ((await count(chatDone())) - chatBefore) / elapsed;
        // What the steady load left in the queue gets 10 s to finish; its latencies count.
        const ids = [...sentAt.keys()];
        const delivered = new Map<string, number>();
        const deadline = Date.now() + 10_000;
        while (delivered.size < ids.length && Date.now() < deadline) {
          for (let i = 0; i < ids.length; i += 500) {
            const rows = (await db('messages').whereIn('transaction_id', ids.slice(i, i + 500)).select('transaction_id', 'created_at')) as Array<{ transaction_id: string; created_at: string }>;
            for (const row of rows) delivered.set(row.transaction_id, Date.parse(row.created_at));
          }
          if (delivered.size < ids.length) await sleep(200);
        }
        const latencies = ids.map((id) => (delivered.has(id) ? delivered.get(id)! - sentAt.get(id)! : 10_000 + elapsed * 1000)).sort((a, b) => a - b);
        const pct = (p: number) => latencies[Math.min(latencies.length - 1, Math.floor(latencies.length * p))];
        return { p50: pct(0.5), p99: pct(0.99), chatJobsPerSecond, undelivered: ids.length - delivered.size, triggers: ids.length };
      };
      log(`${kind}: slow destinations: the steady load alone`);
      const alone = await steady();
      log(`${kind}: slow destinations: 20 webhooks of another environment hang 30 s`);
      await callAs(prodHeaders, 'POST', '/events/trigger', { name: 'bench-chat', to: hangIds, payload: { title: 'Hangs' } });
      const hangStats = async () => (await (await fetch(`http://127.0.0.1:${hangPorts[0]}/stats`)).json()) as { received: number; open: number };
      for (let waited = 0; (await hangStats()).open < hangIds.length && waited < 10_000; waited += 100) await sleep(100);
      const openAtStart = (await hangStats()).open;
      const slowed = await steady();
      const openAtEnd = (await hangStats()).open;
      const notes = [
        `in-app p50 ${ms(slowed.p50)} = ${(slowed.p50 / alone.p50).toFixed(2)}× (alone ${ms(alone.p50)})`,
        `in-app p99 ${ms(slowed.p99)} = ${(slowed.p99 / alone.p99).toFixed(2)}× (alone ${ms(alone.p99)})`,
        `healthy chat ${fmt(slowed.chatJobsPerSecond, 1)} jobs/s = ${(slowed.chatJobsPerSecond / alone.chatJobsPerSecond).toFixed(2)}× (alone ${fmt(alone.chatJobsPerSecond, 1)})`,
        `hanging sends open: ${openAtStart} at the start, ${openAtEnd} at the end`,
      ];
      if (alone.undelivered + slowed.undelivered > 0) notes.push(`${alone.undelivered} + ${slowed.undelivered} in-app triggers undelivered after 10 s`);
      suite.rows.push({
        id: 'slow',
        label: '6. Slow destinations: 20 webhooks hang 30 s (steady in-app 50/s + chat 50/s)',
        throughput: slowed.chatJobsPerSecond,
        unit: 'healthy chat jobs/s',
        p50Ms: slowed.p50,
        p99Ms: slowed.p99,
        rssMb: peakRssMb(worker.pid),
        rssOf: 'worker',
        slow: { p50Ratio: slowed.p50 / alone.p50, p99Ratio: slowed.p99 / alone.p99, chatRatio: slowed.chatJobsPerSecond / alone.chatJobsPerSecond },
        notes,
      });
      // The hanging sends end when their peers go; the worker then stops at once.
      await hanging.stop();
      await worker.stop();
      await hook.stop();
    }

    // 7. CPU per in-app delivery at a steady 500 and 2,000 triggers/s, in one process that serves
    // the API and runs the jobs (as `npm start` does): light traffic should cost no more per delivery.
    if (options.rows.has('cpu')) {
      await db('jobs').whereIn('status', ['pending', 'queued', 'delayed']).update({ status: 'canceled' });
      const port = await freePort();
      const both = startNode('API + runner', 'dist/src/main.js', [], { ...serverEnv, PORT: String(port) }, profileArgs('api-runner'), logOf('api-runner'));
      children.push(both);
      // The bare express baseline under the same paced load: how much of a request's CPU falls with
      // the load in Node itself, on this machine, whatever the server does.
      const express = startNode('baseline (paced)', 'dist/bench/baseline.js', [routesFile], {}, cpuProfileArgs('baseline-paced'), logOf('baseline-paced'));
      children.push(express);
      await waitForHttp(both, `http://127.0.0.1:${port}/health`);
      await waitForHttp(express, `http://127.0.0.1:${baselinePort}/health`);
      const spec = { ...specs.trigger, url: `http://127.0.0.1:${port}/v1/events/trigger` };
      const expressSpec = { ...specs.trigger, url: `http://127.0.0.1:${baselinePort}/v1/events/trigger` };
      const inAppQueued = () => db('jobs').where({ type: 'in_app' }).whereIn('status', ['pending', 'queued', 'running']);
      /** Waits (30 s at most) for the in-app jobs queued so far: a run's deliveries are its own. */
      const drainInApp = async () => {
        for (let waited = 0; (await count(inAppQueued())) > 0 && waited < 30_000; waited += 100) await sleep(100);
      };
      // Warm-up at both rates, discarded: the first measured rate must not pay for compiling the code.
      for (const rate of [500, 2000]) {
        await runPacedLoad(spec, options.warmup, rate, 50);
        await runPacedLoad(expressSpec, options.warmup, rate, 50);
      }
      await drainInApp();
      type Run = { cpu: number; delivered: number; rps: number; expressCpu: number };
      const runs: Record<500 | 2000, Run[]> = { 500: [], 2000: [] };
      for (const rate of alternating(options.pairs, 500, 2000)) {
        await waitIdle(express.pid);
        const expressBefore = cpuMs(express.pid);
        const expressResult = await runPacedLoad(expressSpec, options.duration, rate, 50);
        const expressCpu = (cpuMs(express.pid) - expressBefore) / Math.max(1, expressResult.requests);
        await waitIdle(both.pid, { timeoutMs: 60_000 });
        log(`${kind}: CPU per in-app delivery at ${rate} triggers/s`);
        const messagesBefore = await count(db('messages'));
        const cpuBefore = cpuMs(both.pid);
        const result = await runPacedLoad(spec, options.duration, rate, 50);
        await drainInApp();
        const delivered = (await count(db('messages'))) - messagesBefore;
        runs[rate].push({ cpu: (cpuMs(both.pid) - cpuBefore) / Math.max(1, delivered), delivered, rps: result.rps, expressCpu });
      }
      const rssMb = peakRssMb(both.pid);
      await Promise.all([both.stop(), express.stop()]);

      // 7′. The same loads with the runner in a worker of its own (`--role worker`) beside the API:
      // the delivery's CPU apart from the HTTP request's. Such a worker finds jobs by looking (no
      // trigger of its process wakes it), so its claims follow its polling, not the triggers.
      const worker = await startWorker('cpu');
      for (const rate of [500, 2000]) {
        await runPacedLoad(specs.trigger, options.warmup, rate, 50);
        await drainInApp();
      }
      type SplitRun = { workerCpu: number; apiCpu: number; delivered: number; rps: number };
      const split: Record<500 | 2000, SplitRun[]> = { 500: [], 2000: [] };
      for (const rate of alternating(options.pairs, 500, 2000)) {
        await waitIdle(api.pid, { timeoutMs: 60_000 });
        await waitIdle(worker.pid, { timeoutMs: 60_000 });
        log(`${kind}: CPU per in-app delivery at ${rate} triggers/s, the runner in a worker of its own`);
        const messagesBefore = await count(db('messages'));
        const [apiBefore, workerBefore] = [cpuMs(api.pid), cpuMs(worker.pid)];
        const result = await runPacedLoad(specs.trigger, options.duration, rate, 50);
        const apiCpu = (cpuMs(api.pid) - apiBefore) / Math.max(1, result.requests);
        await drainInApp();
        const delivered = (await count(db('messages'))) - messagesBefore;
        split[rate].push({ workerCpu: (cpuMs(worker.pid) - workerBefore) / Math.max(1, delivered), apiCpu, delivered, rps: result.rps });
      }
      await worker.stop();

      const mean = <R extends Record<K, number>, K extends string>(list: R[], key: K) => list.reduce((sum, run) => sum + run[key], 0) / list.length;
      // 500/s ÷ 2,000/s, pair by pair.
      const lightOverHeavy = <R extends Record<K, number>, K extends string>(list: Record<500 | 2000, R[]>, key: K) =>
        pairedRatio(list[2000].map((heavy, pair) => [heavy[key], list[500][pair][key]]));
      const [herald, bare] = [lightOverHeavy(runs, 'cpu'), lightOverHeavy(runs, 'expressCpu')];
      const [delivery, request] = [lightOverHeavy(split, 'workerCpu'), lightOverHeavy(split, 'apiCpu')];
      const describe = (rate: 500 | 2000) =>
        `${rate.toLocaleString('en-US')}/s: ${cpu(mean(runs[rate], 'cpu'))} per delivery (${runs[rate].map((run) => fmt(run.rps)).join(' and ')} req/s, ${runs[rate].map((run) => run.delivered).join(' and ')} delivered); bare express ${cpu(mean(runs[rate], 'expressCpu'))} per request; ` +
        `the runner in a worker of its own ${cpu(mean(split[rate], 'workerCpu'))} per delivery, the API ${cpu(mean(split[rate], 'apiCpu'))} per trigger (${split[rate].map((run) => fmt(run.rps)).join(' and ')} req/s, ${split[rate].map((run) => run.delivered).join(' and ')} delivered)`;
      suite.rows.push({
        id: 'cpu',
        label: '7. CPU per in-app delivery, API + runner in one process, at 500 and 2,000 triggers/s',
        throughput: mean(runs[2000], 'rps'),
        unit: 'req/s at the 2,000/s rate',
        cpuMsPerOp: mean(runs[500], 'cpu'),
        rssMb,
        rssOf: 'api',
        cpuRatio: herald.ratio,
        expressCpuRatio: bare.ratio,
        workerCpuRatio: delivery.ratio,
        notes: [
          describe(500),
          describe(2000),
          `500/s ÷ 2,000/s = ${herald.text}; the bare express baseline paced the same way: ${bare.text}; the runner in a worker of its own: ${delivery.text} per delivery, the API beside it ${request.text} per trigger`,
        ],
      });
    }

    // 8. Webhooks. (a) The trigger row, with a worker delivering what it queues, A/B in one run:
    // no endpoint against one endpoint taking every event (each in-app delivery also records a
    // message.delivered and the worker sends it), in pairs whose order alternates (A,B, B,A…).
    // (b) Webhook events delivered a second: N deliveries queued, then a fresh worker drains them
    // to one endpoint.
    if (options.rows.has('webhooks')) {
      await db('jobs').whereIn('status', ['pending', 'queued', 'delayed']).update({ status: 'canceled' });
      const hookPort = await freePort();
      const hook = startNode('webhook (endpoint)', 'dist/bench/webhook.js', [String(hookPort)], {}, [], logOf('webhook-endpoint'));
      children.push(hook);
      await waitForOutput(hook, /webhook listening/);
      const received = async () => ((await (await fetch(`http://127.0.0.1:${hookPort}/stats`)).json()) as { received: number }).received;
      const worker = await startWorker('webhooks');
      type Run = { rps: number; p99Ms: number; apiCpu: number; workerCpu: number; sent: number };
      type Variants = Record<'none' | 'endpoint', Run[]>;
      let endpointId: string | undefined;
      const abRuns = async (label: string): Promise<Variants> => {
        const variants: Variants = { none: [], endpoint: [] };
        for (const variant of alternating(options.pairs, 'none', 'endpoint')) {
          if (variant === 'endpoint' && !endpointId) {
            endpointId = (await call('POST', '/webhook-endpoints', { url: `http://127.0.0.1:${hookPort}/herald` })).json.data.endpointId as string;
          } else if (variant === 'none' && endpointId) {
            await call('DELETE', `/webhook-endpoints/${endpointId}`, undefined, [204]);
            endpointId = undefined;
          }
          // On SQLite the worker, another process, hears of the change when its memory of it expires.
          if (kind === 'sqlite') await sleep(SUBSCRIPTIONS_TTL_MS + 500);
          log(`${kind}: webhooks: the trigger row${label}, ${variant === 'none' ? 'no endpoint' : 'one endpoint taking every event'}`);
          const workerCpu = cpuMs(worker.pid);
          const sentBefore = await received();
          const result = await measure(specs.trigger, api.pid);
          variants[variant].push({
            rps: result.rps,
            p99Ms: result.p99Ms,
            apiCpu: result.cpuMsPerOp,
            workerCpu: (cpuMs(worker.pid) - workerCpu) / Math.max(1, result.requests),
            sent: (await received()) - sentBefore,
          });
          // What the run queued is not the next run's work.
          await db('jobs').whereIn('status', ['pending', 'queued', 'delayed']).update({ status: 'canceled' });
          await db('webhook_deliveries').where({ status: 'pending' }).update({ status: 'failed' });
          await waitIdle(worker.pid, { timeoutMs: 120_000 });
        }
        return variants;
      };
      const mean = (runs: Run[], key: 'rps' | 'p99Ms' | 'apiCpu' | 'workerCpu') => runs.reduce((sum, run) => sum + run[key], 0) / runs.length;
      // With ÷ without, pair by pair.
      const withOverWithout = (variants: Variants, key: 'rps' | 'apiCpu') => pairedRatio(variants.none.map((run, pair) => [run[key], variants.endpoint[pair][key]]));
      const describeRuns = (variants: Variants, label: string) => [
        `trigger row${label}, no endpoint: ${variants.none.map((r) => fmt(r.rps)).join(' and ')} req/s (p99 ${ms(mean(variants.none, 'p99Ms'))}, API ${cpu(mean(variants.none, 'apiCpu'))}/req, worker ${cpu(mean(variants.none, 'workerCpu'))}/req)`,
        `one endpoint taking every event: ${variants.endpoint.map((r) => fmt(r.rps)).join(' and ')} req/s (p99 ${ms(mean(variants.endpoint, 'p99Ms'))}, API ${cpu(mean(variants.endpoint, 'apiCpu'))}/req, worker ${cpu(mean(variants.endpoint, 'workerCpu'))}/req; ${variants.endpoint.map((r) => fmt(r.sent)).join(' and ')} webhooks sent during the runs)`,
        `with ÷ without: req/s ${withOverWithout(variants, 'rps').text}; the API's CPU per trigger ${withOverWithout(variants, 'apiCpu').text}`,
      ];
      const variants = await abRuns('');
      const webhookRatio = withOverWithout(variants, 'rps').ratio;
      // The same A/B with the worker and the endpoint on a core of their own, and the API and this
      // harness (so wrk) on another: what an endpoint costs the API itself when the work it causes
      // does not take the API's CPU, as where workers and receivers run on machines of their own.
      // On PostgreSQL the database still runs on both cores.
      let pinned: Variants | undefined;
      const original = spawnSync('taskset', ['-cp', String(process.pid)], { encoding: 'utf8' });
      const cpus = original.status === 0 ? cpuList(original.stdout.split(':').pop()!.trim()) : [];
      if (cpus.length >= 2) {
        const pin = (pids: number[], list: string) => pids.every((pid) => spawnSync('taskset', ['-a', '-cp', list, String(pid)], { stdio: 'ignore' }).status === 0);
        const everyPid = [api.pid, process.pid, worker.pid, hook.pid];
        try {
          if (pin([api.pid, process.pid], String(cpus[0])) && pin([worker.pid, hook.pid], String(cpus[1]))) pinned = await abRuns(' (worker and endpoint on a core of their own)');
          else log(`${kind}: webhooks: taskset could not pin the processes; the pinned A/B is left out`);
        } finally {
          pin(everyPid, cpus.join(','));
        }
      }
      await worker.stop();

      // (b) Deliveries queued in the outbox, drained by a fresh worker.
      // A fresh endpoint, so that only the deliveries queued here are counted.
      if (endpointId) await call('DELETE', `/webhook-endpoints/${endpointId}`, undefined, [204]);
      endpointId = (await call('POST', '/webhook-endpoints', { url: `http://127.0.0.1:${hookPort}/herald` })).json.data.endpointId as string;
      const total = options.deliveries;
      const at = new Date().toISOString();
      const payload = JSON.stringify({ type: 'message.delivered', timestamp: at, environmentId: env, data: { notificationId: newId(), transactionId: 'bench', subscriberId: subscriberId(0), workflowId: 'bench-in-app', stepId: 'in-app', channel: 'in_app', providerId: 'herald', jobId: newId(), messageId: newId() } });
      for (let from = 0; from < total; from += 500) {
        await db('webhook_deliveries').insert(
          Array.from({ length: Math.min(500, total - from) }, () => ({
            id: newId(), environment_id: env, endpoint_id: endpointId, event_id: `msg_${newId()}`, event_type: 'message.delivered', payload,
            status: 'pending', attempts: 0, manual: false, run_at: at, created_at: at, updated_at: at,
          })),
        );
      }
      log(`${kind}: webhooks: ${total} deliveries queued; a worker drains them`);
      const before = await received();
      const drainer = await startWorker('webhook-drain');
      const started = Date.now();
      const drainCpu = cpuMs(drainer.pid);
      const queued = () => db('webhook_deliveries').where({ endpoint_id: endpointId });
      await until('webhook deliveries', total, () => count(queued().whereIn('status', ['succeeded', 'failed'])), undefined, 1_000);
      const drainCpuUsed = cpuMs(drainer.pid) - drainCpu;
      const elapsed = Date.parse((await queued().max({ at: 'updated_at' }).first())!.at) - started;
      const failed = await count(queued().where({ status: 'failed' }));
      const notes = [
        `${total.toLocaleString('en-US')} deliveries in ${(elapsed / 1000).toFixed(2)} s (endpoint received ${(await received()) - before})`,
        ...describeRuns(variants, ''),
        ...(pinned ? describeRuns(pinned, ' with the worker and endpoint on a core of their own') : []),
      ];
      if (failed > 0) notes.push(`${failed} failed`);
      suite.rows.push({
        id: 'webhooks',
        label: '8. Webhooks: outbox drained to one endpoint; the trigger row with and without an endpoint taking every event',
        throughput: (total / elapsed) * 1000,
        unit: 'webhooks/s',
        cpuMsPerOp: drainCpuUsed / total,
        rssMb: peakRssMb(drainer.pid),
        rssOf: 'worker',
        webhookRatio,
        webhookRatioPinned: pinned ? withOverWithout(pinned, 'rps').ratio : undefined,
        notes,
      });
      await drainer.stop();
      await hook.stop();
    }

    const code = await api.stop();
    if (code !== 0) log(`${kind}: the API exited with ${code}:\n${api.output().slice(-2000)}`);
    return suite;
  } catch (err) {
    for (const child of children) if (child.child.exitCode === null) log(`${child.name} output:\n${child.output().slice(-3000)}`);
    throw err;
  } finally {
    await Promise.all(children.map((child) => child.stop(5_000)));
    await bench.close(options.keep);
    fs.rmSync(scratch, { recursive: true, force: true });
  }
}

// ---------------------------------------------------------------------------------------------
// Output

const fmt = (n: number | undefined, digits = 0) => (n === undefined || Number.isNaN(n) ? '–' : n.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits }));
const ms = (n: number | undefined) => (n === undefined || Number.isNaN(n) ? '–' : n < 10 ? `${n.toFixed(2)} ms` : n < 1000 ? `${n.toFixed(1)} ms` : `${(n / 1000).toFixed(2)} s`);

const cpu = (n: number | undefined) => (n === undefined ? '–' : `${n < 1 ? n.toFixed(3) : n.toFixed(2)} ms`);

function cells(row: Row | undefined): string[] {
  if (!row) return ['–', '–', '–', '–', '–', '–'];
  const throughput = `${fmt(row.throughput)} ${row.unit}${row.extra ? ` (${row.extra})` : ''}`;
  const b = row.baseline;
  const per = row.id === 'bulk' ? 'event' : 'req';
  const baseRate = row.id === 'bulk' ? `${fmt(b?.rps)} req/s = ${fmt((b?.rps ?? 0) * 100)} events/s` : `${fmt(b?.rps)} req/s`;
  const ratio =
    row.ratio === undefined || !b
      ? '–'
      : `**${row.ratio.toFixed(2)}** (${baseRate}, p99 ${ms(b.p99Ms)}, CPU ${cpu(b.cpuMsPerOp)}/${per}; CPU ratio ${(b.cpuMsPerOp / row.cpuMsPerOp!).toFixed(2)})`;
  const rss = row.rssMb === undefined ? '–' : `${fmt(row.rssMb, 1)} MB${row.rssOf === 'worker' ? ' (worker)' : ''}`;
  return [throughput, ms(row.p50Ms), ms(row.p99Ms), cpu(row.cpuMsPerOp), rss, ratio];
}

function table(suites: Suite[]): string {
  const head = suites.length === 1 ? ['Row', 'Throughput', 'p50', 'p99', 'CPU per op', 'Peak RSS', '× baseline (baseline)', 'Notes'] : ['Row'];
  if (suites.length > 1) {
    for (const suite of suites) {
      const tag = suite.database === 'sqlite' ? 'SQLite' : 'PG';
      head.push(`${tag} throughput`, `${tag} p50`, `${tag} p99`, `${tag} CPU per op`, `${tag} peak RSS`, `${tag} × baseline`);
    }
    head.push('PG / SQLite', 'Notes');
  }
  const lines = [`| ${head.join(' | ')} |`, `|${head.map(() => '---').join('|')}|`];
  const ids = ROW_IDS.filter((id) => suites.some((s) => s.rows.some((r) => r.id === id)));
  for (const id of ids) {
    const rows = suites.map((s) => s.rows.find((r) => r.id === id));
    const label = rows.find(Boolean)!.label;
    const line = [label, ...rows.flatMap(cells)];
    if (suites.length > 1) line.push(rows[0] && rows[1] ? (rows[1].throughput / rows[0].throughput).toFixed(2) : '–');
    line.push(suites.flatMap((s, i) => (rows[i]?.notes.length ? [`${suites.length > 1 ? `${s.database}: ` : ''}${rows[i]!.notes.join(', ')}`] : [])).join('; ') || '');
    lines.push(`| ${line.join(' | ')} |`);
  }
  return lines.join('\n');
}

/** The two sides of an A/B in `pairs` pairs whose order alternates: a, b, b, a, a, b… */
function alternating<const T>(pairs: number, a: T, b: T): T[] {
  return Array.from({ length: pairs }, (_, pair) => (pair % 2 === 0 ? [a, b] : [b, a])).flat();
}

function targets(suites: Suite[]): string[] {
  const lines: string[] = [];
  const check = (ok: boolean | undefined, text: string) => lines.push(`${ok === undefined ? '  n/a ' : ok ? '  PASS' : '  MISS'}  ${text}`);
  for (const suite of suites) {
    const row = (id: RowId) => suite.rows.find((r) => r.id === id);
    const tag = suite.database === 'sqlite' ? 'SQLite' : 'PostgreSQL (targets are set for SQLite; shown for reference)';
    lines.push(`Targets, ${tag}:`);
    const trigger = row('trigger');
    check(trigger && trigger.ratio! >= 0.6, `trigger ≥ 0.6 × baseline: ${trigger ? trigger.ratio!.toFixed(2) : '–'}`);
    check(trigger && trigger.p99Ms! <= 25, `trigger p99 ≤ 25 ms at ${trigger ? 'the' : ''} load: ${ms(trigger?.p99Ms)}`);
    const get = row('get');
    check(get && get.ratio! >= 0.7, `GET /subscribers/:id ≥ 0.7 × baseline: ${get ? get.ratio!.toFixed(2) : '–'}`);
    const fanout = row('fanout');
    check(fanout && fanout.throughput >= 10_000, `fan-out ≥ 10,000 in-app deliveries/s: ${fmt(fanout?.throughput)}`);
    const slow = row('slow')?.slow;
    check(slow && slow.p99Ratio <= 2, `slow destinations: in-app p99 ≤ 2× without them: ${slow ? slow.p99Ratio.toFixed(2) : '–'}`);
    check(slow && slow.chatRatio >= 0.8, `slow destinations: healthy chat ≥ 0.8× without them: ${slow ? slow.chatRatio.toFixed(2) : '–'}`);
    const cpuRow = row('cpu');
    check(cpuRow && cpuRow.cpuRatio! <= 1, `CPU per in-app delivery at 500/s ≤ at 2,000/s: ${cpuRow ? cpuRow.cpuRatio!.toFixed(2) : '–'}×`);
    if (cpuRow?.expressCpuRatio !== undefined) lines.push(`  (info) the bare express baseline's CPU per request, 500/s ÷ 2,000/s: ${cpuRow.expressCpuRatio.toFixed(2)}×`);
    if (cpuRow?.workerCpuRatio !== undefined) lines.push(`  (info) with the runner in a worker of its own, the worker's CPU per delivery, 500/s ÷ 2,000/s: ${cpuRow.workerCpuRatio.toFixed(2)}×`);
    const webhooks = row('webhooks');
    check(webhooks && webhooks.webhookRatio! >= 0.9, `trigger row with one endpoint taking every event ≥ 0.9 × without: ${webhooks ? webhooks.webhookRatio!.toFixed(2) : '–'}`);
    if (webhooks?.webhookRatioPinned !== undefined) lines.push(`  (info) the same with the worker and endpoint on a core of their own: ${webhooks.webhookRatioPinned.toFixed(2)}`);
    // The streams row holds thousands of connections open on purpose; its notes give their memory each.
    const peaks = [suite.apiStartRssMb, ...suite.rows.filter((r) => r.id !== 'streams').map((r) => r.rssMb)].filter((n): n is number => n !== undefined);
    const peak = peaks.length ? Math.max(...peaks) : undefined;
    check(peak === undefined ? undefined : peak <= 200, `peak RSS ≤ 200 MB through all rows but the open streams': ${peak === undefined ? '–' : `${fmt(peak, 1)} MB`} (API after start ${fmt(suite.apiStartRssMb, 1)} MB)`);
  }
  if (suites.length === 2) {
    const [sqlite, pg] = suites;
    lines.push('PostgreSQL against SQLite (no row slower than 1/3):');
    for (const row of pg.rows) {
      const other = sqlite.rows.find((r) => r.id === row.id);
      if (other) check(row.throughput >= other.throughput / 3, `${row.label}: ${(row.throughput / other.throughput).toFixed(2)} × SQLite`);
    }
  }
  return lines;
}

/** The CPUs of a taskset list such as `0-3,6`. */
function cpuList(text: string): number[] {
  return text.split(',').flatMap((part) => {
    const [from, to] = part.split('-').map(Number);
    return Array.from({ length: (to ?? from) - from + 1 }, (_, i) => from + i);
  });
}

/** The commit measured, and whether the working tree differed from it. */
function codeVersion(): string {
  const git = (...args: string[]) => spawnSync('git', args, { cwd: ROOT, encoding: 'utf8' }).stdout?.trim() ?? '';
  const commit = git('log', '-1', '--format=%h %s');
  if (!commit) return 'not a git checkout';
  const changed = git('status', '--porcelain', '--', 'src', 'openapi', 'package.json').split('\n').filter(Boolean).length;
  return `${commit}${changed ? ` + ${changed} uncommitted change(s) under src/, openapi/, package.json` : ''}`;
}

async function main(): Promise<void> {
  const options = parseOptions();
  const pgUrl = process.env.DATABASE_URL && isPostgresUrl(process.env.DATABASE_URL) ? process.env.DATABASE_URL : undefined;
  const both = options.both;
  if (both && !pgUrl) throw new Error('--both needs DATABASE_URL=postgres://…');
  const kinds: Array<'sqlite' | 'postgres'> = both ? ['sqlite', 'postgres'] : [pgUrl ? 'postgres' : 'sqlite'];
  if (options.large) {
    await buildForBench();
    const sections: string[] = [];
    for (const kind of kinds) {
      const opened = await openDatabase(kind);
      try {
        sections.push(
          await runLarge(opened, {
            quick: options.quick,
            notifications: options.notifications,
            subscribers: options.largeSubscribers,
            soakMinutes: options.soakMinutes,
            soakRate: options.soakRate,
            nodeArgs: options.nodeArgs,
          }),
        );
      } finally {
        await opened.close(options.keep);
      }
    }
    const cpus = os.cpus();
    process.stdout.write(
      [
        '',
        `Machine: ${cpus[0]?.model ?? 'unknown CPU'}, ${cpus.length} cores, ${(os.totalmem() / 2 ** 30).toFixed(1)} GB RAM; Node ${process.version}; load average ${os.loadavg().map((n) => n.toFixed(2)).join(' ')}`,
        `Code: ${codeVersion()}`,
        '',
        ...sections.flatMap((section) => [section, '']),
      ].join('\n'),
    );
    return;
  }
  const tool = chooseLoadTool(log);
  await buildForBench();
  if (options.profileDir) {
    fs.mkdirSync(options.profileDir, { recursive: true });
    allowProfilerOverhead();
  }
  if (options.logsDir) fs.mkdirSync(options.logsDir, { recursive: true });

  const cpus = os.cpus();
  const machine = [
    `Machine: ${cpus[0]?.model ?? 'unknown CPU'}, ${cpus.length} cores, ${(os.totalmem() / 2 ** 30).toFixed(1)} GB RAM, ${os.type()} ${os.release()}`,
    `Node ${process.version}; load from ${loadToolVersion(tool)} (${tool === 'wrk' ? `${options.threads} thread(s), ` : ''}${options.connections} connections, ${options.warmup} s warm-up + ${options.duration} s per row) on 127.0.0.1`,
    `Load average at start: ${os.loadavg().map((n) => n.toFixed(2)).join(' ')}`,
    `Code: ${codeVersion()}`,
  ];
  log(machine.join('\n[bench] '));
  const suites: Suite[] = [];
  const started = Date.now();
  for (const kind of kinds) suites.push(await runSuite(kind, options, tool));

  const out = [
    '',
    ...machine,
    `Load average at end: ${os.loadavg().map((n) => n.toFixed(2)).join(' ')}; whole run ${((Date.now() - started) / 1000).toFixed(0)} s`,
    ...suites.map(
      (s) =>
        `Database: ${s.databaseVersion}; API RSS after start ${fmt(s.apiStartRssMb, 1)} MB; bare express baseline (node + express) peak RSS ${fmt(s.baselineRssMb, 1)} MB`,
    ),
    '',
    table(suites),
    '',
    'Throughput: HTTP rows are requests per second under constant load (bulk: events the server stored per second, as one bulk',
    'request can outlast the run). Fan-out: subscribers whose in-app message was stored, per second, from the trigger request to',
    'the last one (p50/p99: trigger → that subscriber\'s notification completed), by a worker that has made one fan-out to 2,000',
    'first (its figure is in the notes). Chat: jobs per second a fresh worker drains.',
    'CPU per op: user + system CPU of the API (or worker) process per request (bulk: per event; fan-out and chat: per delivery),',
    'which a busy machine disturbs less than throughput; "CPU ratio" is the baseline\'s CPU per request over Herald\'s.',
    'Peak RSS: VmHWM of the API process during the row (reset before it), or of the worker process.',
    '',
    ...targets(suites),
    '',
  ].join('\n');
  process.stdout.write(out);
  if (options.json) fs.writeFileSync(options.json, JSON.stringify({ machine, options: { ...options, rows: [...options.rows] }, suites }, null, 2));
  if (options.profileDir) process.stdout.write(`CPU profiles in ${options.profileDir} (summarise with: npx tsx scripts/bench/profile-summary.ts <file>)\n`);
}

main().catch((err: unknown) => {
  process.stderr.write(`bench failed: ${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});
