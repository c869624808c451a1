import type { AddressInfo } from 'node:net';
import { parseArgs } from 'node:util';
import v8 from 'node:v8';
import { loadConfig, StartError } from './config.js';
import { createLogger } from './logger.js';
import { checkedDatabaseUrl, createDb, migrate } from './db/knex.js';
import { bootstrap } from './accounts/bootstrap.js';
import { settleSecret } from './accounts/secret.js';
import { systemClock } from './clock.js';
import { JobRunner } from './engine/runner.js';
import { RetentionSweeper } from './engine/retention.js';
import { listenForSubscriptionChanges } from './db/webhook-subscriptions.js';
import { shareQueuedWork } from './db/work-queued.js';
import type { Deps } from './deps.js';
import type { HeraldServer } from './http/server.js';

const SHUTDOWN_GRACE_MS = 30_000;

// V8 lets the old generation grow to up to four times what survived its last full collection
// before it collects again: under load that let the API grow to several times its live data.
// Growing by half keeps the process small for no measurable CPU (a full collection of this heap
// is short, and incremental). A --heap-growing-percent given to node wins.
const HEAP_GROWING_PERCENT = 50;
if (!process.execArgv.some((arg) => arg.startsWith('--heap-growing-percent') || arg.startsWith('--heap_growing_percent'))) {
  v8.setFlagsFromString(`--heap-growing-percent=${HEAP_GROWING_PERCENT}`);
}
const ROLES = ['all', 'api', 'worker'] as const;
type Role = (typeof ROLES)[number];

/**
 * `npm start` runs the API and the job runner in one process. `--role api` serves HTTP only and
 * `--role worker` runs jobs only; run any number of each against one PostgreSQL database.
 */
async function main(): Promise<void> {
  const { values } = parseArgs({ options: { role: { type: 'string', default: 'all' } } });
  const role = values.role as Role;
  if (!ROLES.includes(role)) throw new Error(`--role must be one of ${ROLES.join(', ')}, not "${values.role}"`);

  const config = loadConfig();
  const logger = createLogger(config.logLevel);
  // A process that runs jobs writes in batches: its SQLite checkpoints run beside them.
  const db = createDb(checkedDatabaseUrl(config.databaseUrl), {
    checkpointInBackground: role !== 'api',
    poolMax: config.postgresPoolMax,
    preparedStatements: config.postgresPreparedStatements,
    synchronous: config.sqliteSynchronous,
    logger,
  });
  await migrate(db);
  config.secret = await settleSecret(config, db, logger);
  const deps: Deps = { db, clock: systemClock, config, logger };
  // Every process records webhook events: each hears of the others' changes to endpoints.
  const stopListening = await listenForSubscriptionChanges(db, (err) => logger.warn({ err }, 'listening for webhook endpoint changes failed; reconnecting'));
  const runner = role === 'api' ? undefined : new JobRunner(deps);
  runner?.start();
  // PostgreSQL: what an API-only process queues wakes the other processes' runners at once.
  const sharedWork = shareQueuedWork(db, runner ? 'hear' : 'announce', (err) => logger.warn({ err }, 'sharing queued work with other processes failed'));
  // Processes that run jobs also delete what is past its retention.
  const sweeper = role === 'api' ? undefined : new RetentionSweeper(deps);
  sweeper?.start();

  let served: HeraldServer | undefined;
  let closeStreams: (() => Promise<void>) | undefined;
  // Installed before the server listens: a signal that came between would end the process at once.
  // SIGTERM: stop accepting connections and claiming jobs, let those under way finish (a job's lease
  // is given back if it had not started), close the database, exit 0. Kept-alive connections are
  // drained, not reset: each is answered once more with `Connection: close`, and those still idle
  // after IDLE_GRACE_MS are closed (http/server.ts).
  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, 'shutting down');
    setTimeout(() => {
      logger.error('work still under way after the grace period; exiting anyway');
      process.exit(1);
    }, SHUTDOWN_GRACE_MS).unref();
    // Open inbox streams never end by themselves: end them, so the drain can finish (clients
    // reconnect elsewhere with Last-Event-ID).
    await closeStreams?.();
    await Promise.all([served?.drain(), runner?.stop(), sweeper?.stop()]);
    await stopListening();
    await sharedWork.close();
    await db.destroy();
    process.exit(0);
  };
  process.on('SIGTERM', () => void stop('SIGTERM'));
  process.on('SIGINT', () => void stop('SIGINT'));

  if (role !== 'worker') {
    const { createdKey } = await bootstrap(db, { plan: config.defaultPlan, apiKey: config.apiKey });
    if (createdKey) {
      // Printed plainly, not only logged, and before anything else can fail: this is the one time
      // the key can be seen.
      process.stdout.write(`\nHerald created your first API key. It is shown only now; keep it somewhere safe:\n\n  ${createdKey}\n\n`);
    }
    // Loaded only here: a worker has no use for the HTTP stack and the contract's validators.
    const { createApp } = await import('./app.js');
    const { createServer } = await import('./http/server.js');
    const app = await createApp(deps, { precompile: true });
    served = createServer(app);
    closeStreams = () => (app.locals.inboxHub as { close(): Promise<void> }).close();
    const { server } = served;
    await new Promise<void>((listening, failed) => {
      const refused = (err: NodeJS.ErrnoException) => failed(new StartError(listenRefusal(config.host, config.port, err)));
      server.once('error', refused);
      server.listen(config.port, config.host, () => {
        server.off('error', refused);
        listening();
      });
    });
    const { port } = server.address() as AddressInfo;
    logger.info({ host: config.host, port, role }, 'Herald is listening');
    if (createdKey) process.stdout.write(`Try: curl -H "Authorization: Bearer ${createdKey}" http://localhost:${port}/v1/subscribers\n\n`);
  } else {
    logger.info({ role }, 'Herald worker is running jobs');
  }
}

/** Why the server cannot listen where it was told to, in the operator's words. */
function listenRefusal(host: string, port: number, err: NodeJS.ErrnoException): string {
  const where = `${host}:${port}`;
  const reasons: Record<string, string> = {
    EADDRINUSE: `${where} is in use by another process`,
    EADDRNOTAVAIL: `HOST ${host} is not an address of this machine`,
    ENOTFOUND: `HOST ${host} is not an address of this machine`,
    EACCES: `${where} needs privileges this process lacks`,
  };
  return `cannot listen on ${where}: ${reasons[err.code ?? ''] ?? err.message} (set PORT and HOST)`;
}

main().catch((err: unknown) => {
  // A reason for the operator is said as it is; anything else with where it came from.
  const why = err instanceof StartError ? err.message : err instanceof Error ? err.stack : String(err);
  process.stderr.write(`Herald could not start: ${why}\n`);
  process.exit(1);
});
