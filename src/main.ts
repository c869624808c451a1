import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { loadConfig } from './config.js';
import { createLogger } from './logger.js';
import { createDb, migrate } from './db/knex.js';
import { bootstrap } from './accounts/bootstrap.js';
import { createApp } from './app.js';
import { systemClock } from './clock.js';

const SHUTDOWN_GRACE_MS = 10_000;

async function main(): Promise<void> {
  const config = loadConfig();
  const logger = createLogger(config.logLevel);
  const db = createDb(config.databaseUrl);
  await migrate(db);
  const { createdKey } = await bootstrap(db, { plan: config.defaultPlan, apiKey: config.apiKey });
  const app = await createApp({ db, clock: systemClock, config, logger }, { precompile: true });

  const server: Server = app.listen(config.port, config.host, () => {
    const { port } = server.address() as AddressInfo;
    logger.info({ host: config.host, port }, 'Herald is listening');
    if (createdKey) {
      // Printed plainly, not only logged: this is the one time the key can be seen.
      process.stdout.write(
        `\nHerald created your first API key. It is shown only now; keep it somewhere safe:\n\n  ${createdKey}\n\n` +
          `Try: curl -H "Authorization: Bearer ${createdKey}" http://localhost:${port}/v1/subscribers\n\n`,
      );
    }
  });

  // SIGTERM: stop accepting, let requests in flight finish, then close the database and exit 0.
  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, 'shutting down');
    const force = setTimeout(() => {
      logger.error('requests still running after the grace period; exiting anyway');
      process.exit(1);
    }, SHUTDOWN_GRACE_MS);
    force.unref();
    server.close(() => {
      db.destroy().then(() => process.exit(0), () => process.exit(1));
    });
    server.closeIdleConnections();
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
}

main().catch((err: unknown) => {
  process.stderr.write(`Herald could not start: ${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});
