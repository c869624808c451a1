import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Webhook } from 'standardwebhooks';
import type { ValidateFunction } from 'ajv';
import { createAjv } from '../../src/json-schema.js';
import { startHttpPeer } from './peers.js';
import { spec, type Node } from './spec.js';

let eventValidators: Map<string, ValidateFunction> | undefined;

/**
 * Every way a webhook body breaks the contract: its type is not one the contract's `webhooks`
 * document, or it does not match that event's schema.
 */
export function webhookEventViolations(event: { type: string }): string[] {
  if (!eventValidators) {
    const ajv = createAjv();
    ajv.addSchema({ $id: 'contract', components: spec.components });
    eventValidators = new Map();
    for (const webhook of Object.values(spec.webhooks as Record<string, Node>)) {
      const ref = webhook.post.requestBody.content['application/json'].schema.$ref as string;
      const type = ref.split('/').reduce<Node>((at, key) => (key === '#' ? spec : at[key]), spec).properties.type.const as string;
      eventValidators.set(type, ajv.compile({ $ref: `contract${ref}` }));
    }
  }
  const { type } = event;
  const validate = eventValidators.get(type);
  if (!validate) return [`${type}: not an event the contract documents`];
  return validate(event) ? [] : (validate.errors ?? []).map((e) => `${type}: body${e.instancePath} ${e.message}`);
}

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

/**
 * A webhook receiver on 127.0.0.1 that holds every request open: for `delayMs` before answering
 * `status` (200 by default), or, without a delay, never. It counts the requests it holds at once
 * (`peak`), and `close()` drops the ones still held, so that a sender waiting on them ends now.
 */
export async function startHangingWebhook(options: { delayMs?: number; status?: number } = {}) {
  const deliveries: string[] = [];
  let open = 0;
  let peak = 0;
  const server = http.createServer((req, res) => {
    deliveries.push(String(req.headers['x-herald-delivery-id']));
    open++;
    peak = Math.max(peak, open);
    res.on('close', () => open--);
    req.resume();
    if (options.delayMs !== undefined) {
      const timer = setTimeout(() => res.writeHead(options.status ?? 200, { 'Content-Type': 'text/plain' }).end('ok'), options.delayMs);
      res.on('close', () => clearTimeout(timer));
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`,
    deliveries,
    /** Requests held open right now, and the most at once. */
    open: () => open,
    peak: () => peak,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

/**
 * A receiver of Herald's own webhooks on 127.0.0.1 (startHttpPeer), checking each request as a
 * customer would, with the official `standardwebhooks` library: `verified(secret)` answers the
 * events whose signature that secret verifies (and throws at the first one it does not).
 */
export async function startWebhookReceiver(respond?: Parameters<typeof startHttpPeer>[0]) {
  const peer = await startHttpPeer(respond);
  return {
    ...peer,
    /** The bodies of the requests received, each checked with `secret` and against the contract's schema of its event. */
    verified(secret: string): Array<{ type: string; timestamp: string; environmentId: string; data: Record<string, unknown> }> {
      const webhook = new Webhook(secret);
      return peer.requests.map((request) => {
        const event = webhook.verify(request.body, request.headers as Record<string, string>) as { type: string; timestamp: string; environmentId: string; data: Record<string, unknown> };
        const violations = webhookEventViolations(event);
        if (violations.length > 0) throw new Error(`The event breaks the contract:\n${violations.join('\n')}`);
        return event;
      });
    },
    /** The event types received, in order. */
    types(): string[] {
      return peer.requests.map((request) => (request.json() as { type: string }).type);
    },
  };
}
