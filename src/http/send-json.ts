import type { ServerResponse } from 'node:http';
import { pacer } from '../turns.js';

/**
 * An answer whose JSON reaches this many characters is written as it is made, in pieces of about
 * this size; a smaller one goes at once with its Content-Length.
 */
export const PIECE_CHARS = 64 * 1024;

/**
 * Writes an operation's answer as the contract gives it: this status and this JSON (or no body),
 * whatever the request's conditions. Express's `res.json` hashes every body into an ETag and turns
 * a 2xx into a bodiless 304 for a request whose If-None-Match matches it (or is `*`): a status no
 * operation lists.
 *
 * A page of large items (a hundred subscribers of 1 MiB each is a 100 MB answer) is serialized one
 * item at a time and written in pieces (chunked): the event loop turns between items, a client that
 * reads slowly holds back the writing (the socket's buffer stays small), and a client that leaves
 * stops it. The text is the same as `JSON.stringify(body)`.
 */
export async function sendJson(res: ServerResponse, status: number, body: unknown): Promise<void> {
  res.statusCode = status;
  if (body === undefined) {
    res.end();
    return;
  }
  res.setHeader('Content-Type', 'application/json; charset=utf-8');
  let gone = false;
  res.once('close', () => (gone = true));
  const pace = pacer();
  let waiting = '';
  let streaming = false;
  for (const piece of jsonPieces(body)) {
    waiting += piece;
    if (waiting.length >= PIECE_CHARS) {
      streaming = true;
      const room = res.write(waiting);
      waiting = '';
      if (!room) await drained(res);
    }
    await pace();
    if (gone) return;
  }
  if (!streaming) res.setHeader('Content-Length', Buffer.byteLength(waiting));
  res.end(waiting);
}

/**
 * `JSON.stringify(body)` in pieces: an object whose first member is the array `data` (every page of
 * a list) gives its opening, each item, and its close; anything else is one piece.
 */
function* jsonPieces(body: unknown): Generator<string> {
  if (!isPageLike(body)) {
    yield JSON.stringify(body);
    return;
  }
  const { data, ...rest } = body;
  yield '{"data":[';
  for (let i = 0; i < data.length; i++) yield (i > 0 ? ',' : '') + (JSON.stringify(data[i]) ?? 'null');
  const members = JSON.stringify(rest);
  yield members === '{}' ? ']}' : `],${members.slice(1)}`;
}

function isPageLike(body: unknown): body is { data: unknown[] } {
  if (typeof body !== 'object' || body === null || Object.getPrototypeOf(body) !== Object.prototype) return false;
  if ('toJSON' in body) return false;
  for (const key in body) return key === 'data' && Array.isArray((body as { data: unknown }).data);
  return false;
}

/** Until the socket has taken what was written (or is gone). */
function drained(res: ServerResponse): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      res.off('drain', done);
      res.off('close', done);
      resolve();
    };
    res.on('drain', done);
    res.on('close', done);
  });
}
