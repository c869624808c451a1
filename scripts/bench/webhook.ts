// The chat webhook of `npm run bench`, in its own process: answers every POST at once with 200
// "ok" (as Slack's incoming webhooks do) and counts them; GET /stats → {"received": n}.
//
//   node --import tsx scripts/bench/webhook.ts <port>
import http from 'node:http';
import type { AddressInfo } from 'node:net';

let received = 0;
const server = http.createServer((req, res) => {
  if (req.method === 'GET') {
    res.writeHead(200, { 'Content-Type': 'application/json' }).end(JSON.stringify({ received }));
    return;
  }
  req.resume();
  req.on('end', () => {
    received++;
    res.writeHead(200, { 'Content-Type': 'text/plain' }).end('ok');
  });
});
server.keepAliveTimeout = 30_000;
server.listen(Number(process.argv[2] ?? 0), '127.0.0.1', () => {
  process.stdout.write(`webhook listening on ${(server.address() as AddressInfo).port}\n`);
});
process.on('SIGTERM', () => {
  server.close(() => process.exit(0));
  server.closeAllConnections();
});
