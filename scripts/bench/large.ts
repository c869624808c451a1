// `npm run bench -- --large`: Herald on a large environment (issue 25). A million notifications and
// 100,000 subscribers are written straight into a fresh database with the app's schema
// (large-data.ts), then one server (API and jobs in one process, the default) is measured:
//   - each list of GET /notifications (and the other lists) sampled one request at a time, its
//     median and worst latency, and the worst /health answer meanwhile (asked every 5 ms on a
//     connection of its own): how long the event loop was held;
//   - a fan-out to all 100,000 subscribers, with /health and GET /subscribers/{id} asked at a
//     steady rate meanwhile (their p99 and worst) and an unrelated trigger every half second
//     (the slowest until its notification completed);
//   - with --soak [minutes], steady load (triggers and lists) for that long, the API's RSS every
//     30 s;
//   - a page of 100 subscribers whose data is ~800 KB each, alone and four at once.
// --quick writes 100,000 notifications and 10,000 subscribers instead.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { loadConfig } from '../../src/config.js';
import { createLogger } from '../../src/logger.js';
import { systemClock } from '../../src/clock.js';
import { sweepExpired } from '../../src/engine/retention.js';
import { createDb, type Db } from '../../src/db/knex.js';
import { createApiKey, createOrganization } from '../../src/db/repos/accounts.js';
import { freePort, startNode, waitForHttp, type NodeChild } from './lib.js';
import { seedLarge, type LargeData } from './large-data.js';

export interface LargeOptions {
  quick: boolean;
  notifications?: number;
  subscribers?: number;
  soakMinutes?: number;
  soakRate?: number;
  nodeArgs: string[];
}

interface OpenedDb {
  kind: 'sqlite' | 'postgres';
  db: Db;
  childUrl: string;
  version: string;
  close(keep: boolean): Promise<void>;
}

const log = (line: string) => process.stderr.write(`[bench --large] ${line}\n`);
const SAMPLES = 15;

function percentile(values: number[], p: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
}
const ms = (n: number) => (Number.isFinite(n) ? `${n < 10 ? n.toFixed(1) : Math.round(n).toLocaleString('en-US')} ms` : 'n/a');

/**
 * Asks /health every `everyMs` (from a process of its own) until stopped; answers each answer's
 * latency, by when it was asked. Resolves once the first answer is in.
 */
async function probe(base: string, everyMs: number) {
  const prober = startNode('health prober', 'dist/bench/health-prober.js', [base, String(everyMs)], {});
  const latencies: Array<{ at: number; ms: number }> = [];
  let partial = '';
  let answered: () => void;
  const firstAnswer = new Promise<void>((resolve) => (answered = resolve));
  prober.child.stdout!.on('data', (chunk: Buffer) => {
    const lines = (partial + chunk.toString()).split('\n');
    partial = lines.pop()!;
    for (const line of lines) if (line) latencies.push(JSON.parse(line) as { at: number; ms: number });
    if (latencies.length > 0) answered();
  });
  await firstAnswer;
  const epoch = (now: number) => performance.timeOrigin + now;
  return {
    /**
     * The worst /health latency among probes that overlapped [from, to] (this process's
     * performance.now()), once a probe asked after `to` has answered: the one under way at `to`
     * counts too.
     */
    async worst(from: number, to: number) {
      const waitUntil = performance.now() + 10_000;
      while (!latencies.some((l) => l.at > epoch(to)) && performance.now() < waitUntil) await sleep(5);
      return Math.max(0, ...latencies.filter((l) => l.at <= epoch(to) && l.at + l.ms >= epoch(from)).map((l) => l.ms));
    },
    async stop() {
      await prober.stop();
    },
  };
}

interface ListRow {
  name: string;
  medianMs: number;
  worstMs: number;
  healthWorstMs: number;
  totalCount?: number;
}

