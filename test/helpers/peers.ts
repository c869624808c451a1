import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { SMTPServer } from 'smtp-server';

/**
 * The test suite's peers listen on 127.0.0.1, an address the outbound guard refuses by default:
 * every server a test starts (in-process or spawned) allows this one network and no other.
 */
export const LOCAL_PEERS = '127.0.0.1/32';
export const LOCAL_PEERS_ENV = { HERALD_ALLOWED_NETWORKS: LOCAL_PEERS };

export interface ReceivedRequest {
  method: string;
  path: string;
  headers: http.IncomingHttpHeaders;
  body: string;
  json(): unknown;
}

interface Answer {
  status: number;
  body?: string;
  headers?: Record<string, string>;
}

/**
 * A real HTTP server on 127.0.0.1 standing in for a provider or a webhook receiver. It records every
 * request; `respond` decides each answer (by default 200 with `{"ok":true}`), at once or later.
 */
export async function startHttpPeer(respond?: (request: ReceivedRequest, index: number) => Answer | Promise<Answer>) {
  const requests: ReceivedRequest[] = [];
  const server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (chunk) => (body += chunk));
    req.on('end', () => {
      const request: ReceivedRequest = { method: req.method!, path: req.url!, headers: req.headers, body, json: () => JSON.parse(body) };
      requests.push(request);
      void Promise.resolve(respond?.(request, requests.length - 1)).then((answer = { status: 200, body: '{"ok":true}' }) => {
        res.writeHead(answer.status, { 'Content-Type': 'application/json', ...answer.headers }).end(answer.body ?? '');
      });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url,
    requests,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

export interface ReceivedMail {
  from: string;
  to: string[];
  raw: string;
  subject: string;
}

/** A real SMTP server on 127.0.0.1 (no TLS, any login) that keeps every message it accepts; it may wait `greetAfterMs` before its greeting. */
export async function startSmtpPeer(options: { reject?: (index: number) => { code: number; message: string } | undefined; greetAfterMs?: number } = {}) {
  const mails: ReceivedMail[] = [];
  let attempts = 0;
  const server = new SMTPServer({
    secure: false,
    disabledCommands: ['STARTTLS'],
    authOptional: true,
    onAuth: (_auth, _session, callback) => callback(null, { user: 'any' }),
    onConnect: (_session, callback) => (options.greetAfterMs ? setTimeout(callback, options.greetAfterMs) : callback()),
    onData(stream, session, callback) {
      let raw = '';
      stream.on('data', (chunk: Buffer) => (raw += chunk.toString('utf8')));
      stream.on('end', () => {
        const refusal = options.reject?.(attempts++);
        if (refusal) return callback(Object.assign(new Error(refusal.message), { responseCode: refusal.code }));
        const subject = /^Subject: (.*)$/m.exec(raw)?.[1] ?? '';
        mails.push({
          from: session.envelope.mailFrom ? session.envelope.mailFrom.address : '',
          to: session.envelope.rcptTo.map((r) => r.address),
          raw,
          subject,
        });
        callback();
      });
    },
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.server.address() as AddressInfo).port;
  return { port, mails, close: () => new Promise<void>((resolve) => server.close(() => resolve())) };
}
