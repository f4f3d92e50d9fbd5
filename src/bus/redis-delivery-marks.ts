/**
 * Once-only marks across gateways on the Redis bus: a reply chunk delivered (`sent:<id>#<chunk>`)
 * and a platform event answered at a gateway (`seen:<channel>:<event>`, the publish dedupe's own
 * marker). The first mark wins.
 *
 * A mark is one command, `SET key token NX PX ttl GET`: it sets the mark or reads whose it is in
 * the same step (no script, no second read). The token is this call's own, so the same call
 * replayed after its reply was lost (ioredis resends it on the new connection) finds its own token
 * and still counts as the winner; without that, the reply would be taken for delivered elsewhere
 * and never sent. A mark whose replication failed (`acceptAfterReplicas`) is retried with the same
 * token, so it is still ours.
 */
import { randomUUID } from "node:crypto";
import type { RedisClient } from "../redis/client.js";
import type { BusKeys } from "./redis-keys.js";
import type { ReplicaWait } from "./replica-wait.js";
import { forgetOldest } from "../bounded.js";

const DAY_MS = 24 * 60 * 60 * 1000;
/** Marks whose replication failed, kept (with their token) for a retry at most. */
const UNREPLICATED_KEPT = 10_000;

export interface DeliveryMarksOptions {
  redis: RedisClient;
  keys: BusKeys;
  /** Waits for `acceptAfterReplicas` replicas to have this connection's writes (a no-op at 0). */
  replicated: ReplicaWait;
  /** How long a `seen` mark keeps a platform event from being answered twice, and a `sent` mark a reply chunk from going out twice. */
  dedupeTtlMs: number;
}

export class DeliveryMarks {
  /** Delivery marks set but not confirmed on the replicas yet, with their token. */
  private readonly unreplicated = new Map<string, string>();

  constructor(private readonly options: DeliveryMarksOptions) {}

  async markEventSeen(channel: string, eventId: string): Promise<boolean> {
    const ours = await this.mark(this.options.keys.seen(channel, eventId), randomUUID(), this.options.dedupeTtlMs);
    await this.options.replicated();
    return ours;
  }

  async markDelivered(outboundId: string): Promise<boolean> {
    const token = this.unreplicated.get(outboundId) ?? randomUUID();
    // Kept as long as a platform event is deduplicated (a day by default), as the in-process bus
    // keeps it: long enough for every redelivery (a reclaimed stream entry, a re-run turn), and a
    // busy bot's marks do not pile up for a week (one key per reply chunk).
    if (!(await this.mark(this.options.keys.sent(outboundId), token, this.options.dedupeTtlMs))) return false;
    // Replicated before the reply goes out: a failover must not forget it was sent.
    try {
      await this.options.replicated();
    } catch (error) {
      this.unreplicated.set(outboundId, token);
      forgetOldest(this.unreplicated, UNREPLICATED_KEPT);
      throw error;
    }
    this.unreplicated.delete(outboundId);
    return true;
  }

  async isDelivered(outboundId: string): Promise<boolean> {
    return (await this.options.redis.exists(this.options.keys.sent(outboundId))) === 1;
  }

  async recordDraftMessage(channel: string, replyId: string, platformMessageId: string): Promise<void> {
    await this.options.redis.set(this.options.keys.draftMessage(channel, replyId), platformMessageId, "PX", DAY_MS);
  }

  async draftMessageOf(channel: string, replyId: string): Promise<string | undefined> {
    return (await this.options.redis.get(this.options.keys.draftMessage(channel, replyId))) ?? undefined;
  }

  /** Sets `key` to `token` unless it is set; true when it is ours (set now, or by this token before). */
  private async mark(key: string, token: string, ttlMs: number): Promise<boolean> {
    const holder = await this.options.redis.set(key, token, "PX", ttlMs, "NX", "GET");
    return holder === null || holder === token;
  }
}
