/**
 * Ids per statement when a list is read or written in parts: inList pads SQLite's lists up to
 * 1,024 values (knex.ts), and PostgreSQL's `whereIn` binds one variable a value, so 500 stays well
 * under both databases' bound-variable limits.
 */
export const ID_CHUNK = 500;

/** The items in consecutive parts of at most `size`, in order; none for an empty list. */
export function chunks<T>(items: readonly T[], size = ID_CHUNK): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size));
  return out;
}
