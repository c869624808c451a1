/**
 * How many ids one statement takes at most: SQLite allows 32,766 bound values, PostgreSQL 65,535,
 * and a long IN list costs more to plan than it saves. Lists longer than this go in parts.
 */
export const ID_CHUNK = 500;

/** `items` in consecutive parts of at most `size`. */
export function chunks<T>(items: readonly T[], size = ID_CHUNK): T[][] {
  const parts: T[][] = [];
  for (let i = 0; i < items.length; i += size) parts.push(items.slice(i, i + size));
  return parts;
}
