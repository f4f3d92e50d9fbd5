/**
 * A map whose entries expire a fixed time after they were last set, oldest first, and which holds
 * at most `maxSize` of them: the memory bus's record of which platform message shows a reply's draft.
 */
export class ExpiringMap<V> {
  private readonly entries = new Map<string, { value: V; expiresAt: number }>();

  constructor(
    private readonly ttlMs: number,
    private readonly now: () => number,
    private readonly maxSize = 200_000,
  ) {}

  get(key: string): V | undefined {
    const entry = this.entries.get(key);
    return entry !== undefined && entry.expiresAt > this.now() ? entry.value : undefined;
  }

  has(key: string): boolean {
    const entry = this.entries.get(key);
    return entry !== undefined && entry.expiresAt > this.now();
  }

  set(key: string, value: V): void {
    this.sweep();
    // Re-inserted, so insertion order stays expiry order (the TTL is constant).
    this.entries.delete(key);
    this.entries.set(key, { value, expiresAt: this.now() + this.ttlMs });
    if (this.entries.size > this.maxSize) {
      const oldest = this.entries.keys().next().value;
      if (oldest !== undefined) this.entries.delete(oldest);
    }
  }

  delete(key: string): void {
    this.entries.delete(key);
  }

  private sweep(): void {
    const now = this.now();
    for (const [key, entry] of this.entries) {
      if (entry.expiresAt > now) break;
      this.entries.delete(key);
    }
  }
}
