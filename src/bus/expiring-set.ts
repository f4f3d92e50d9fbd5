/**
 * A set whose members expire after a fixed time, oldest first. Backs the in-memory dedupe of
 * platform event ids and delivered outbound ids without growing forever.
 */
export class ExpiringSet {
  private expiries = new Map<string, number>();

  constructor(
    private readonly ttlMs: number,
    private readonly now: () => number,
    private readonly maxSize = 200_000,
  ) {}

  /** Adds `member`; false when it was already present and unexpired (SET NX semantics). */
  add(member: string): boolean {
    this.sweep();
    const expiresAt = this.expiries.get(member);
    if (expiresAt !== undefined && expiresAt > this.now()) return false;
    this.expiries.delete(member);
    this.expiries.set(member, this.now() + this.ttlMs);
    if (this.expiries.size > this.maxSize) {
      const oldest = this.expiries.keys().next().value;
      if (oldest !== undefined) this.expiries.delete(oldest);
    }
    return true;
  }

  has(member: string): boolean {
    const expiresAt = this.expiries.get(member);
    return expiresAt !== undefined && expiresAt > this.now();
  }

  private sweep(): void {
    const now = this.now();
    // Insertion order is expiry order because the TTL is constant.
    for (const [member, expiresAt] of this.expiries) {
      if (expiresAt > now) break;
      this.expiries.delete(member);
    }
  }
}
