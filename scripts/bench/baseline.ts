// The baseline of `npm run bench`: a bare express 5 app in its own process. POST routes parse the
// same JSON body as Herald (same size limit) and answer 201 with a body of the size Herald answers;
// GET routes answer 200 with the JSON Herald answers. No key check, no validation, no database:
// what the framework and the loopback cost on this machine, the ceiling Herald is compared with.
//
//   node dist/bench/baseline.js <routes.json>     (the bench compiles it)
//   routes.json: { "port": 0, "host": "127.0.0.1", "routes": [{ "method": "POST", "path": "/v1/...", "status": 201, "body": {...} }] }
import express from 'express';
import { readRoutes, serve } from './routes.js';

const config = readRoutes();
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
serve(app, config, 'baseline');
