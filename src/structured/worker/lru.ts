/** A small least-recently-used map on top of `Map`'s insertion order. */
export class LruCache<K, V> {
  private readonly map = new Map<K, V>();

  /** `capacity`: most entries kept (at least 1); the least recently used entry is evicted beyond it. */
  constructor(readonly capacity: number) {
    if (capacity < 1) throw new RangeError("LRU capacity must be at least 1");
  }

  /** The value for `key` (marking it most recently used), or undefined. */
  get(key: K): V | undefined {
    const value = this.map.get(key);
    if (value !== undefined) {
      this.map.delete(key);
      this.map.set(key, value);
    }
    return value;
  }

  /** Stores `value` as the most recently used entry, evicting the oldest entry when full. */
  set(key: K, value: V): void {
    this.map.delete(key);
    this.map.set(key, value);
    if (this.map.size > this.capacity) this.map.delete(this.map.keys().next().value as K);
  }

  /** Removes `key` (a no-op when absent). */
  delete(key: K): void {
    this.map.delete(key);
  }

  /** Number of entries. */
  get size(): number {
    return this.map.size;
  }

  /** Removes every entry. */
  clear(): void {
    this.map.clear();
  }
}
