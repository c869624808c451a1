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
  /**
   * How many distinct key names the members use, when asked (`countKeyNames`), up to one past
   * that many (by their hashes: names that collide, about one pair in 2^64, count once; a name
   * spelled once with escapes and once without counts twice).
   */
  keyNames?: number;
  /** How deep containers nest: 1 for `{}`, 2 for `{"a":[]}`. */
  deepest: number;
  /**
   * Whether the body may hold a string that is not storable text: an escaped NUL (`\u0000`) or
   * UTF-16 surrogate (`\ud800`–`\udfff`, paired or not). Escapes are the only way JSON in UTF-8
   * can spell those.
   */
  mayHoldNonText: boolean;
}

const QUOTE = 0x22;
const BACKSLASH = 0x5c;

/** Slots of the table of key-name hashes, four times the most it counts, so that probes stay short. */
const NAME_SLOTS = 1 << 17;

/**
 * Counts the values of a JSON text, its objects' members and how deep it nests, in one pass over
 * its bytes (UTF-8); with `countKeyNames`, also the distinct key names, up to about that many (a
 * parser interns each new name: a megabyte of distinct ones cost five times what the same members
 * with repeated names did). It assumes valid JSON, which the parser checks next: for anything else
 * its answer is only an estimate, and the parser refuses the body anyway.
 */
export function scanJsonBody(bytes: Buffer, countKeyNames?: number): BodyScan {
  if (countKeyNames !== undefined && countKeyNames > NAME_SLOTS / 4) throw new RangeError(`Counts at most ${NAME_SLOTS / 4} key names`);
  const names = countKeyNames === undefined ? undefined : new Int32Array(2 * NAME_SLOTS);
  let keyNames = 0;
  let members = 0;
  let values = 0;
  let depth = 0;
  let deepest = 0;
  let mayHoldNonText = false;
  // For each open container, whether it is an object (whose next string after `{` or `,` is a key).
  const inObject: boolean[] = [];
  let keyNext = false;
  let inScalar = false;
  // The next backslash at or after where strings are searched, found again only once passed: the
  // searches together read the body once, however many strings it has.
  let backslash = -1;
  for (let i = 0; i < bytes.length; i++) {
    const b = bytes[i];
    // Numbers, true, false and null: one value for each run of these characters.
    if ((b >= 0x30 && b <= 0x39) || (b >= 0x61 && b <= 0x7a) || (b >= 0x41 && b <= 0x5a) || b === 0x2d || b === 0x2b || b === 0x2e) {
      if (!inScalar) values++;
      inScalar = true;
      continue;
    }
    inScalar = false;
    switch (b) {
      case QUOTE: {
        if (keyNext) members++;
        else values++;
        // The string's end, found with the buffer's own search (a body is mostly strings):
        // the next quote that no backslash escapes.
        const opened = i;
        for (let from = i + 1; ; ) {
          const quote = bytes.indexOf(QUOTE, from);
          if (quote === -1) return { values, members, deepest, mayHoldNonText, ...(names && { keyNames }) }; // not JSON: the parser says so
          if (backslash < from) backslash = bytes.indexOf(BACKSLASH, from);
          if (backslash === -1) backslash = bytes.length;
          if (backslash < quote) {
            if (bytes[backslash + 1] === 0x75 /* u */ && escapesNonText(bytes, backslash + 2)) mayHoldNonText = true;
            from = backslash + 2; // past the escaped character: an escaped quote does not end the string
            continue;
          }
          i = quote;
          break;
        }
        if (keyNext && names && keyNames <= countKeyNames!) keyNames += addName(names, hashOf(bytes, opened + 1, i));
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
  return { values, members, deepest, mayHoldNonText, ...(names && { keyNames }) };
}

/**
 * Two 32-bit hashes of bytes[from, to), a key name as it is spelled (FNV-1a, and a multiply-xorshift
 * of its own): two names collide in both about once in 2^64, not once in 2^32 (which, among 20,000
 * names, happens to one body in twenty).
 */
function hashOf(bytes: Buffer, from: number, to: number): [number, number] {
  let first = 0x811c9dc5 | 0;
  let second = 0x9e3779b9 | 0;
  for (let i = from; i < to; i++) {
    first = Math.imul(first ^ bytes[i], 16777619);
    second = Math.imul(second + bytes[i], 0x85ebca6b);
    second ^= second >>> 13;
  }
  return [first, second];
}

/** Adds a key name's two hashes to the table (open addressing; 0 marks an empty slot): 1 if it was new. */
function addName(names: Int32Array, [first, second]: [number, number]): number {
  const h = first === 0 ? 1 : first;
  for (let slot = h & (NAME_SLOTS - 1); ; slot = (slot + 1) & (NAME_SLOTS - 1)) {
    if (names[2 * slot] === h && names[2 * slot + 1] === second) return 0;
    if (names[2 * slot] === 0) {
      names[2 * slot] = h;
      names[2 * slot + 1] = second;
      return 1;
    }
  }
}

/** Whether the four hex digits at `at` (of a `\u` escape) are 0000 or a UTF-16 surrogate (D800–DFFF). */
function escapesNonText(bytes: Buffer, at: number): boolean {
  const first = bytes[at] | 0x20; // lower case; digits keep their code
  const second = bytes[at + 1] | 0x20;
  if (first === 0x64 /* d */) return (second >= 0x38 && second <= 0x39) || (second >= 0x61 && second <= 0x66);
  return bytes[at] === 0x30 && bytes[at + 1] === 0x30 && bytes[at + 2] === 0x30 && bytes[at + 3] === 0x30;
}
