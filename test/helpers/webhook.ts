import http from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * A chat webhook receiver on 127.0.0.1 that answers after `delayMs`, recording the delivery id of
 * every request it received (including those whose sender died before the answer).
 */
export async function startSlowWebhook(delayMs: number) {
  const deliveries: string[] = [];
  let answered = 0;
  const server = http.createServer((req, res) => {
    deliveries.push(String(req.headers['x-herald-delivery-id']));
    req.resume();
    req.on('end', () =>
      setTimeout(() => {
        answered++;
        res.writeHead(200, { 'Content-Type': 'text/plain' }).end('ok');
      }, delayMs),
    );
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`,
    deliveries,
    answered: () => answered,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
