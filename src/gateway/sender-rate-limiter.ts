/** Admission's per-sender rate limit (`rateLimit`): a token bucket per sender. */
import { ConfigError } from "../errors.js";
import type { RateLimit } from "./channel.js";

/**
 * A token bucket per sender: `messages` at once, refilled evenly over `perMs`. Over the limit, the
 * first refusal of a window says "notice" and the rest "silent". Idle senders are forgotten.
 */
export class SenderRateLimiter {
  private readonly buckets = new Map<string, { tokens: number; updatedAt: number; noticedAt?: number }>();
  private sweptAt: number;

  constructor(
    private readonly limit: RateLimit,
    private readonly now: () => number,
  ) {
    if (!(limit.messages >= 1) || !(limit.perMs > 0)) {
      throw new ConfigError(`rate limit ${limit.messages} per ${limit.perMs} ms: allow at least 1 message per positive time`, "rateLimit");
    }
    this.sweptAt = now();
  }

  take(sender: string): "allowed" | "notice" | "silent" {
    const time = this.now();
    this.sweep(time);
    const bucket = this.buckets.get(sender) ?? { tokens: this.limit.messages, updatedAt: time };
    const refill = (Math.max(0, time - bucket.updatedAt) * this.limit.messages) / this.limit.perMs;
    bucket.tokens = Math.min(this.limit.messages, bucket.tokens + refill);
    bucket.updatedAt = time;
    this.buckets.set(sender, bucket);
    if (bucket.tokens >= 1) {
      bucket.tokens -= 1;
      return "allowed";
    }
    if (bucket.noticedAt !== undefined && time - bucket.noticedAt < this.limit.perMs) return "silent";
    bucket.noticedAt = time;
    return "notice";
  }

  /** Once a window: a bucket untouched for a whole window is full again and can go. */
  private sweep(time: number): void {
    if (time - this.sweptAt < this.limit.perMs) return;
    this.sweptAt = time;
    for (const [sender, bucket] of this.buckets) {
      if (time - bucket.updatedAt >= this.limit.perMs) this.buckets.delete(sender);
    }
  }
}