async function measureLists(base: string, headers: Record<string, string>, data: LargeData, total: number): Promise<{ rows: ListRow[]; fourAtOnce: { wallMs: number; healthWorstMs: number } }> {
  const lastPage = Math.max(0, Math.ceil(total / 10) - 1);
  const middle = Math.floor(lastPage / 2);
  const lists: Array<[string, string]> = [
    ['GET /notifications page 0', '/v1/notifications'],
    ['GET /notifications page 99', '/v1/notifications?page=99'],
    [`GET /notifications page ${middle.toLocaleString('en-US')}`, `/v1/notifications?page=${middle}`],
    [`GET /notifications last page (${lastPage.toLocaleString('en-US')})`, `/v1/notifications?page=${lastPage}`],
    ['?subscriberId=', `/v1/notifications?subscriberId=${data.subscriberIds[7]}`],
    ['?status=failed', '/v1/notifications?status=failed'],
    ['?status=completed page 50', '/v1/notifications?status=completed&page=50'],
    ['?channel=chat', '/v1/notifications?channel=chat'],
    ['?channel=in_app page 50', '/v1/notifications?channel=in_app&page=50'],
    ['?workflowId=', '/v1/notifications?workflowId=receipt'],
    ['?transactionId=', `/v1/notifications?transactionId=${data.transactionId}`],
    ['GET /notifications/stats', '/v1/notifications/stats'],
    ['GET /subscribers page 0', '/v1/subscribers'],
    ['GET /subscribers page 5,000', '/v1/subscribers?page=5000'],
    ['GET /topics', '/v1/topics'],
    ['GET /topics/{key}/subscribers page 99', `/v1/topics/${data.topicKey}/subscribers?page=99`],
  ];
  const health = await probe(base, 5);
  const rows: ListRow[] = [];
  try {
    for (const [name, path] of lists) {
      const latencies: number[] = [];
      let totalCount: number | undefined;
      const from = performance.now();
      for (let i = 0; i < SAMPLES; i++) {
        const at = performance.now();
        const res = await fetch(`${base}${path}`, { headers });
        const body = (await res.json()) as { totalCount?: number };
        if (!res.ok) throw new Error(`${path} answered ${res.status}: ${JSON.stringify(body)}`);
        latencies.push(performance.now() - at);
        totalCount = body.totalCount;
      }
      rows.push({ name, medianMs: percentile(latencies, 50), worstMs: Math.max(...latencies), healthWorstMs: await health.worst(from, performance.now()), totalCount });
      log(`${name}: median ${ms(rows.at(-1)!.medianMs)}, /health worst ${ms(rows.at(-1)!.healthWorstMs)}`);
    }
    const four = ['/v1/notifications?page=' + middle, '/v1/notifications?status=failed', '/v1/notifications?channel=chat', '/v1/notifications?workflowId=receipt'];
    const from = performance.now();
    await Promise.all(four.map(async (path) => (await fetch(`${base}${path}`, { headers })).json()));
    const to = performance.now();
    return { rows, fourAtOnce: { wallMs: to - from, healthWorstMs: await health.worst(from, to) } };
  } finally {
    await health.stop();
  }
}

/**
 * Asks `path` up to `rate` times a second, one request at a time on one kept-alive connection, until
 * stopped; answers the latencies. (Sent at a fixed rate regardless, requests that pile up while the
 * server is busy each open a new connection, which a busy server accepts one per turn of its event
 * loop: the wait measured would be the accept queue's.)
 */
function steady(base: string, path: string, headers: Record<string, string>, rate: number) {
  const latencies: number[] = [];
  let running = true;
  const loop = (async () => {
    const every = 1000 / rate;
    while (running) {
      const at = performance.now();
      try {
        await (await fetch(`${base}${path}`, { headers })).arrayBuffer();
      } catch {
        // Counted by its time all the same.
      }
      latencies.push(performance.now() - at);
      const left = every - (performance.now() - at);
      if (left > 0) await sleep(left);
    }
  })();
  return {
    async stop() {
      running = false;
      await loop;
      return { p99: percentile(latencies, 99), worst: Math.max(0, ...latencies), count: latencies.length };
    },
  };
}

