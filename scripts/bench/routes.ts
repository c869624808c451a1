// What the bench's stand-in servers (the baseline, the stack floor) answer, and how they serve it.
import fs from 'node:fs';
import type { AddressInfo } from 'node:net';
import type { Express } from 'express';

/** One route of the routes file: the body Herald answered, captured by the bench. */
export interface Route {
  method: 'GET' | 'POST';
  path: string;
  status: number;
  body: unknown;
}

export interface RoutesFile {
  port: number;
  host: string;
  routes: Route[];
}

/** The routes file named on the command line. */
export function readRoutes(): RoutesFile {
  return JSON.parse(fs.readFileSync(process.argv[2], 'utf8')) as RoutesFile;
}

/** Listens where the routes file says, says so on stdout, and closes on SIGTERM. */
export function serve(app: Express, config: RoutesFile, name: string): void {
  const server = app.listen(config.port, config.host, () => {
    process.stdout.write(`${name} listening on ${(server.address() as AddressInfo).port}\n`);
  });
  process.on('SIGTERM', () => {
    server.close(() => process.exit(0));
    server.closeIdleConnections();
  });
}
