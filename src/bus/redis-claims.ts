/**
 * The claiming side of the Redis bus: claim-7.lua called in a loop until sessions are due, with a
 * blocking wait on the wake-up list (a connection of its own) in between, and the reaping of dead
 * workers asked for at most every quarter second.
 *
 * A drained worker (its last claim took fewer sessions than it asked for) waits for a wake-up token
 * before claiming again, instead of claiming into an empty ready queue; a session readied since left
 * a token, so that wait ends at once then. Each claim call carries a claim id: replayed after a lost
 * reply, it hands back the same claims.
 */
import { randomUUID } from "node:crypto";
import type { RedisClient } from "../redis/client.js";
import { type LuaScript, runScript } from "../redis/scripts.js";
import { BusError } from "../errors.js";
import type { InboundMessage } from "./message.js";
import { parseInboundPayload, refusedInbound } from "./payloads.js";
import type { Claim, ClaimOptions } from "./message-bus.js";
import type { BusKeys } from "./redis-keys.js";
import type { WorkerLiveness } from "./worker-liveness.js";

export interface RedisClaimsOptions {
  redis: RedisClient;
  keys: BusKeys;
  script: LuaScript;
  liveness: WorkerLiveness;
  leaseTtlMs: number;
  maxBatch: number;
  now: () => number;
  /** What the scripts get as "now": the injected clock, or "" for Redis's own. */
  clock: () => string;
  isClosed: () => boolean;
  /** A queued payload was refused (it did not parse): reported, and dead-lettered by the worker. */
  onError?: (error: unknown) => void;
}

export class RedisClaims {
  private blocking: RedisClient | undefined;
  /** When this bus last asked a claim to reap dead workers (its own clock). */
  private reapedAt = Number.NEGATIVE_INFINITY;
  /** The last claim took fewer sessions than asked: wait for a wake-up token before the next one. */
  private drained = false;

  constructor(private readonly options: RedisClaimsOptions) {}

  /** How often claims reap dead workers: a dead worker's sessions wait at most its TTL plus this. */
  private get reapEveryMs(): number {
    return Math.min(500, this.options.leaseTtlMs / 4);
  }

  async claimSessions(options: ClaimOptions & { max: number }): Promise<Claim[]> {
    const { now } = this.options;
    const timeoutMs = options.timeoutMs ?? Number.POSITIVE_INFINITY;
    const deadline = Date.now() + timeoutMs;
    let wakeTaken = 0;
    if (this.drained && timeoutMs > 0) wakeTaken = await this.waitForWake(Math.min(timeoutMs, 1_000), options.signal);
    for (;;) {
      if (this.options.isClosed() || options.signal?.aborted) return [];
      const wanted = Math.max(1, Math.floor(options.max));
      const reply = await this.claimOnce(wanted, wakeTaken);
      wakeTaken = 0;
      if (reply[0] !== "") {
        const claims = this.claimsOf(reply);
        this.drained = claims.length < wanted;
        return claims;
      }
      this.drained = false;
      const remaining = deadline - Date.now();
      if (timeoutMs <= 0 || remaining <= 0) return [];
      const nextDue = Number(reply[1]);
      // A worker's liveness ran out (nextDue passed): reap on the next claim rather than waiting.
      if (nextDue >= 0 && nextDue <= now()) this.reapedAt = Number.NEGATIVE_INFINITY;
      const untilDue = nextDue >= 0 ? Math.max(10, nextDue - now()) : 1_000;
      wakeTaken = await this.waitForWake(Math.min(remaining, untilDue, 1_000), options.signal);
    }
  }

  /**
   * One claim call now, without waiting (a partitioned bus sweeps its partitions with it): the
   * claims, or when this partition's next session is due (-1: none). `wakeTaken`: wake-up tokens of
   * this partition the caller took already.
   */
  async claimNow(wanted: number, wakeTaken: number): Promise<{ claims: Claim[]; nextDue: number }> {
    const reply = await this.claimOnce(Math.max(1, Math.floor(wanted)), wakeTaken);
    if (reply[0] !== "") return { claims: this.claimsOf(reply), nextDue: -1 };
    const nextDue = Number(reply[1]);
    if (nextDue >= 0 && nextDue <= this.options.now()) this.reapedAt = Number.NEGATIVE_INFINITY;
    return { claims: [], nextDue };
  }