async function measureFanout(base: string, headers: Record<string, string>, db: Db, data: LargeData, subscribers: number, workflowId: string) {
  const post = (path: string, body: object) => fetch(`${base}${path}`, { method: 'POST', headers: { ...headers, 'Content-Type': 'application/json' }, body: JSON.stringify(body) });
  const status = async (transactionId: string) => {
    const res = await fetch(`${base}/v1/notifications?transactionId=${transactionId}`, { headers });
    const body = (await res.json()) as { data: Array<{ status: string }> };
    return body.data[0]?.status;
  };
  const completed = async (transactionId: string) =>
    Number((await db('notifications').where({ environment_id: data.environmentId, transaction_id: transactionId, status: 'completed' }).count({ n: '*' }).first())!.n);

  const health = steady(base, '/health', {}, 50);
  const subscriber = steady(base, `/v1/subscribers/${data.subscriberIds[11]}`, headers, 50);
  const unrelated: number[] = [];
  const transactionId = `fanout-${Date.now()}`;
  const started = performance.now();
  const res = await post('/v1/events/trigger', { name: workflowId, to: { type: 'Topic', topicKey: data.topicKey }, transactionId });
  if (res.status !== 201) throw new Error(`the fan-out trigger answered ${res.status}: ${await res.text()}`);
  let done = 0;
  let i = 0;
  while (done < subscribers) {
    // An unrelated trigger to one subscriber: how long until its notification is completed.
    const id = `single-${transactionId}-${i++}`;
    const at = performance.now();
    await post('/v1/events/trigger', { name: workflowId, to: data.subscriberIds[3], transactionId: id });
    while ((await status(id)) !== 'completed' && performance.now() - at < 60_000) await sleep(5);
    unrelated.push(performance.now() - at);
    await sleep(500 - Math.min(500, performance.now() - at));
    done = await completed(transactionId);
    if (performance.now() - started > 600_000) throw new Error(`the fan-out had delivered ${done} of ${subscribers} after 600 s`);
  }
  const seconds = (performance.now() - started) / 1000;
  return {
    seconds,
    perSecond: subscribers / seconds,
    health: await health.stop(),
    subscriber: await subscriber.stop(),
    unrelatedWorstMs: Math.max(...unrelated),
    unrelatedMedianMs: percentile(unrelated, 50),
  };
}

/**
 * The items of a page of large subscribers: ~800 KB of `data` each, small nested values (what parses
 * slowest a byte), 96,000 of them: a request body may hold at most 100,000 values.
 */
const LARGE_ITEMS = 100;
const largeData = () => ({ items: Array.from({ length: 16_000 }, (_, i) => ({ i, b: 'x'.repeat(20), c: [1, 2] })) });

/**
 * A page of 100 subscribers whose `data` is ~800 KB each (an 80 MB answer), in an organization of
 * its own: one at a time (median, worst, /health worst meanwhile), then four at once (wall time,
 * /health worst, the server's peak RSS so far).
 */
async function measureLargeItems(base: string, db: Db, pid: number) {
  const { environmentIds } = await createOrganization(db, { name: 'Large items', plan: 'enterprise', environments: ['production'] });
  const { key } = await createApiKey(db, { environmentId: environmentIds.production, name: 'bench' });
  const headers = { Authorization: `Bearer ${key}` };
  const data = largeData();
  for (let i = 0; i < LARGE_ITEMS; i++) {
    const res = await fetch(`${base}/v1/subscribers`, { method: 'POST', headers: { ...headers, 'Content-Type': 'application/json' }, body: JSON.stringify({ subscriberId: `large-${i}`, data }) });
    if (res.status !== 201) throw new Error(`creating a large subscriber answered ${res.status}: ${await res.text()}`);
  }
  const path = `/v1/subscribers?limit=${LARGE_ITEMS}`;
  const read = async () => {
    const res = await fetch(`${base}${path}`, { headers });
    const bytes = (await res.arrayBuffer()).byteLength;
    if (!res.ok) throw new Error(`${path} answered ${res.status}`);
    return bytes;
  };
  const health = await probe(base, 5);
  try {
    const latencies: number[] = [];
    let bytes = 0;
    const from = performance.now();
    for (let i = 0; i < 5; i++) {
      const at = performance.now();
      bytes = await read();
      latencies.push(performance.now() - at);
    }
    const one = { medianMs: percentile(latencies, 50), worstMs: Math.max(...latencies), healthWorstMs: await health.worst(from, performance.now()), mb: bytes / 1e6 };
    const fourFrom = performance.now();
    await Promise.all([read(), read(), read(), read()]);
    const fourTo = performance.now();
    return { one, four: { wallMs: fourTo - fourFrom, healthWorstMs: await health.worst(fourFrom, fourTo) }, peakRssMb: rssMb(pid, 'VmHWM') };
  } finally {
    await health.stop();
  }
}

