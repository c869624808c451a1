/**
 * Members of an object whose JSON text is already known (a stored value, written by
 * `JSON.stringify`), so that writing the object splices that text in rather than parsing and
 * serializing the value again.
 */
const RAW_MEMBERS = Symbol('raw JSON members');

/** A member's text, and the getter that reads it: the text stands for the member while that getter does. */
interface RawMember {
  text: string;
  get: () => unknown;
}

type WithRawMembers = { [RAW_MEMBERS]?: Map<string, RawMember> };

/**
 * Makes `item[key]` the value whose JSON is `text` (which must be valid JSON): read, it is parsed
 * each time and not kept; set, it becomes the value set. Written by stringifyWithRaw, it is `text`.
 */
export function defineRawMember(item: object, key: string, text: string): void {
  const get = () => JSON.parse(text) as unknown;
  Object.defineProperty(item, key, {
    enumerable: true,
    configurable: true,
    get,
    set(value: unknown) {
      Object.defineProperty(item, key, { value, enumerable: true, configurable: true, writable: true });
    },
  });
  const holder = item as WithRawMembers;
  if (!holder[RAW_MEMBERS]) Object.defineProperty(holder, RAW_MEMBERS, { value: new Map(), enumerable: false });
  holder[RAW_MEMBERS]!.set(key, { text, get });
}

/** Whether `value` is an object with a member whose raw text stringifyWithRaw would write. */
export function hasRawMembers(value: unknown): boolean {
  const raw = (value as WithRawMembers | null | undefined)?.[RAW_MEMBERS];
  return raw !== undefined && raw.size > 0 && !('toJSON' in (value as object));
}

/**
 * `JSON.stringify(value)`, except that a member defined by defineRawMember, and not changed since,
 * is written as its text. The object's own members are looked at, and the members of those that
 * have such members in turn; with `inMembers`, its members' too though it has none itself (an
 * inbox event, whose item may have). A member's `toJSON`, if it has one, is called without its key.
 */
export function stringifyWithRaw(value: unknown, inMembers = false): string | undefined {
  const holds = hasRawMembers(value);
  if (!holds && !(inMembers && value !== null && typeof value === 'object' && !Array.isArray(value) && !('toJSON' in value))) return JSON.stringify(value);
  const raw = holds ? (value as WithRawMembers)[RAW_MEMBERS]! : undefined;
  const object = value as Record<string, unknown>;
  let text = '{';
  for (const key of Object.keys(object)) {
    const member = raw?.get(key);
    const written = member && Object.getOwnPropertyDescriptor(object, key)?.get === member.get ? member.text : stringifyWithRaw(object[key]);
    if (written === undefined) continue;
    text += `${text.length > 1 ? ',' : ''}${JSON.stringify(key)}:${written}`;
  }
  return `${text}}`;
}
