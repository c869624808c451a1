/** SQLite hands JSON columns back as text, PostgreSQL as values: read both the same way. */
export function readJson<T>(value: unknown, fallback: T): T {
  if (value === null || value === undefined) return fallback;
  if (typeof value === 'string') return JSON.parse(value) as T;
  return value as T;
}

/** Written as text for both: pg would send a JS array as a PostgreSQL array, not as JSON. */
export function writeJson(value: unknown): string | null {
  return value === undefined || value === null ? null : JSON.stringify(value);
}

/** SQLite's booleans are 0 and 1. */
export function readBool(value: unknown): boolean {
  return value === true || value === 1 || value === '1';
}
