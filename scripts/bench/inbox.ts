// The inbox rows of `npm run bench`: many open event streams and what reaches them.
//   streams:        N browsers hold GET /v1/inbox/events (subscriber tokens), then one trigger to a
//                   topic of all of them: the time until the last stream has its
//                   notification.created, and the API process's memory per open stream.
//   stream-latency: one stream per subscriber of a small set, triggers at a fixed rate to them one
//                   at a time: trigger sent → its notification.created received, p50 and p99.
import fs from 'node:fs';
import http from 'node:http';

export interface StreamClient {
  /** When (ms since the epoch) each `notification.created` arrived, with its data. */
  onCreated(listener: (data: { item: { body: string } }, at: number) => void): void;
  close(): void;
}

/** Opens one SSE stream with plain node:http (a fetch per stream costs the load generator more than the server). */
export function openStream(base: string, token: string): Promise<StreamClient> {
  return new Promise((resolve, reject) => {
    const listeners: Array<(data: { item: { body: string } }, at: number) => void> = [];
    const req = http.get(`${base}/v1/inbox/events`, { agent: false, headers: { Authorization: `Bearer ${token}`, Accept: 'text/event-stream' } }, (res) => {
      if (res.statusCode !== 200) {
        reject(new Error(`GET /v1/inbox/events answered ${res.statusCode}`));
        res.resume();
        return;
      }
      res.setEncoding('utf8');
      let buffer = '';
      res.on('data', (chunk: string) => {
        const at = Date.now();
        buffer += chunk;
        let end: number;
        while ((end = buffer.indexOf('\n\n')) !== -1) {
          const block = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          if (!block.includes('event: notification.created')) continue;
          const data = block.split('\n').find((line) => line.startsWith('data: '));
          if (data) for (const listener of listeners) listener(JSON.parse(data.slice(6)), at);
        }
      });
      res.on('error', () => undefined);
      resolve({ onCreated: (listener) => listeners.push(listener), close: () => req.destroy() });
    });
    req.on('error', reject);
  });
}

/** Mints subscriber tokens through the API, `concurrency` at a time. */
export async function mintTokens(base: string, headers: Record<string, string>, subscriberIds: string[], concurrency = 32): Promise<string[]> {
  const tokens: string[] = new Array(subscriberIds.length);
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < subscriberIds.length) {
        const i = next++;
        const res = await fetch(`${base}/v1/subscribers/${subscriberIds[i]}/inbox-tokens`, { method: 'POST', headers, body: JSON.stringify({ expiresIn: 86_400 }) });
        if (res.status !== 201) throw new Error(`inbox-tokens answered ${res.status}: ${await res.text()}`);
        tokens[i] = ((await res.json()) as { data: { token: string } }).data.token;
      }
    }),
  );
  return tokens;
}

/** Opens streams `concurrency` at a time (each waits for its first bytes). */
export async function openStreams(base: string, tokens: string[], concurrency = 100): Promise<StreamClient[]> {
  const streams: StreamClient[] = new Array(tokens.length);
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < tokens.length) {
        const i = next++;
        streams[i] = await openStream(base, tokens[i]);
      }
    }),
  );
  return streams;
}

/** The resident memory of a process now, in MB (not its peak). */
export function rssMb(pid: number): number {
  const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? NaN);
  return kb / 1024;
}

export function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))];
}

/**
 * Sends `total` triggers at `rate` a second over at most `connections` kept-alive connections (as a
 * load generator at a fixed rate does), calling `sent` as each goes out; answers how many failed.
 */
export async function pacedTriggers(
  base: string,
  headers: Record<string, string>,
  total: number,
  rate: number,
  body: (n: number) => object,
  sent: (n: number, at: number) => void,
  connections = 50,
): Promise<{ failed: number; seconds: number }> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: connections });
  const url = new URL(`${base}/v1/events/trigger`);
  let failed = 0;
  const started = Date.now();
  const inFlight: Array<Promise<void>> = [];
  for (let n = 0; n < total; n++) {
    const wait = started + (n * 1000) / rate - Date.now();
    if (wait > 1) await new Promise((resolve) => setTimeout(resolve, wait));
    const text = JSON.stringify(body(n));
    sent(n, Date.now());
    inFlight.push(
      new Promise<void>((resolve) => {
        const req = http.request(url, { method: 'POST', agent, headers: { ...headers, 'Content-Length': Buffer.byteLength(text) } }, (res) => {
          if (res.statusCode !== 201) failed++;
          res.resume();
          res.on('end', resolve);
        });
        req.on('error', () => {
          failed++;
          resolve();
        });
        req.end(text);
      }),
    );
  }
  await Promise.all(inFlight);
  agent.destroy();
  return { failed, seconds: (Date.now() - started) / 1000 };
}
