// The baseline of `npm run bench`: a bare express 5 app in its own process. POST routes parse the
// same JSON body as Herald (same size limit) and answer 201 with a body of the size Herald answers;
// GET routes answer 200 with the JSON Herald answers. No key check, no validation, no database:
// what the framework and the loopback cost on this machine, the ceiling Herald is compared with.
//
//   node --import tsx scripts/bench/baseline.ts <routes.json>
//   routes.json: { "port": 0, "host": "127.0.0.1", "routes": [{ "method": "POST", "path": "/v1/...", "status": 201, "body": {...} }] }
import fs from 'node:fs';
import type { AddressInfo } from 'node:net';
import express from 'express';

interface Route {
  method: 'GET' | 'POST';
  path: string;
  status: number;
  body: unknown;
}

const config = JSON.parse(fs.readFileSync(process.argv[2], 'utf8')) as { port: number; host: string; routes: Route[] };
const app = express();
app.disable('x-powered-by');
const json = express.json({ limit: '1mb' });
for (const route of config.routes) {
  if (route.method === 'POST') {
    app.post(route.path, json, (req, res) => {
      if (req.body === undefined) res.status(400).end();
      else res.status(route.status).json(route.body);
    });
  } else {
    app.get(route.path, (_req, res) => {
      res.status(route.status).json(route.body);
    });
  }
}
app.get('/health', (_req, res) => {
  res.json({ status: 'ok' });
});
const server = app.listen(config.port, config.host, () => {
  process.stdout.write(`baseline listening on ${(server.address() as AddressInfo).port}\n`);
});
process.on('SIGTERM', () => {
  server.close(() => process.exit(0));
  server.closeIdleConnections();
});