  /** The `count` sessions ready longest with when each is due, and, `withDeath`, when the first worker's liveness runs out (-1: none). */
  async peek(count: number, withDeath: boolean): Promise<{ ready: Array<{ sessionKey: string; dueAt: number }>; nextDeath?: number }> {
    const { redis, keys } = this.options;
    const [ready, first] = await Promise.all([redis.zrange(keys.ready, 0, count - 1, "WITHSCORES"), withDeath ? redis.zrange(keys.workers, 0, 0, "WITHSCORES") : undefined]);
    const due: Array<{ sessionKey: string; dueAt: number }> = [];
    for (let index = 0; index + 1 < ready.length; index += 2) due.push({ sessionKey: ready[index]!, dueAt: Number(ready[index + 1]) });
    if (!first) return { ready: due };
    return { ready: due, nextDeath: first[1] === undefined ? -1 : Number(first[1]) };
  }

  close(): void {
    this.blocking?.disconnect();
  }

  /** One claim-7 call; its reply: four values per claim, or `["", next due]`. */
  private async claimOnce(wanted: number, wakeTaken: number): Promise<unknown[]> {
    const { redis, keys, now } = this.options;
    // A claim id per call: the call replayed after a lost reply hands back the same claims.
    const claimId = randomUUID();
    const reap = now() - this.reapedAt >= this.reapEveryMs;
    if (reap) this.reapedAt = now();
    return (await runScript(
      redis,
      this.options.script,
      [keys.ready, keys.workers, keys.own, keys.fence, keys.attempts, keys.claimed(claimId), keys.wake],
      [this.options.clock(), this.options.leaseTtlMs, keys.mailboxPrefix, this.options.maxBatch, wanted, this.options.liveness.id, reap ? "1" : "0", wakeTaken],
    )) as unknown[];
  }

  /** A queued message as the model reads it, or its stand-in when the payload did not parse (payloads.ts). */
  private inboundOf(sessionKey: string, raw: string): InboundMessage {
    const parsed = parseInboundPayload(raw);
    if (parsed.ok) return parsed.value;
    this.options.onError?.(new BusError(`a queued message in ${sessionKey} was refused: ${parsed.problem}`, "invalid"));
    return refusedInbound(sessionKey, raw, parsed.problem);
  }

  private claimsOf(reply: unknown[]): Claim[] {
    const claims: Claim[] = [];
    for (let index = 0; index + 3 < reply.length; index += 4) {
      const messages = (reply[index + 3] as string[] | undefined) ?? [];
      const claim: Claim = {
        sessionKey: String(reply[index]),
        token: Number(reply[index + 1]),
        attempt: Number(reply[index + 2]),
        messages: messages.map((raw) => this.inboundOf(String(reply[index]), raw)),
      };
      this.options.liveness.claimed(claim);
      claims.push(claim);
    }
    return claims;
  }

  /** Blocks on the wake list (a dedicated connection) until a message arrives or the wait ends; 1 when it took a wake-up token. */
  async waitForWake(ms: number, signal?: AbortSignal): Promise<number> {
    this.blocking ??= this.options.redis.duplicate();
    const wait = this.blocking.blpop(this.options.keys.wake, Math.max(0.01, ms / 1000)).then(
      (popped) => (popped ? 1 : 0),
      () => 0,
    );
    if (!signal) return wait;
    // The listener goes once the wait is over: the signal lives as long as the worker does.
    let onAbort: (() => void) | undefined;
    const aborted = new Promise<number>((resolve) => {
      onAbort = () => resolve(0);
      signal.addEventListener("abort", onAbort, { once: true });
    });
    try {
      return await Promise.race([wait, aborted]);
    } finally {
      signal.removeEventListener("abort", onAbort!);
    }
  }
}
