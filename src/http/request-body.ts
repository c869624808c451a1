// How much of a request body Herald reads. body-parser refuses a body over its limit, but answers
// only once it has read the whole request ("dump"), so a client that declares or sends gigabytes
// keeps a connection reading them; and a body nobody reads (on an operation that takes none, or a
// request refused before its body) Node reads to its end after the answer. Both are bounded here,
// and so is what a JSON body may hold, checked on its bytes before it is parsed.
import { isUtf8 } from 'node:buffer';
import type { IncomingMessage } from 'node:http';
import type { RequestHandler } from 'express';
import { scanJsonBody, type BodyScan } from './body-scan.js';

/** The largest JSON body the API reads. */
export const BODY_LIMIT = 1_048_576;

/**
 * The most JSON values one body may hold (body-scan.ts counts them): a body's cost to parse, check
 * and store grows with its values, and a megabyte of tiny ones held the event loop over 100 ms.
 */
export const BODY_VALUE_LIMIT = 100_000;

/**
 * The most distinct key names one body's objects may use together: a parser makes each new name
 * once, and a megabyte of them (one object of 90,000 keys) held the event loop over 100 ms, five
 * times what the same members with repeated names cost.
 */
export const BODY_KEY_NAME_LIMIT = 20_000;

/**
 * The most pieces a body may arrive in (a chunk of a chunked body, or what one read of the socket
 * brings): each is an object the parser keeps until the body is whole, and a megabyte sent a byte
 * a chunk, a million of them, held the event loop for a second, mostly in the garbage collector.
 * Clients send chunks of kilobytes; a body of 1 MiB may still come in pieces of 64 bytes.
 */
export const BODY_PIECE_LIMIT = 16_384;

/**
 * What a JSON body holds (body-scan.ts), as body-parser's `verify` checks it before the parse (its
 * error keeps its own status): refused when it is not UTF-8 (RFC 8259; body-parser would take
 * UTF-16, whose bytes the scan would misread, and would read invalid bytes as U+FFFD, storing
 * what was not sent), or holds more values than BODY_VALUE_LIMIT or more distinct key names than
 * BODY_KEY_NAME_LIMIT (413).
 */
export function checkedJsonBody(bytes: Buffer, encoding: string): BodyScan {
  if (encoding !== 'utf-8') throw bodyError('charset.unsupported', 400, `unsupported charset "${encoding}"`);
  if (!isUtf8(bytes)) throw bodyError('charset.unsupported', 400, 'invalid UTF-8');
  const scan = scanJsonBody(bytes);
  if (scan.values > BODY_VALUE_LIMIT) throw bodyError('entity.too.many.values', 413, 'request entity holds too many values', BODY_VALUE_LIMIT);
  // Names are counted only when there are that many members, in a second pass that decodes each.
  if (scan.members > BODY_KEY_NAME_LIMIT && scanJsonBody(bytes, BODY_KEY_NAME_LIMIT).keyNames! > BODY_KEY_NAME_LIMIT) {
    throw bodyError('entity.too.many.keys', 413, 'request entity uses too many key names', BODY_KEY_NAME_LIMIT);
  }
  return scan;
}

/** body-parser's own error for a body over its limit. */
function tooLarge(limit: number): Error {
  return bodyError('entity.too.large', 413, 'request entity too large', limit);
}

function tooManyPieces(): Error {
  return bodyError('entity.too.many.pieces', 413, 'request entity came in too many pieces', BODY_PIECE_LIMIT);
}

/** An error shaped as body-parser's own (its `type`, and `limit` when it has one), which the error handler turns into the error body. */
function bodyError(type: string, status: number, message: string, limit?: number): Error {
  return Object.assign(new Error(message), { type, status, expose: true, limit });
}

/**
 * `parse` (express.json or express.urlencoded with the same `limit`, reading bodies of `type`),
 * answering 413 as soon as such a body is known to be over `limit` bytes: at once when its
 * `Content-Length` says so, else when that many bytes have come (counted as sent, compressed or
 * not), or more than BODY_PIECE_LIMIT pieces, instead of after the whole request. The rest is then the server's to bound
 * (`closeAfterUnreadBody`), as is a body of another type, which the parser leaves unread.
 */
export function cappedBody(parse: RequestHandler, limit: number, type: string): RequestHandler {
  return (req, res, next) => {
    if (!req.is(type)) return parse(req, res, next);
    if (Number(req.headers['content-length']) > limit) return next(tooLarge(limit));
    let received = 0;
    let pieces = 0;
    let settled = false;
    const count = (chunk: Buffer) => {
      received += chunk.length;
      pieces += 1;
      if (received > limit) settle(tooLarge(limit));
      else if (pieces > BODY_PIECE_LIMIT) {
        // No more of them read, nor kept by the parser (body-parser's reader is let go of: it would
        // keep every piece to the limit); the connection closes after the answer (closeAfterUnreadBody).
        req.pause();
        req.removeAllListeners('data');
        cutShort.add(req);
        settle(tooManyPieces());
      }
    };
    const settle = (err?: unknown) => {
      if (settled) return;
      settled = true;
      req.off('data', count);
      next(err);
    };
    parse(req, res, settle);
    // The parser has begun reading by now (body-parser starts in the same tick), so counting
    // beside it neither starts the stream nor misses a chunk.
    if (!settled && !req.readableEnded) req.on('data', count);
  };
}

/** What is read, and for how long, of a body still arriving once its answer is sent. */
export const UNREAD_BODY = { bytes: 1_048_576, ms: 2_000 };

/** Requests whose bodies were refused for their pieces: none of the rest is read. */
const cutShort = new WeakSet<IncomingMessage>();

/**
 * Called as an answer ends ('prefinish'): a request whose body is still arriving is read on (and
 * dropped) for at most `UNREAD_BODY`, so that the client, still sending, gets to read the answer
 * rather than a reset, and then its connection is closed. A body that ends within the bound keeps
 * the connection open for the next request, as Node would.
 */
export function closeAfterUnreadBody(req: IncomingMessage): void {
  if (req.complete || req.destroyed) return;
  let left = UNREAD_BODY.bytes;
  const close = () => req.socket.destroy();
  const timer = setTimeout(close, UNREAD_BODY.ms);
  timer.unref();
  req.once('close', () => clearTimeout(timer));
  // Its pieces cost more than their bytes: it stays paused, and the client has the time bound to read the answer.
  if (cutShort.has(req)) return;
  req.on('data', (chunk: Buffer) => {
    left -= chunk.length;
    if (left < 0) close();
  });
  req.resume();
}
