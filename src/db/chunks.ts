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

/**
 * Rows whose text adds up to about this many characters are handled at a time where a whole page
 * at once would hold the event loop: a subscriber's `data` or a notification's payload may be 1 MiB
 * each, and parsing or copying a hundred of them takes a second.
 */
export const SLICE_CHARS = 1_000_000;

/**
 * `items` in consecutive groups whose weights add up to at most `budget` and that hold at most
 * `most` items each; an item heavier than the budget is a group of its own.
 */
export function groupsOf<T>(items: readonly T[], weigh: (item: T) => number, budget: number, most = Infinity): T[][] {
  const groups: T[][] = [];
  let group: T[] = [];
  let weight = 0;
  for (const item of items) {
    const itemWeight = weigh(item);
    if (group.length > 0 && (group.length >= most || weight + itemWeight > budget)) {
      groups.push(group);
      group = [];
      weight = 0;
    }
    group.push(item);
    weight += itemWeight;
  }
  if (group.length > 0) groups.push(group);
  return groups;
}

/** `rows` in consecutive slices of about `chars` characters of text each; a row larger than that is a slice of its own. */
export function slicesByText<Row>(rows: readonly Row[], chars = SLICE_CHARS): Row[][] {
  return groupsOf(rows, textOf, chars);
}

/** The characters of a row's text columns, the row an object or an array (a string's length costs nothing to read). */
export function textOf(row: unknown): number {
  let chars = 0;
  for (const key in row as object) {
    const value = (row as Record<string, unknown>)[key];
    if (typeof value === 'string') chars += value.length;
  }
  return chars;
}
