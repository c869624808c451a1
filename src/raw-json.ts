/**
 * Members of an object whose JSON text is already known (a stored value, written by
 * `JSON.stringify`), so that writing the object splices that text in rather than parsing and
 * serializing the value again: what `JSON.rawJSON` does in later Node versions than ours.
 */
const RAW_MEMBERS = Symbol('raw JSON members');

type WithRawMembers = { [RAW_MEMBERS]?: Map<string, string> };

/** Records `text` as the JSON of `item[key]`, which must be valid JSON for the value the member holds. */
export function setRawMember(item: object, key: string, text: string): void {
  const holder = item as WithRawMembers;
  if (!holder[RAW_MEMBERS]) Object.defineProperty(holder, RAW_MEMBERS, { value: new Map(), enumerable: false });
  holder[RAW_MEMBERS]!.set(key, text);
}

/** Forgets the text of `item[key]`: the member was given another value. */
export function dropRawMember(item: object, key: string): void {
  (item as WithRawMembers)[RAW_MEMBERS]?.delete(key);
}

/** Whether `value` is an object with a member whose raw text stringifyWithRaw would write. */
export function hasRawMembers(value: unknown): boolean {
  const raw = (value as WithRawMembers | null | undefined)?.[RAW_MEMBERS];
  return raw !== undefined && raw.size > 0 && !('toJSON' in (value as object));
}

/**
 * `JSON.stringify(value)`, except that a member with a raw text is written as that text. Only the
 * object's own members are looked at (items of a page are flat objects), and a member's `toJSON`,
 * if it has one, is called without its key.
 */
export function stringifyWithRaw(value: unknown): string | undefined {
  if (!hasRawMembers(value)) return JSON.stringify(value);
  const raw = (value as WithRawMembers)[RAW_MEMBERS]!;
  const object = value as Record<string, unknown>;
  let text = '{';
  for (const key of Object.keys(object)) {
    const member = raw.get(key) ?? JSON.stringify(object[key]);
    if (member === undefined) continue;
    text += `${text.length > 1 ? ',' : ''}${JSON.stringify(key)}:${member}`;
  }
  return `${text}}`;
}
