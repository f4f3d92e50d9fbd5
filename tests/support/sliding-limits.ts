/**
 * The fakes' own rate limits: at most `limit` calls in any `windowMs`, counted at arrival (the
 * strictest reading of a platform's "N per T"). A fake that enforces them answers a call over a
 * budget with its platform's real rate-limit response, and counts how often it did.
 */
export interface SlidingLimit {
  limit: number;
  windowMs: number;
}

export class SlidingLimits {
  private readonly calls = new Map<string, number[]>();

  /**
   * Counts a call against every `[key, limit]` given, or against none: undefined when it may go
   * ahead, else the budget it broke and the ms until it has room.
   */
  hit(budgets: ReadonlyArray<[key: string, limit: SlidingLimit | undefined]>, now = Date.now()): { key: string; retryAfterMs: number } | undefined {
    for (const [key, limit] of budgets) {
      if (!limit) continue;
      const recent = (this.calls.get(key) ?? []).filter((time) => now - time < limit.windowMs);
      this.calls.set(key, recent);
      if (recent.length >= limit.limit) return { key, retryAfterMs: recent[recent.length - limit.limit]! + limit.windowMs - now };
    }
    for (const [key, limit] of budgets) if (limit) this.calls.get(key)!.push(now);
    return undefined;
  }
}
