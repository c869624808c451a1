import type { ServerResponse } from 'node:http';
import { hasRawMembers, stringifyWithRaw } from '../raw-json.js';
import { pacer } from '../turns.js';

/**
 * A page whose JSON passes this many characters before its last item is written as it is made, in
 * pieces of at least this size (chunked); any other answer goes whole, with its Content-Length.
 */
export const PIECE_CHARS = 64 * 1024;

/**
 * How long a client may take to read what was written (a piece or an item, up to about 1 MiB)
 * before the connection is closed: one that stops reading would otherwise keep the answer's page
 * in memory for as long as it likes.
 */
export const DRAIN_MS = 30_000;

/**
 * Writes an operation's answer as the contract gives it: this status and this JSON (or no body),
 * whatever the request's conditions. Express's `res.json` hashes every body into an ETag and turns
 * a 2xx into a bodiless 304 for a request whose If-None-Match matches it (or is `*`): a status no
 * operation lists.
 *
 * A page of large items (a hundred subscribers of 1 MiB each is a 100 MB answer) is serialized one
 * item at a time and, once past PIECE_CHARS, written in pieces: the event loop turns between items,
 * a client that reads slowly holds back the writing (the socket's buffer stays small), one that has
 * left stops it, and one that has not read what was written after `drainMs` is disconnected. An
 * item's stored JSON (db/json.ts setStoredJson), in a page or alone in `data`, is written as it is
 * stored. The text is the same as `JSON.stringify(body)` (an item's own `toJSON`, which no answer
 * has, would be called without its index).
 */
export async function sendJson(res: ServerResponse, status: number, body: unknown, drainMs = DRAIN_MS): Promise<void> {
  res.statusCode = status;
  if (body === undefined) {
    res.end();
    return;
  }
  res.setHeader('Content-Type', 'application/json; charset=utf-8');
  if (!hasDataFirst(body)) return sendWhole(res, JSON.stringify(body));
  const { data, ...rest } = body;
  if (!Array.isArray(data)) return sendWhole(res, hasRawMembers(data) ? `{"data":${stringifyWithRaw(data)}${after(rest)}` : JSON.stringify(body));
  // Node sends no body for a HEAD: the page would be made and dropped. (A single answer, above,
  // still gives its length, as its GET does.)
  if (res.req?.method === 'HEAD') return void res.end();
  const close = `]${after(rest)}`;
  let text = '{"data":[';
  let next = 0;
  for (; next < data.length && text.length < PIECE_CHARS; next++) text += item(data, next);
  if (next === data.length) return sendWhole(res, text + close);

  const pace = pacer();
  for (;;) {
    // A response whose client has left is destroyed: nothing more is made for it.
    if (res.destroyed) return;
    if (text.length >= PIECE_CHARS || next === data.length) {
      const room = res.write(next === data.length ? text + close : text);
      text = '';
      if (!room && !(await drained(res, drainMs))) {
        res.destroy();
        return;
      }
      if (next === data.length) break;
    }
    await pace();
    text += item(data, next++);
  }
  res.end();
}

function sendWhole(res: ServerResponse, text: string): void {
  res.setHeader('Content-Length', Buffer.byteLength(text));
  res.end(text);
}

/** What follows `data`'s value in the answer: the other members, and the closing brace. */
function after(rest: object): string {
  const members = JSON.stringify(rest);
  return members === '{}' ? '}' : `,${members.slice(1)}`;
}

/** The array's `i`th item as JSON.stringify writes it there (stored values spliced in), after a comma unless it is the first. */
function item(data: unknown[], i: number): string {
  return (i > 0 ? ',' : '') + (stringifyWithRaw(data[i]) ?? 'null');
}

/** A plain object whose first member is `data`: every list's page (an array there) and every single item's answer. */
function hasDataFirst(body: unknown): body is { data: unknown } {
  if (typeof body !== 'object' || body === null || Object.getPrototypeOf(body) !== Object.prototype || 'toJSON' in body) return false;
  const [first] = Object.keys(body);
  return first === 'data';
}

/** Whether the socket took what was written (within `ms`, if given); false if it did not or is gone. */
export function drained(res: ServerResponse, ms?: number): Promise<boolean> {
  if (res.destroyed) return Promise.resolve(false);
  return new Promise((resolve) => {
    const done = (took: boolean) => {
      clearTimeout(timer);
      res.off('drain', onDrain);
      res.off('close', onClose);
      resolve(took);
    };
    const onDrain = () => done(true);
    const onClose = () => done(false);
    const timer = ms === undefined ? undefined : setTimeout(onClose, ms);
    res.on('drain', onDrain);
    res.on('close', onClose);
  });
}
