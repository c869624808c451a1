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

/** `rows` in consecutive slices of about `chars` characters of text each; a row larger than that is a slice of its own. */
export function slicesByText<Row>(rows: readonly Row[], chars = SLICE_CHARS): Row[][] {
  const slices: Row[][] = [];
  let slice: Row[] = [];
  let sliceChars = 0;
  for (const row of rows) {
    const size = textOf(row);
    if (slice.length > 0 && sliceChars + size > chars) {
      slices.push(slice);
      slice = [];
      sliceChars = 0;
    }
    slice.push(row);
    sliceChars += size;
  }
  if (slice.length > 0) slices.push(slice);
  return slices;
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
