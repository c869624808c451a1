/** SQLite hands JSON columns back as text, PostgreSQL as values: read both the same way. */
export function readJson<T>(value: unknown, fallback: T): T {
  if (value === null || value === undefined) return fallback;
  if (typeof value === 'string') return JSON.parse(value) as T;
  return value as T;
}

/** Stored JSON this long or longer is parsed when a listed item's field is read (setStoredJson). */
export const PARSED_WHEN_READ_CHARS = 64 * 1024;

/**
 * Sets `item[key]` to the JSON value `stored` holds (the item made with a placeholder there, so the
 * field keeps its place): parsed now, unless the item is `listed` (one of a page) and the value
 * long. Then it is parsed each time the field is read, and not kept. A page of a hundred 1 MiB
 * values parsed together and kept until written made the garbage collector copy every object of
 * them (pauses of 100 ms and more) and held about three times their text in memory; read as the
 * page is written (http/send-json.ts), each lives only while it is serialized. Single items parse
 * at once: a value read again and again (a template reading a subscriber's `data`) would be parsed
 * as often. Setting the field replaces it with the value set.
 */
export function setStoredJson<T extends object, K extends keyof T & string>(item: T, key: K, stored: unknown, fallback: T[K], listed: boolean): void {
  if (!listed || typeof stored !== 'string' || stored.length < PARSED_WHEN_READ_CHARS) {
    item[key] = readJson(stored, fallback);
    return;
  }
  Object.defineProperty(item, key, {
    enumerable: true,
    configurable: true,
    get: () => JSON.parse(stored) as T[K],
    set(value: T[K]) {
      Object.defineProperty(item, key, { value, enumerable: true, configurable: true, writable: true });
    },
  });
}

/** Written as text for both: pg would send a JS array as a PostgreSQL array, not as JSON. */
export function writeJson(value: unknown): string | null {
  return value === undefined || value === null ? null : JSON.stringify(value);
}

/** SQLite's booleans are 0 and 1. */
export function readBool(value: unknown): boolean {
  return value === true || value === 1 || value === '1';
}