/** The process's RSS now (VmRSS), or the largest it has had (VmHWM), in MB. */
function rssMb(pid: number, field: 'VmRSS' | 'VmHWM' = 'VmRSS'): number {
  const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  return Number(new RegExp(`${field}:\\s+(\\d+)`).exec(status)?.[1] ?? Number.NaN) / 1024;
}

async function soak(api: NodeChild, base: string, headers: Record<string, string>, data: LargeData, workflowId: string, minutes: number, rate: number) {
  log(`soak: ${minutes} min at ${rate} requests/s (triggers to one subscriber, 1 in 10 a list)`);
  const triggers = steadyPost(base, headers, data, workflowId, Math.round(rate * 0.9));
  const lists = steady(base, '/v1/notifications', headers, Math.max(1, Math.round(rate * 0.1)));
  const samples: Array<{ minute: number; rssMb: number }> = [];
  const started = Date.now();
  while (Date.now() - started < minutes * 60_000) {
    await sleep(30_000);
    samples.push({ minute: (Date.now() - started) / 60_000, rssMb: rssMb(api.pid) });
    log(`soak: ${samples.at(-1)!.minute.toFixed(1)} min, RSS ${samples.at(-1)!.rssMb.toFixed(0)} MB`);
  }
  const result = { triggers: await triggers.stop(), lists: await lists.stop(), samples };
  await sleep(30_000);
  return { ...result, afterQuietMb: rssMb(api.pid) };
}

function steadyPost(base: string, headers: Record<string, string>, data: LargeData, workflowId: string, rate: number) {
  const latencies: number[] = [];
  let running = true;
  let n = 0;
  const inFlight = new Set<Promise<void>>();
  const loop = (async () => {
    const every = 1000 / rate;
    let next = performance.now();
    while (running) {
      const at = performance.now();
      const request = fetch(`${base}/v1/events/trigger`, {
        method: 'POST',
        headers: { ...headers, 'Content-Type': 'application/json' },
        body: JSON.stringify({ name: workflowId, to: data.subscriberIds[n++ % data.subscriberIds.length], payload: { n } }),
      })
        .then(async (res) => {
          await res.arrayBuffer();
          latencies.push(performance.now() - at);
        })
        .catch(() => {
          latencies.push(performance.now() - at);
        })
        .finally(() => inFlight.delete(request));
      inFlight.add(request);
      next += every;
      const left = next - performance.now();
      if (left > 0) await sleep(left);
    }
    await Promise.all(inFlight);
  })();
  return {
    async stop() {
      running = false;
      await loop;
      return { p99: percentile(latencies, 99), count: latencies.length };
    },
  };
}

/** The database's size on disk: SQLite's pages, PostgreSQL's tables with their indexes (this schema). */
async function sizeBytes(opened: OpenedDb): Promise<number> {
  if (opened.kind === 'sqlite') {
    const [{ page_count: pages }] = (await opened.db.raw('PRAGMA page_count')) as Array<{ page_count: number }>;
    const [{ page_size: size }] = (await opened.db.raw('PRAGMA page_size')) as Array<{ page_size: number }>;
    return pages * size;
  }
  const { rows } = await opened.db.raw(
    `SELECT sum(pg_total_relation_size(c.oid)) AS bytes FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = current_schema() AND c.relkind = 'r'`,
  );
  return Number(rows[0].bytes);
}

/**
 * Retention at 30 days over the seeded 60: the sweep a server makes, run here on the bench's own
 * connection (the server stopped), with this process's event loop delay watched meanwhile.
 */
