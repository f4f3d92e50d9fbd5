import { forgetOldest } from "../bounded.js";

/**
 * A map whose entries expire a fixed time after they were last set, oldest first, and which holds
 * at most `maxSize` of them: the memory bus's record of which platform message shows a reply's draft.
 *
 * Expired entries are never answered, and are swept out at most once a sixteenth of the TTL: a
 * sweep walks the map from its front, past the holes deleted entries leave (src/bounded.ts).
 */
export class ExpiringMap<V> {
  private readonly entries = new Map<string, { value: V; expiresAt: number }>();
  private nextSweepAt = Number.NEGATIVE_INFINITY;

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
    forgetOldest(this.entries, this.maxSize);
  }

  delete(key: string): void {
    this.entries.delete(key);
  }

  private sweep(): void {
    const now = this.now();
    if (now < this.nextSweepAt) return;
    this.nextSweepAt = now + Math.max(1, this.ttlMs / 16);
    for (const [key, entry] of this.entries) {
      if (entry.expiresAt > now) break;
      this.entries.delete(key);
    }
  }
}
