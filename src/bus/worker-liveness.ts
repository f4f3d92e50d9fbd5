/**
 * A worker's side of leases that live by their worker (see lua/includes/lease-held.lua): its id,
 * the leases it holds, and their renewal, one command for all of them (renew-worker-2.lua), at
 * most once per quarter of the TTL however many turns ask for it.
 */
import { randomUUID } from "node:crypto";
import type { RedisClient } from "../redis/client.js";
import { type LuaScript, runScript } from "../redis/scripts.js";
import type { Claim } from "./message-bus.js";
import type { BusKeys } from "./redis-keys.js";

export interface WorkerLivenessOptions {
  redis: RedisClient;
  keys: BusKeys;
  script: LuaScript;
  leaseTtlMs: number;
  now: () => number;
  /** What the scripts get as "now": the injected clock, or "" for Redis's own. */
  clock: () => string;
  /** The definitive check of one lease, for a claim the batch cannot vouch for. */
  holds: (claim: Claim) => Promise<boolean>;
}

export class WorkerLiveness {
  /**
   * This process's worker id: its leases hold while its entry in `workers` is renewed. A new id
   * after the entry ran out (a stall past the TTL), so the void leases of the old one never revive.
   */
  id = randomUUID();
  /** Leases handed out and not ended: session key -> token, asked about by each renewal. */
  private readonly held = new Map<string, number>();
  private renewal: Promise<Map<string, string> | "lapsed"> | undefined;
  private renewedAt = Number.NEGATIVE_INFINITY;

  constructor(private readonly options: WorkerLivenessOptions) {}

  claimed(claim: Claim): void {
    this.held.set(claim.sessionKey, claim.token);
  }

  /** The lease ended (acked, released, dead-lettered): the renewal no longer asks about it. */
  ended(claim: Claim): void {
    if (this.held.get(claim.sessionKey) === claim.token) this.held.delete(claim.sessionKey);
  }

  /** Renews every lease of this worker (shared by the calls within a quarter of the TTL); whether `claim` still holds. */
  async renew(claim: Claim): Promise<boolean> {
    const { now, leaseTtlMs } = this.options;
    if (!this.renewal || now() - this.renewedAt >= leaseTtlMs / 4) {
      this.renewedAt = now();
      this.renewal = this.renewAll();
      this.renewal.catch(() => {
        this.renewedAt = Number.NEGATIVE_INFINITY;
      });
    }
    const leases = await this.renewal;
    if (leases === "lapsed") {
      // Not kept: the claims made under the new id since must not be judged by it.
      this.renewedAt = Number.NEGATIVE_INFINITY;
      return false;
    }
    // Not in the batch, or not as this claim has it (claimed again since the batch went out): ask.
    if (leases.get(claim.sessionKey) === `${claim.token}:${this.id}`) return true;
    return this.options.holds(claim);
  }

  private async renewAll(): Promise<Map<string, string> | "lapsed"> {
    const { redis, keys, script, leaseTtlMs, clock } = this.options;
    const workerId = this.id;
    const asked = [...this.held];
    const reply = await runScript(redis, script, [keys.workers, keys.own], [clock(), leaseTtlMs, workerId, ...asked.map(([sessionKey]) => sessionKey)]);
    if (reply === -1) {
      // Ran out (or reaped): every lease of this id is void. Go on under a new one.
      if (this.id === workerId) this.id = randomUUID();
      this.held.clear();
      return "lapsed";
    }
    const leases = new Map<string, string>();
    (reply as Array<string | null>).forEach((lease, index) => {
      const [sessionKey, token] = asked[index]!;
      leases.set(sessionKey, lease ?? "");
      // Lost (taken over): asked about no more, unless claimed again meanwhile.
      if (lease !== `${token}:${workerId}` && this.held.get(sessionKey) === token) this.held.delete(sessionKey);
    });
    return leases;
  }
}
