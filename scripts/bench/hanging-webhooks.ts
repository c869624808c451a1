// The slow destinations of `npm run bench`, in their own process: N webhook receivers, each on a
// port of its own (so each is a destination of its own), that hold every POST for `hangMs` before
// answering 200. GET /stats on any of them → {"received": n, "open": n} for all of them.
//
//   node --import tsx scripts/bench/hanging-webhooks.ts <count> <hangMs>
import http from 'node:http';
import type { AddressInfo } from 'node:net';

const count = Number(process.argv[2] ?? 20);
const hangMs = Number(process.argv[3] ?? 30_000);
let received = 0;
let open = 0;
const servers: http.Server[] = [];

function receiver(): http.Server {
  return http.createServer((req, res) => {
    if (req.method === 'GET') {
      res.writeHead(200, { 'Content-Type': 'application/json' }).end(JSON.stringify({ received, open }));
      return;
    }
    received++;
    open++;
    res.on('close', () => open--);
    req.resume();
    const timer = setTimeout(() => res.writeHead(200, { 'Content-Type': 'text/plain' }).end('ok'), hangMs);
    res.on('close', () => clearTimeout(timer));
  });
}

const ports: number[] = [];
for (let i = 0; i < count; i++) {
  const server = receiver();
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  ports.push((server.address() as AddressInfo).port);
}
process.stdout.write(`hanging webhooks listening on ${ports.join(',')}\n`);
process.on('SIGTERM', () => {
  for (const server of servers) {
    server.close();
    server.closeAllConnections();
  }
  process.exit(0);
});
