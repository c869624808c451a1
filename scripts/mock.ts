// npm run mock: a server that answers every operation of the contract from its examples, with the
// real request validation and error body, so a frontend can start before the backend exists.
// PORT (default 4010) and HOST (default 0.0.0.0) choose where it listens.
import type { AddressInfo } from 'node:net';
import { createLogger } from '../src/logger.js';
import { createMockApp } from '../src/http/mock.js';

const logger = createLogger(process.env.LOG_LEVEL ?? 'info');
const app = await createMockApp(logger);
const server = app.listen(Number(process.env.PORT ?? 4010), process.env.HOST ?? '0.0.0.0', () => {
  const { port } = server.address() as AddressInfo;
  logger.info({ port }, 'Herald mock server is listening');
  process.stdout.write(`\nMock API on http://localhost:${port}/v1 (any "Authorization: Bearer <key>" works)\n\n`);
});
const stop = () => server.close(() => process.exit(0));
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
