/**
 * The fakes' own rate limits: at most `limit` calls in any `windowMs`, counted at arrival (the
 * strictest reading of a platform's "N per T"). A fake that enforces them answers a call over a
 * budget with its platform's real rate-limit response, and counts how often it did.
 *
 * With `FAKE_LIMIT_DEBUG=1` in the environment a fake prints every call it refuses
 * ({@link logRefusal}): the call, the budget it broke (key, limit, window) and the calls in that
 * window, each with its arrival time and what it was, so a refusal can be laid beside the send
 * governor's accounting.
 */
export interface SlidingLimit {
  limit: number;
  windowMs: number;
}

/** A call counted in a budget: when it arrived (ms since the epoch) and what it was. */
export interface CountedCall {
  at: number;
  label: string;
}

/** The budget a call broke: its key, its limit, the calls in its window, and the ms until it has room. */
export interface Refusal {
  key: string;
  limit: number;
  windowMs: number;
  retryAfterMs: number;
  /** The calls in the window when the call arrived, oldest first. */
  calls: CountedCall[];
}

export class SlidingLimits {
  private readonly calls = new Map<string, CountedCall[]>();

  /**
   * Counts a call against every `[key, limit]` given, or against none: undefined when it may go
   * ahead, else the budget it broke and the ms until it has room. `label` names the call in
   * the refusals of later calls.
   */
  hit(budgets: ReadonlyArray<[key: string, limit: SlidingLimit | undefined]>, now = Date.now(), label = ""): Refusal | undefined {
    for (const [key, limit] of budgets) {
      if (!limit) continue;
      const recent = (this.calls.get(key) ?? []).filter((call) => now - call.at < limit.windowMs);
      this.calls.set(key, recent);
      if (recent.length >= limit.limit) {
        const retryAfterMs = recent[recent.length - limit.limit]!.at + limit.windowMs - now;
        return { key, limit: limit.limit, windowMs: limit.windowMs, retryAfterMs, calls: [...recent] };
      }
    }
    for (const [key, limit] of budgets) if (limit) this.calls.get(key)!.push({ at: now, label });
    return undefined;
  }
}

/** Whether the fakes print their refusals (`FAKE_LIMIT_DEBUG`). */
export function limitDebugOn(): boolean {
  const value = process.env.FAKE_LIMIT_DEBUG;
  return value !== undefined && value !== "" && value !== "0";
}

/**
 * Prints one refused call when `FAKE_LIMIT_DEBUG` is on: one line
 * `<platform> 429 <call> budget=<key> <limit>/<window>ms retry=<ms> at=<time> window[n]: <ms> <call>, …`,
 * each call of the window given by its age relative to the refused one (negative: earlier).
 */
export function logRefusal(platform: string, label: string, refusal: Refusal, at = Date.now()): void {
  if (!limitDebugOn()) return;
  const window = refusal.calls.map((call) => `${call.at - at}ms ${call.label}`).join(", ");
  console.log(
    `${platform} 429 ${label} budget=${refusal.key} ${refusal.limit}/${refusal.windowMs}ms retry=${Math.round(refusal.retryAfterMs)}ms at=${new Date(at).toISOString()} (${at}) window[${refusal.calls.length}]: ${window}`,
  );
}
