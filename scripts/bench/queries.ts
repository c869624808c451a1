// How many SQL statements each benchmarked operation issues, and which: the app and a JobRunner in
// this process on a fresh database (SQLite, or a schema of DATABASE_URL=postgres://…), with knex's
// `query` event counting. Evidence for the bench's findings; no timing here. On SQLite, statements
// that bypass knex are not counted: the reads selectRows runs (a trigger's workflow and recipients,
// a subscriber by id, a fan-out batch's subscribers and preferences), and the multi-row inserts and
// savepoints of a transaction (runInSqliteTransaction). Run it on PostgreSQL to see every statement.
//
//   npx tsx scripts/bench/queries.ts [--members N] [--chat N] [--sql]
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import { parseArgs } from 'node:util';
import { randomBytes } from 'node:crypto';
import { createDb, isPostgresUrl, migrate, type Db } from '../../src/db/knex.js';
import { loadConfig } from '../../src/config.js';
import { createLogger } from '../../src/logger.js';
import { systemClock } from '../../src/clock.js';
import { createApp } from '../../src/app.js';
import { JobRunner } from '../../src/engine/runner.js';
import { createApiKey, createOrganization } from '../../src/db/repos/accounts.js';
import { addMembers, findTopicRow, insertTopic } from '../../src/db/repos/topics.js';
import { insertSubscriber } from '../../src/db/repos/subscribers.js';

const { values } = parseArgs({ options: { members: { type: 'string', default: '1000' }, chat: { type: 'string', default: '100' }, sql: { type: 'boolean', default: false } } });
const MEMBERS = Number(values.members);
const CHAT = Number(values.chat);

const pgUrl = process.env.DATABASE_URL && isPostgresUrl(process.env.DATABASE_URL) ? process.env.DATABASE_URL : undefined;
let db: Db;
let cleanup: () => Promise<void>;
if (pgUrl) {
  const schema = `benchq_${randomBytes(5).toString('hex')}`;
  const admin = createDb(pgUrl);
  await admin.raw(`CREATE SCHEMA ${schema}`);
  await admin.destroy();
  db = createDb(pgUrl, { schema });
  cleanup = async () => {
    await db.raw(`DROP SCHEMA ${schema} CASCADE`);
    await db.destroy();
  };
} else {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'herald-queries-'));
  db = createDb(`sqlite:${path.join(dir, 'herald.db')}`);
  cleanup = async () => {
    await db.destroy();
    fs.rmSync(dir, { recursive: true, force: true });
  };
}
await migrate(db);

// Each statement with the time from knex handing it to the driver to the answer (the driver's own
// time, prepare included; knex's query building before that is not in it).
// (COMMIT is counted but not timed: knex sends no response event for it. On SQLite a transaction's
// BEGIN goes to the driver without knex (db/sqlite.ts, beginImmediate) and is not counted.)
const statements: Array<{ sql: string; ms: number }> = [];
const started = new Map<string, { entry: { sql: string; ms: number }; at: bigint }>();
db.on('query', (q: { sql: string; __knexQueryUid: string }) => {
  const entry = { sql: q.sql, ms: 0 };
  statements.push(entry);
  started.set(q.__knexQueryUid, { entry, at: process.hrtime.bigint() });
});
db.on('query-response', (_r: unknown, q: { __knexQueryUid: string }) => {
  const s = started.get(q.__knexQueryUid);
  if (!s) return;
  started.delete(q.__knexQueryUid);
  s.entry.ms = Number(process.hrtime.bigint() - s.at) / 1e6;
});
const take = () => statements.splice(0, statements.length);

const { environmentIds } = await createOrganization(db, { name: 'Q', plan: 'enterprise', environments: ['development'] });
const env = environmentIds.development;
const { key } = await createApiKey(db, { environmentId: env, name: 'q' });
const now = new Date();
for (let i = 0; i < Math.max(MEMBERS, 150); i++) await insertSubscriber(db, env, { subscriberId: `s${i}`, firstName: `F${i}`, email: `s${i}@example.com` }, now);
await insertTopic(db, env, { topicKey: 'everyone', name: 'Everyone' }, now);
const keys = (await db('subscribers').where({ environment_id: env }).orderBy('id').limit(MEMBERS).select('id')).map((r: { id: string }) => r.id);
await addMembers(db, (await findTopicRow(db, env, 'everyone'))!.id, keys, now);

