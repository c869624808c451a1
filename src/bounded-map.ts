/**
 * A Map that holds at most `limit` entries: a new key set while it is full pushes out the oldest
 * (a Map keeps its keys in the order they were set). The process's memos of what it read or
 * computed lately use it, so that callers passing ever new keys (random API keys, origins,
 * templates) cannot add entries without end. It bounds their number, not their size. A key set
 * again counts as new.
 */
export class BoundedMap<K, V> extends Map<K, V> {
  constructor(private readonly limit: number) {
    super();
    if (!(Number.isInteger(limit) && limit >= 1)) throw new RangeError(`A BoundedMap holds at least one entry, not ${limit}`);
  }

  override set(key: K, value: V): this {
    if (this.has(key)) this.delete(key);
    else if (this.size >= this.limit) this.delete(this.keys().next().value as K);
    return super.set(key, value);
  }
}
