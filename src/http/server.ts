// The HTTP server around the app: what Node answers by itself (a request it cannot parse) carries
// the error body too, a body still arriving after its answer is read only so far, and a SIGTERM
// drains the connections instead of resetting them.
import http, { STATUS_CODES, type Server, type ServerResponse } from 'node:http';
import net, { type Socket } from 'node:net';
import type { Express } from 'express';
import { errorBody } from './errors.js';
import { BODY_LIMIT, closeAfterUnreadBody } from './request-body.js';

/**
 * Node answers a request it cannot parse by itself, before the app sees it, with an empty body:
 * 431 when the headers are too large, 400 for a malformed request line or header. These answers
 * carry the error body as every other error does, and close the connection (the stream cannot be
 * trusted past the error).
 */
function clientErrorAnswer(err: NodeJS.ErrnoException, socket: Socket, arriving?: http.IncomingMessage): void {
  if (err.code === 'ECONNRESET' || !socket.writable) {
    socket.destroy();
    return;
  }
  const status = err.code === 'HPE_HEADER_OVERFLOW' ? 431 : err.code === 'ERR_HTTP_REQUEST_TIMEOUT' ? 408 : 400;
  const message =
    status === 431
      ? 'The request headers are too large'
      : status === 408
        ? 'The request took too long to arrive'
        : 'The request is not valid HTTP';
  // The path of the request still arriving (its body late), else of the one the parser gave up on.
  const path = arriving ? pathOf(arriving) : requestPathOf((err as { rawPacket?: Buffer }).rawPacket);
  answerOnSocket(socket, status, message, path);
}

/**
 * The path of a request Node's parser gave up on, when what it was parsing starts with a whole
 * request line (headers too large, usually); else empty: the line is what failed, or was read in
 * an earlier packet.
 */
function requestPathOf(packet: Buffer | undefined): string {
  const line = /^[A-Z]{1,16} (\/[^ \r\n]{0,2000}) HTTP\/1\.[01]\r\n/.exec(packet?.subarray(0, 2100).toString('latin1') ?? '');
  return line ? line[1].split('?')[0] : '';
}

/** An error answer written straight to the socket, which then closes. */
function answerOnSocket(socket: Socket, status: number, message: string, path: string): void {
  const body = JSON.stringify(errorBody(status, message, path));
  socket.end(
    `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\n` +
      'Content-Type: application/json; charset=utf-8\r\n' +
      `Content-Length: ${Buffer.byteLength(body)}\r\n` +
      'X-Content-Type-Options: nosniff\r\n' +
      'Connection: close\r\n\r\n' +
      body,
  );
}

export interface HeraldServer {
  server: Server;
  /**
   * Stops accepting connections and drains the open ones: a request in flight, or one that arrives
   * on a kept-alive connection meanwhile, is answered with `Connection: close`, and the connection
   * ends after that answer; connections idle after `idleGraceMs` are closed then. Resolves once
   * every connection is gone.
   */
  drain(idleGraceMs?: number): Promise<void>;
  /** How many answers the open connections have under way (for tests). */
  answersUnderWay(): number;
}

/** Idle kept-alive connections get this long after SIGTERM to send one more request. */
export const IDLE_GRACE_MS = 2_000;

/** The path of a request, for the error body (as it came: express shortens `url` under a mounted router). */
const pathOf = (req: http.IncomingMessage & { originalUrl?: string }) => (req.originalUrl ?? req.url ?? '').split('?')[0];

/** A JSON error answer through Node's response, closing the connection (once it is sent, whatever else comes). */
function answerError(req: http.IncomingMessage, res: ServerResponse, status: number, message: string): void {
  const body = JSON.stringify(errorBody(status, message, pathOf(req)));
  res.writeHead(status, { 'Content-Type': 'application/json; charset=utf-8', 'Content-Length': Buffer.byteLength(body), 'X-Content-Type-Options': 'nosniff', Connection: 'close' });
  res.end(body);
}

/**
 * How long a request may take to arrive: its headers, and the whole of it (a body of 1 MiB at
 * 17 KB/s). Node's defaults (60 s and 5 minutes) let a client without a key hold a connection for
 * minutes with a byte every few seconds. Node looks for late requests every `check` ms.
 */
export const ARRIVAL_MS = { headers: 20_000, whole: 60_000, check: 5_000 };

/**
 * Requests one connection may have under way at once (sent one after another without waiting for
 * the answers, which Node hands to the app as they are read). The next is answered 429, after the
 * answers before it, and closes the connection; what came with it is not run, and what comes later
 * closes the connection at once. Browsers and HTTP clients send one at a time; one write of
 * thousands of requests would otherwise run them all at once.
 */
export const MAX_UNDER_WAY_PER_CONNECTION = 32;

/**
 * Headers a request may send once: a second would be dropped (Node keeps the first Authorization,
 * Content-Type or Host) or joined into a value never sent (two Idempotency-Keys became one new key,
 * and a retried trigger ran again). Such a request is ambiguous: a 400.
 */
const SENT_ONCE = new Set(['authorization', 'content-type', 'host', 'idempotency-key']);

/** The first header of SENT_ONCE that `req` sends more than once, if any. */
function sentTwice(req: http.IncomingMessage): string | undefined {
  const raw = req.rawHeaders;
  // Every name once (the usual case): as many names as headers.
  if (raw.length / 2 === Object.keys(req.headers).length) return undefined;
  const seen = new Set<string>();
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i].toLowerCase();
    if (!SENT_ONCE.has(name)) continue;
    if (seen.has(name)) return raw[i];
    seen.add(name);
  }
  return undefined;
}

