import { defineRawMember } from '../raw-json.js';

/** SQLite hands JSON columns back as text, PostgreSQL as values: read both the same way. */
export function readJson<T>(value: unknown, fallback: T): T {
  if (value === null || value === undefined) return fallback;
  if (typeof value === 'string') return JSON.parse(value) as T;
  return value as T;
}

/**
 * Stored JSON this long or longer goes into an answer as it is stored (setStoredJson): past about
 * 300 characters of small values, parsing and serializing them again costs more than the splice
 * (18 µs against 7 µs at 1 KiB, 1 ms against 5 µs at 64 KiB).
 */
export const ANSWERED_AS_STORED_CHARS = 1024;

/**
 * Sets `item[key]` to the JSON value `stored` holds (the item made with a placeholder there, so the
 * field keeps its place): parsed now, unless the item is `answered` (made only to be written in an
 * answer: one of a page, or one the API reads alone) and the value long. Then the stored text is
 * what the answer's writer (http/send-json.ts) puts in, as it is (stringifyWithRaw), and the
 * field, if read, is parsed each time and not kept. Parsing a 1 MiB value and serializing it again
 * held the event loop 25–45 ms, a page of a hundred of them seconds, and made the garbage
 * collector copy every object of them. Items the rules read parse at once: a value read again and
 * again (a template reading a subscriber's `data`) would be parsed as often. Setting the field
 * replaces it, and its text, with the value set.
 */
export function setStoredJson<T extends object, K extends keyof T & string>(item: T, key: K, stored: unknown, fallback: T[K], answered: boolean): void {
  if (!answered || typeof stored !== 'string' || stored.length < ANSWERED_AS_STORED_CHARS) {
    item[key] = readJson(stored, fallback);
    return;
  }
  defineRawMember(item, key, stored);
}

/** Written as text for both: pg would send a JS array as a PostgreSQL array, not as JSON. */
export function writeJson(value: unknown): string | null {
  return value === undefined || value === null ? null : JSON.stringify(value);
}

/** SQLite's booleans are 0 and 1. */
export function readBool(value: unknown): boolean {
  return value === true || value === 1 || value === '1';
}
