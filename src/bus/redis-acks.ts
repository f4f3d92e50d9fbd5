/**
 * Acks on the Redis bus, batched: the turns a worker ends in one moment (one turn of the event loop)
 * go to Redis in one ack-many-7.lua call, each with the entries its session's history gains, which reads the clock and the worker's liveness and writes
 * its replay marker once for all of them. A worker running many turns at once ends several in the
 * same moment under load, which is exactly when Redis's work per message matters; alone, a turn
 * costs what it did with a script of its own.
 *
 * Each turn keeps its own outcome: a turn whose lease was lost is refused (BusError "lease-lost")
 * and nothing of it is done, while the others of the batch go through. The whole call failing (Redis
 * away) fails every turn of it, as their own calls would have; ioredis's resend of a call whose
 * reply was lost gets the first run's reply back (see the script).
 */
import { randomUUID } from "node:crypto";
import { BusError } from "../errors.js";
import type { RedisClient } from "../redis/client.js";
import { type LuaScript, runScript } from "../redis/scripts.js";
import type { Claim } from "./message-bus.js";
import type { BusKeys } from "./redis-keys.js";

/** One turn's end: what the script needs of it, and who waits for the outcome. */
export interface PendingAck {
  claim: Claim;
  consumed: number;
  /** The reply's channel and stream event, when the turn ends with one. */
  reply?: { channel: string; event: string };
  /** Entries (stored text) the session's history gains with this turn. */
  history: string[];
  resolve: () => void;
  reject: (error: unknown) => void;
}

export interface RedisAcksOptions {
  redis: RedisClient;
  keys: BusKeys;
  script: LuaScript;
  /** What the scripts get as "now": the injected clock, or "" for Redis's own. */
  clock: () => string;
  streamMaxLength: number;
  /** The store's session keys under this bus's hash tag, where a turn's history goes (see MessageBus.historyOnAck). */
  history?: HistoryKeys;
}

/** Where a Redis store keeps sessions under a hash tag: its `sessions` ZSET, and what every session's keys start with. */
export interface HistoryKeys {
  sessions: string;
  sessionPrefix: string;
}

export class RedisAcks {
  private pending: PendingAck[] = [];

  constructor(private readonly options: RedisAcksOptions) {}

  /** Ends the turn of `claim` with the next batch; rejects with BusError "lease-lost" when its lease is not held. */
  ack(claim: Claim, consumed: number, reply?: { channel: string; event: string }, history: string[] = []): Promise<void> {
    if (history.length > 0 && !this.options.history) return Promise.reject(new BusError("this bus keeps no history: append it to the store before the ack", "invalid"));
    return new Promise<void>((resolve, reject) => {
      if (this.pending.length === 0) setImmediate(() => void this.flush());
      this.pending.push({ claim, consumed: Math.min(consumed, claim.messages.length), reply, history, resolve, reject });
    });
  }

  private async flush(): Promise<void> {
    const batch = this.pending;
    this.pending = [];
    const { redis, keys, script, clock, streamMaxLength, history } = this.options;
    const turns = batch.flatMap(({ claim, consumed, reply, history: entries }) => [
      claim.sessionKey,
      claim.token,
      consumed,
      claim.messages[0]?.id ?? "",
      claim.attempt,
      reply?.channel ?? "",
      reply?.event ?? "",
      entries.length,
      ...entries,
    ]);
    let outcomes: unknown[];
    try {
      outcomes = (await runScript(
        redis,
        script,
        // Without a store's keys no turn carries history, and KEYS[7] is never touched.
        [keys.ready, keys.workers, keys.own, keys.wake, keys.attempts, keys.done(randomUUID()), history?.sessions ?? keys.ready],
        [clock(), keys.mailboxPrefix, keys.outboundPrefix, streamMaxLength, history?.sessionPrefix ?? "", ...turns],
      )) as unknown[];
    } catch (error) {
      for (const turn of batch) turn.reject(error);
      return;
    }
    batch.forEach((turn, index) => {
      const outcome = outcomes[index];
      if (outcome === 1) return turn.resolve();
      const why = typeof outcome === "string" && outcome.startsWith("LEASE_LOST ") ? outcome.slice("LEASE_LOST ".length) : `unexpected reply ${String(outcome)}`;
      turn.reject(new BusError(`lease on ${turn.claim.sessionKey} (token ${turn.claim.token}) is no longer held: ${why}`, "lease-lost"));
    });
  }
}