export function createServer(app: Express): HeraldServer {
  // Node's own answers to an HTTP/1.1 request without Host (400), to an Expect other than
  // 100-continue (417) and to CONNECT (the socket closed) have no body: these give the error body.
  const server = http.createServer(
    { requireHostHeader: false, headersTimeout: ARRIVAL_MS.headers, requestTimeout: ARRIVAL_MS.whole, connectionsCheckingInterval: ARRIVAL_MS.check },
    (req, res) => {
      // Refused for having too many requests under way before it, or sent after such a one.
      if (notRun.has(req) || req.socket.destroyed) return;
      if (req.httpVersion === '1.1' && req.headers.host === undefined) return answerError(req, res, 400, 'An HTTP/1.1 request must send a Host header');
      const twice = sentTwice(req);
      if (twice) return answerError(req, res, 400, `The request sends ${twice} more than once; send it once`);
      app(req, res);
    },
  );
  server.on('checkExpectation', (req: http.IncomingMessage, res: ServerResponse) =>
    answerError(req, res, 417, `Expect: ${String(req.headers.expect)} is not supported (only 100-continue is)`),
  );
  // A body its Content-Length says is too large is refused before the client is asked to send it.
  server.on('checkContinue', (req: http.IncomingMessage, res: ServerResponse) => {
    if (Number(req.headers['content-length']) > BODY_LIMIT) return answerError(req, res, 413, 'The request body is larger than 1 MiB');
    res.writeContinue();
    server.emit('request', req, res);
  });
  server.on('connect', (req: http.IncomingMessage, socket: Socket) => answerOnSocket(socket, 405, 'CONNECT is not allowed: Herald is not a proxy', pathOf(req)));
  server.on('clientError', (err: NodeJS.ErrnoException, socket: Socket) => {
    const answers = [...(underWay.get(socket) ?? [])];
    // A request still arriving (a timeout, a broken chunk of its body) cannot be answered but this way.
    const arriving = answers.find((res) => !res.req.complete)?.req;
    if (answers.length === 0 || arriving) return clientErrorAnswer(err, socket, arriving);
    // Whole requests before the bad bytes are under way: their answers go first. Bytes after a
    // request that said `Connection: close` are not a request at all: its answer closes the connection.
    if (err.code !== 'HPE_CLOSED_CONNECTION') afterAnswers.set(socket, () => clientErrorAnswer(err, socket));
  });

  let draining = false;
  const notRun = new WeakSet<http.IncomingMessage>();
  // Connections that were refused a request for having too many under way: they close after its
  // answer, and read no more meanwhile. What came with the refused request (one read of the
  // socket) is let be; a request that comes in a later read is a client that does not stop, and
  // its connection is closed at once, answers and all.
  const refused = new WeakMap<Socket, { sameRead: boolean }>();
  // Each connection's answers not yet finished: to bound them, and so that those under way when the
  // drain begins close their connection. An answer queued behind another when its connection is
  // lost never emits 'close', so a connection's are forgotten together when it closes.
  const underWay = new Map<Socket, Set<ServerResponse>>();
  // A connection's error answer waiting for the answers under way before it (clientError).
  const afterAnswers = new Map<Socket, () => void>();
  server.on('connection', (socket: Socket) =>
    socket.once('close', () => {
      underWay.delete(socket);
      afterAnswers.delete(socket);
    }),
  );
  server.prependListener('request', (req: http.IncomingMessage, res: ServerResponse) => {
    const socket = req.socket;
    let answers = underWay.get(socket);
    if (!answers) underWay.set(socket, (answers = new Set()));
    const refusal = refused.get(socket);
    if (refusal || answers.size >= MAX_UNDER_WAY_PER_CONNECTION) {
      notRun.add(req);
      if (refusal) return void (refusal.sameRead || socket.destroy());
      const state = { sameRead: true };
      refused.set(socket, state);
      process.nextTick(() => (state.sameRead = false));
      socket.pause();
      // Queued behind the answers under way, as every answer on the connection is.
      return answerError(req, res, 429, `This connection has ${MAX_UNDER_WAY_PER_CONNECTION} requests under way, the most one may have: send the next once an answer has come`);
    }
    answers.add(res);
    // Emitted once the answer is sent, or the connection lost.
    res.once('close', () => {
      answers.delete(res);
      if (answers.size === 0) afterAnswers.get(socket)?.();
    });
    // Before Node's own 'finish' handler, which would read the rest of the body without a bound.
    res.once('prefinish', () => closeAfterUnreadBody(req));
    if (draining) res.setHeader('Connection', 'close');
  });

  return {
    server,
    answersUnderWay: () => [...underWay.values()].reduce((sum, answers) => sum + answers.size, 0),
    drain(idleGraceMs = IDLE_GRACE_MS) {
      draining = true;
      for (const answers of underWay.values()) for (const res of answers) if (!res.headersSent) res.setHeader('Connection', 'close');
      return new Promise<void>((resolve) => {
        // net.Server's close: stop listening, and resolve once the last connection ends. (http.Server's
        // own close also closes the idle connections at once, racing a request the client is sending
        // on one: that race is the reset this drain avoids.)
        net.Server.prototype.close.call(server, () => resolve());
        const idle = setTimeout(() => server.closeIdleConnections(), idleGraceMs);
        idle.unref();
      });
    },
  };
}