const config = { ...loadConfig({ HERALD_ALLOWED_NETWORKS: '127.0.0.1/32' }), logLevel: 'warn' };
const deps = { db, clock: systemClock, config, logger: createLogger('warn') };
const app = await createApp(deps);
const server = app.listen(0, '127.0.0.1');
await new Promise((resolve) => server.once('listening', resolve));
const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
const headers = { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json' };
const call = async (method: string, pathname: string, body?: unknown) => {
  const res = await fetch(`${base}${pathname}`, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await res.text();
  if (res.status >= 300) throw new Error(`${method} ${pathname}: ${res.status} ${text}`);
  return JSON.parse(text || '{}');
};
const content = 'Hello {{subscriber.firstName}}: {{payload.title}}';
await call('POST', '/workflows', { workflowId: 'bench-in-app', name: 'Bench in-app', steps: [{ type: 'in_app', template: { subject: 'Bench', content } }] });
await call('POST', '/workflows', { workflowId: 'bench-chat', name: 'Bench chat', steps: [{ type: 'chat', template: { content } }] });
// Warm every code path once (validators compiled, caches filled), then count.
const requests: Array<[string, string, string, unknown?]> = [
  ['1. trigger', 'POST', '/events/trigger', { name: 'bench-in-app', to: 's0', payload: { title: 'x' } }],
  ['2a. GET subscriber', 'GET', '/subscribers/s42'],
  ['2b. GET subscribers?limit=100', 'GET', '/subscribers?limit=100'],
  ['3. bulk (100 events)', 'POST', '/events/trigger/bulk', { events: Array.from({ length: 100 }, (_, i) => ({ name: 'bench-in-app', to: `s${i}`, payload: { title: 'x' } })) }],
];
for (const [, method, pathname, body] of requests) await call(method, pathname, body);
take();

const report = (label: string, sql: Array<{ sql: string; ms: number }>, per = 1, unit = 'request') => {
  const byShape = new Map<string, { n: number; ms: number }>();
  let total = 0;
  for (const s of sql) {
    const shape = s.sql
      .replace(/\s+/g, ' ')
      .replace(/\((\?|\$\d+)(, ?(\?|\$\d+))*\)(, ?\((\?|\$\d+)(, ?(\?|\$\d+))*\))*/g, '(?…)')
      .replace(/ select (\? as `\w+`, )+.*? union all .*$/, ' select … union all …')
      .slice(0, 130);
    const entry = byShape.get(shape) ?? { n: 0, ms: 0 };
    entry.n++;
    entry.ms += s.ms;
    total += s.ms;
    byShape.set(shape, entry);
  }
  const perUnit = per > 1 ? `; per ${unit}: ${(sql.length / per).toFixed(2)} statements, ${((total / per) * 1000).toFixed(0)} µs` : '';
  process.stdout.write(`\n${label}: ${sql.length} statements, ${total.toFixed(1)} ms in the driver${perUnit}\n`);
  if (values.sql || per > 1 || sql.length <= 20) {
    for (const [shape, { n, ms }] of [...byShape].sort((a, b) => b[1].ms - a[1].ms).slice(0, 25)) {
      process.stdout.write(`  ${String(n).padStart(6)} × ${ms.toFixed(1).padStart(8)} ms  ${shape}\n`);
    }
  }
};

process.stdout.write(
  `Database: ${pgUrl ? 'PostgreSQL' : 'SQLite'}; statements as knex issues them (COMMIT included; BEGIN too on PostgreSQL), with the time each spent in the driver\n`,
);
const REPEAT = 50;
for (const [label, method, pathname, body] of requests) {
  for (let i = 0; i < REPEAT; i++) await call(method, pathname, body);
  report(label, take(), REPEAT);
}

// The worker: the backlog of those triggers first, then a fan-out, then chat jobs.
await db('jobs').whereIn('status', ['pending', 'queued', 'delayed']).update({ status: 'canceled' });
take();
const runner = new JobRunner(deps);
const answer = await call('POST', '/events/trigger', { name: 'bench-in-app', to: { type: 'Topic', topicKey: 'everyone' }, payload: { title: 'x' } });
take();
await runner.runUntilIdle();
const delivered = Number((await db('messages').where({ transaction_id: answer.data.transactionId }).count({ n: '*' }).first())!.n);
report(`4. fan-out to ${MEMBERS} (worker side)`, take(), delivered, 'delivery');

const hook = (await import('node:http')).createServer((req, res) => {
  req.resume();
  req.on('end', () => res.writeHead(200).end('ok'));
});
await new Promise<void>((resolve) => hook.listen(0, '127.0.0.1', resolve));
// As the bench's chat row: no send limits, so each job is one send (Slack's one a second would defer all but the first).
await call('POST', '/integrations', { providerId: 'slack', sendLimits: { perDestination: [] } });
await call('PUT', '/subscribers/s0/credentials', { providerId: 'slack', credentials: { webhookUrl: `http://127.0.0.1:${(hook.address() as AddressInfo).port}/hook` } });
for (let sent = 0; sent < CHAT; sent += 100) {
  await call('POST', '/events/trigger/bulk', { events: Array.from({ length: Math.min(100, CHAT - sent) }, () => ({ name: 'bench-chat', to: 's0', payload: { title: 'x' } })) });
}
take();
await runner.runUntilIdle();
report(`5. chat jobs (worker side)`, take(), CHAT, 'job');

hook.close();
server.close();
await cleanup();
