/**
 * A map whose entries expire a fixed time after they were last set, oldest first, and which holds
 * at most `maxSize` of them. Backs the in-memory dedupe and draft bookkeeping of the memory bus
 * without growing forever.
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

  private sweep(): void {
    const now = this.now();
    for (const [key, entry] of this.entries) {
      if (entry.expiresAt > now) break;
      this.entries.delete(key);
    }
  }
}

/** A set whose members expire after a fixed time: an ExpiringMap with SET NX semantics. */
export class ExpiringSet {
  private readonly members: ExpiringMap<true>;

  constructor(ttlMs: number, now: () => number, maxSize = 200_000) {
    this.members = new ExpiringMap(ttlMs, now, maxSize);
  }

  /** Adds `member`; false when it was already present and unexpired. */
  add(member: string): boolean {
    if (this.members.has(member)) return false;
    this.members.set(member, true);
    return true;
  }

  has(member: string): boolean {
    return this.members.has(member);
  }
}