async function measureRetention(opened: OpenedDb) {
  const before = await sizeBytes(opened);
  const delay = monitorEventLoopDelay({ resolution: 5 });
  delay.enable();
  // On SQLite, as in a process that runs jobs (where the sweep runs): with the log checkpointed on a thread.
  const db = opened.kind === 'sqlite' ? createDb(opened.childUrl, { checkpointInBackground: true }) : opened.db;
  const started = performance.now();
  let swept;
  try {
    swept = await sweepExpired({ db, clock: systemClock, config: { ...loadConfig({}), retentionDays: 30 }, logger: createLogger('silent') });
  } finally {
    if (db !== opened.db) await db.destroy();
  }
  const seconds = (performance.now() - started) / 1000;
  delay.disable();
  if (opened.kind === 'sqlite') await opened.db.raw('PRAGMA wal_checkpoint(TRUNCATE)');
  return { swept, seconds, worstDelayMs: delay.max / 1e6, p99DelayMs: delay.percentile(99) / 1e6, beforeMb: before / 2 ** 20, afterMb: (await sizeBytes(opened)) / 2 ** 20 };
}

/** The large run on one database: seeds it, starts the server, measures, prints a section of Markdown. */
export async function runLarge(opened: OpenedDb, options: LargeOptions): Promise<string> {
  const notifications = options.notifications ?? (options.quick ? 100_000 : 1_000_000);
  const subscribers = options.subscribers ?? (options.quick ? 10_000 : 100_000);
  const { db } = opened;
  log(`${opened.version}: seeding ${notifications.toLocaleString('en-US')} notifications and ${subscribers.toLocaleString('en-US')} subscribers`);
  const seedStarted = performance.now();
  let reported = 0;
  const data = await seedLarge(db, {
    notifications,
    subscribers,
    progress: (done) => {
      if (done - reported >= 100_000) log(`  ${(reported = done).toLocaleString('en-US')} notifications`);
    },
  });
  const seedSeconds = (performance.now() - seedStarted) / 1000;
  if (opened.kind === 'sqlite') await db.raw('PRAGMA wal_checkpoint(TRUNCATE)');
  const bytes = await sizeBytes(opened);
  log(`seeded in ${seedSeconds.toFixed(0)} s; ${(bytes / 2 ** 20).toFixed(0)} MB`);
  const { key } = await createApiKey(db, { environmentId: data.environmentId, name: 'bench' });
  const headers = { Authorization: `Bearer ${key}` };

  const port = await freePort();
  // Retention off: the seeded notifications span 60 days, and a sweep would delete half of them mid-run.
  const env = { DATABASE_URL: opened.childUrl, HOST: '127.0.0.1', PORT: String(port), LOG_LEVEL: 'warn', HERALD_RETENTION_DAYS: '0' };
  const logFile = path.join(os.tmpdir(), `herald-large-${opened.kind}-server.log`);
  fs.rmSync(logFile, { force: true });
  log(`the server's output: ${logFile}`);
  const api = startNode('server', 'dist/src/main.js', [], env, options.nodeArgs, logFile);
  const base = `http://127.0.0.1:${port}`;
  try {
    await waitForHttp(api, `${base}/health`, 120_000);
    // One request of each kind first: the server's first answers compile what they use.
    await fetch(`${base}/v1/notifications`, { headers });
    const lists = await measureLists(base, headers, data, notifications);
    // The workflow the fan-out and the soak trigger, made through the API as a user makes one.
    const made = await fetch(`${base}/v1/workflows`, {
      method: 'POST',
      headers: { ...headers, 'Content-Type': 'application/json' },
      body: JSON.stringify({ name: 'Bench fan-out', steps: [{ type: 'in_app', template: { content: 'Hello {{subscriber.firstName}}' } }] }),
    });
    if (made.status !== 201) throw new Error(`creating the workflow answered ${made.status}: ${await made.text()}`);
    const workflowId = ((await made.json()) as { data: { workflowId: string } }).data.workflowId;
    log('fan-out');
    const fanout = await measureFanout(base, headers, db, data, subscribers, workflowId);
    log(`fan-out: ${fanout.seconds.toFixed(1)} s, /health p99 ${ms(fanout.health.p99)}`);
    const soaked = options.soakMinutes ? await soak(api, base, headers, data, workflowId, options.soakMinutes, options.soakRate ?? 300) : undefined;
    // Last: its answers grow the heap, which the fan-out's and the soak's figures should not see.
    log('large items');
    const large = await measureLargeItems(base, db, api.pid);
    log(`large items: median ${ms(large.one.medianMs)}, /health worst ${ms(large.one.healthWorstMs)}`);

    await api.stop();
    log('retention');
    const retention = await measureRetention(opened);
    log(`retention: ${retention.swept.notifications} notifications in ${retention.seconds.toFixed(1)} s`);

    const lines = [
      `### ${opened.kind === 'sqlite' ? 'SQLite' : 'PostgreSQL'}: ${notifications.toLocaleString('en-US')} notifications, ${subscribers.toLocaleString('en-US')} subscribers`,
      '',
      `${opened.version}; seeded in ${seedSeconds.toFixed(0)} s; ${(bytes / 2 ** 20).toFixed(0)} MB on disk, ` +
        `${((bytes / notifications) / 1024).toFixed(2)} KB a notification (with its event, job, a message for one in three, every index).`,
      '',
      `| request (${SAMPLES} samples each, one at a time) | median | worst | /health worst meanwhile | totalCount |`,
      '|---|---|---|---|---|',
      ...lists.rows.map((row) => `| ${row.name} | ${ms(row.medianMs)} | ${ms(row.worstMs)} | ${ms(row.healthWorstMs)} | ${row.totalCount?.toLocaleString('en-US') ?? ''} |`),
      `| four of these at once (a deep page, status, channel, workflow) | ${ms(lists.fourAtOnce.wallMs)} wall | | ${ms(lists.fourAtOnce.healthWorstMs)} | |`,
      `| GET /subscribers?limit=${LARGE_ITEMS}, each with ~800 KB of data (${large.one.mb.toFixed(0)} MB; 5 samples) | ${ms(large.one.medianMs)} | ${ms(large.one.worstMs)} | ${ms(large.one.healthWorstMs)} | ${LARGE_ITEMS} |`,
      `| four of that at once | ${ms(large.four.wallMs)} wall | | ${ms(large.four.healthWorstMs)} | |`,
      '',
      `The server's peak RSS by then: ${large.peakRssMb.toFixed(0)} MB.`,
      '',
      `Fan-out to ${subscribers.toLocaleString('en-US')} (in-app): ${fanout.seconds.toFixed(1)} s, ${Math.round(fanout.perSecond).toLocaleString('en-US')} deliveries/s. ` +
        `Meanwhile /health p99 ${ms(fanout.health.p99)} (worst ${ms(fanout.health.worst)}, ${fanout.health.count} requests, one at a time, up to 50/s), ` +
        `GET /subscribers/{id} p99 ${ms(fanout.subscriber.p99)} (worst ${ms(fanout.subscriber.worst)}), ` +
        `an unrelated trigger delivered in ${ms(fanout.unrelatedMedianMs)} median, ${ms(fanout.unrelatedWorstMs)} worst (polled every 5 ms).`,
    ];
    lines.push(
      '',
      `Retention, 30 days of the 60 (the sweep a server makes, in the bench process with the server stopped): ` +
        `${retention.swept.notifications.toLocaleString('en-US')} notifications and ${retention.swept.events.toLocaleString('en-US')} events deleted in ${retention.seconds.toFixed(1)} s ` +
        `(${Math.round(retention.swept.notifications / retention.seconds).toLocaleString('en-US')} notifications/s); event loop delay p99 ${ms(retention.p99DelayMs)}, worst ${ms(retention.worstDelayMs)}; ` +
        `database ${retention.beforeMb.toFixed(0)} MB before, ${retention.afterMb.toFixed(0)} MB after${opened.kind === 'sqlite' ? ` (${retention.swept.pages.toLocaleString('en-US')} pages given back)` : ' (PostgreSQL reuses the space; it does not shrink)'}.`,
    );
    if (soaked) {
      lines.push(
        '',
        `Soak, ${options.soakMinutes} min at ${options.soakRate ?? 300} requests/s: trigger p99 ${ms(soaked.triggers.p99)}, list p99 ${ms(soaked.lists.p99)}; ` +
          `RSS (MB) every 30 s: ${soaked.samples.map((s) => s.rssMb.toFixed(0)).join(', ')}; 30 s after: ${soaked.afterQuietMb.toFixed(0)}.`,
      );
    }
    return lines.join('\n');
  } finally {
    await api.stop();
  }
}
