/** A second bound on a BoundedMap: the weights of its keys together (for example their characters). */
export interface WeightBudget<K> {
  total: number;
  weigh(key: K): number;
}

/**
 * A Map that holds at most `limit` entries, and with a `budget` at most that much weight: a new key
 * set while it is full pushes out the oldest (a Map keeps its keys in the order they were set), and
 * a key heavier than the whole budget is not kept at all. The process's memos of what it read or
 * computed lately use it, so that callers passing ever new keys (random API keys, origins,
 * templates) cannot add entries without end. A key set again counts as new.
 */
export class BoundedMap<K, V> extends Map<K, V> {
  private weight = 0;
  private clearCount = 0;

  constructor(
    private readonly limit: number,
    private readonly budget?: WeightBudget<K>,
  ) {
    super();
    if (!(Number.isInteger(limit) && limit >= 1)) throw new RangeError(`A BoundedMap holds at least one entry, not ${limit}`);
  }

  override set(key: K, value: V): this {
    this.delete(key);
    const weight = this.budget?.weigh(key) ?? 0;
    const total = this.budget?.total ?? Infinity;
    if (weight > total) return this;
    while (this.size > 0 && (this.size >= this.limit || this.weight + weight > total)) this.delete(this.keys().next().value as K);
    this.weight += weight;
    return super.set(key, value);
  }

  override delete(key: K): boolean {
    if (!super.has(key)) return false;
    this.weight -= this.budget?.weigh(key) ?? 0;
    return super.delete(key);
  }

  /**
   * How many times it was cleared. A memo that reads a value, awaits, then sets it compares this
   * before and after: an answer read before a clear (a revocation) must not be stored after it.
   */
  get clears(): number {
    return this.clearCount;
  }

  override clear(): void {
    this.clearCount += 1;
    this.weight = 0;
    super.clear();
  }
}

/**
 * A BoundedMap for each owner (a database), made on first use: the memos of several apps in one
 * process (tests make many) stay apart, and go with their owner.
 */
export function boundedMapsBy<Owner extends object, K, V>(limit: number): (owner: Owner) => BoundedMap<K, V> {
  const maps = new WeakMap<Owner, BoundedMap<K, V>>();
  return (owner) => {
    let map = maps.get(owner);
    if (!map) maps.set(owner, (map = new BoundedMap<K, V>(limit)));
    return map;
  };
}
