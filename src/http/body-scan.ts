// What a JSON body holds, read from its bytes in one pass before it is parsed. Parsing, checking
// and storing a body cost by its number of values, not its bytes: a megabyte of `[]` or of distinct
// keys held the event loop 120–140 ms a request, half of it a walk over the parsed values that
// this scan makes unnecessary for nearly every body.

/** What scanJsonBody found. */
export interface BodyScan {
  /** Objects, arrays, strings, numbers, true, false and null; an object's keys are not values. */
  values: number;
  /** Objects' members (key and value pairs), all objects together. */
  members: number;
  /** How many distinct key names the members use, when asked (`countKeyNames`), up to one past that many. */
  keyNames?: number;
  /** How deep containers nest: 1 for `{}`, 2 for `{"a":[]}`. */
  deepest: number;
  /**
   * Whether the body may hold a string that is not storable text: an escaped NUL (`\u0000`) or
   * UTF-16 surrogate (`\ud800`–`\udfff`, paired or not). Escapes are the only way JSON in UTF-8
   * can spell those: the bytes of a surrogate (ED A0 80) or an overlong NUL (C0 80) are not UTF-8,
   * and the body is refused (request-body.ts).
   */
  mayHoldNonText: boolean;
  /**
   * Whether the body may hold a number beyond what a double holds (`1e400`), which the parser makes
   * Infinity and storing would write as null: one with an exponent, or of more than 300 characters.
   */
  mayHoldHugeNumber: boolean;
}

const QUOTE = 0x22;
const BACKSLASH = 0x5c;

/**
 * Counts the values of a JSON text, its objects' members and how deep it nests, in one pass over
 * its bytes (UTF-8); with `countKeyNames`, also the distinct key names, up to one past that many
 * (a parser makes each new name once: a megabyte of distinct ones cost five times what the same
 * members with repeated names did). It assumes valid JSON, which the parser checks next: for
 * anything else its answer is only an estimate, and the parser refuses the body anyway.
 */
export function scanJsonBody(bytes: Buffer, countKeyNames?: number): BodyScan {
  // Names as the parser makes them: decoded, escapes and all, so that one name spelled two ways is one.
  const names = countKeyNames === undefined ? undefined : new Set<string>();
  let members = 0;
  let values = 0;
  let depth = 0;
  let deepest = 0;
  let mayHoldNonText = false;
  let mayHoldHugeNumber = false;
  const scanned = (): BodyScan => ({ values, members, deepest, mayHoldNonText, mayHoldHugeNumber, ...(names && { keyNames: names.size }) });
  // For each open container, whether it is an object (whose next string after `{` or `,` is a key).
  const inObject: boolean[] = [];
  let keyNext = false;
  let inScalar = false;
  // The next quote and the next backslash at or after where strings are searched, each found again
  // only once passed: the searches together read the body once, however many strings and escapes
  // it has (searching again after each escape made a string of escapes quadratic).
  let quote = -1;
  let backslash = -1;
  let scalarStart = 0;
  for (let i = 0; i < bytes.length; i++) {
    const b = bytes[i];
    // Numbers, true, false and null: one value for each run of these characters.
    if ((b >= 0x30 && b <= 0x39) || (b >= 0x61 && b <= 0x7a) || (b >= 0x41 && b <= 0x5a) || b === 0x2d || b === 0x2b || b === 0x2e) {
      if (!inScalar) values++, (scalarStart = i);
      inScalar = true;
      continue;
    }
    if (inScalar && !mayHoldHugeNumber && mayBeHuge(bytes, scalarStart, i)) mayHoldHugeNumber = true;
    inScalar = false;
    switch (b) {
      case QUOTE: {
        if (keyNext) members++;
        else values++;
        // The string's end, found with the buffer's own search (a body is mostly strings): the
        // next quote that no backslash escapes.
        const opened = i;
        let escaped = false;
        for (let from = i + 1; ; ) {
          if (quote < from) quote = bytes.indexOf(QUOTE, from);
          if (quote === -1) return scanned(); // not JSON: the parser says so
          if (backslash < from) backslash = bytes.indexOf(BACKSLASH, from);
          if (backslash === -1) backslash = bytes.length;
          if (backslash < quote) {
            escaped = true;
            if (bytes[backslash + 1] === 0x75 /* u */ && escapesNonText(bytes, backslash + 2)) mayHoldNonText = true;
            from = backslash + 2; // past the escaped character: an escaped quote does not end the string
            continue;
          }
          i = quote;
          break;
        }
        if (keyNext && names && names.size <= countKeyNames!) names.add(nameOf(bytes, opened, i, escaped));
        keyNext = false;
        break;
      }
      case 0x7b: // {
      case 0x5b: // [
        values++;
        inObject.push(b === 0x7b);
        keyNext = b === 0x7b;
        if (++depth > deepest) deepest = depth;
        break;
      case 0x7d: // }
      case 0x5d: // ]
        inObject.pop();
        depth--;
        keyNext = false;
        break;
      case 0x2c: // ,
        keyNext = inObject[inObject.length - 1] === true;
        break;
      case 0x3a: // :
        keyNext = false;
        break;
    }
  }
  if (inScalar && mayBeHuge(bytes, scalarStart, bytes.length)) mayHoldHugeNumber = true;
  return scanned();
}

/** Whether the scalar from `start` to `end` is a number a double may not hold: one with an exponent, or very long. */
function mayBeHuge(bytes: Buffer, start: number, end: number): boolean {
  const first = bytes[start];
  if (!((first >= 0x30 && first <= 0x39) || first === 0x2d)) return false; // true, false, null
  if (end - start > 300) return true;
  for (let i = start; i < end; i++) if ((bytes[i] | 0x20) === 0x65 /* e */) return true;
  return false;
}

/** The key between the quotes at `opened` and `closed`, decoded as the parser will (a broken escape left as it is: the parser refuses it). */
function nameOf(bytes: Buffer, opened: number, closed: number, escaped: boolean): string {
  if (!escaped) return bytes.toString('utf8', opened + 1, closed);
  const quoted = bytes.toString('utf8', opened, closed + 1);
  try {
    return JSON.parse(quoted) as string;
  } catch {
    return quoted;
  }
}

/** Whether the four hex digits at `at` (of a `\u` escape) are 0000 or a UTF-16 surrogate (D800–DFFF). */
function escapesNonText(bytes: Buffer, at: number): boolean {
  const first = bytes[at] | 0x20; // lower case; digits keep their code
  const second = bytes[at + 1] | 0x20;
  if (first === 0x64 /* d */) return (second >= 0x38 && second <= 0x39) || (second >= 0x61 && second <= 0x66);
  return bytes[at] === 0x30 && bytes[at + 1] === 0x30 && bytes[at + 2] === 0x30 && bytes[at + 3] === 0x30;
}
