/**
 * The send budgets of one bot account in Redis, shared by every gateway of the deployment: two
 * gateways of one bot (a leader hand-over, a webhook answered by a follower) take from the same
 * windows, so together they never exceed them. One script call per take (take-13.lua), judged by
 * Redis's clock, one per 429 (close-1.lua), and one per call the platform answered late
 * (answered-6.lua).
 *
 * Keys: `{<prefix>:quota:<channel>:<account>}:<scope key>`. The hash tag is the account's, so one
 * take's keys (a chat's, its group's, the bot's) share a cluster slot, and accounts spread over
 * the slots (the deployment's key convention: an area of its own takes `{prefix:area}`).
 */
import { randomUUID } from "node:crypto";
import type { RedisClient } from "../redis/client.js";
import { loadScript, runScript } from "../redis/scripts.js";
import { MAX_QUOTA_SCOPES } from "./quotas.js";
import type { QuotaSlot, QuotaStore, TakeResult } from "./quota-store.js";

const scriptsDirectory = new URL("./lua/", import.meta.url);
const takeScript = loadScript(scriptsDirectory, `take-${2 * MAX_QUOTA_SCOPES + 1}.lua`);
const closeScript = loadScript(scriptsDirectory, "close-1.lua");
const answeredScript = loadScript(scriptsDirectory, `answered-${MAX_QUOTA_SCOPES}.lua`);

export interface RedisQuotaStoreOptions {
  redis: RedisClient;
  /** The deployment's key prefix (`redis.prefix`). */
  prefix: string;
  channel: string;
  /** The platform account (a hash of its token). */
  account: string;
  /** Tests pass a clock; production lets Redis judge. */
  now?: () => number;
}

/** The hash tag of one account's budgets. */
export function quotaTag(prefix: string, channel: string, account: string): string {
  return `{${prefix}:quota:${channel}:${account}}`;
}

export function createRedisQuotaStore(options: RedisQuotaStoreOptions): QuotaStore {
  const { redis } = options;
  const tag = quotaTag(options.prefix, options.channel, options.account);
  const keyOf = (slot: QuotaSlot) => `${tag}:${slot.key}`;
  const clock = () => (options.now ? String(options.now()) : "");

  /** Six keys and their limit, window and reserve: a slot not used repeats the first key with limit 0. */
  function scriptSlots(slots: readonly QuotaSlot[]): { keys: string[]; limits: number[] } {
    if (slots.length > MAX_QUOTA_SCOPES) throw new Error(`a take draws from at most ${MAX_QUOTA_SCOPES} budgets`);
    const keys: string[] = [];
    const limits: number[] = [];
    for (let index = 0; index < MAX_QUOTA_SCOPES; index++) {
      const slot = slots[index];
      keys.push(slot ? keyOf(slot) : keyOf(slots[0]!));
      limits.push(slot ? slot.limit : 0, slot ? slot.windowMs : 0, slot ? slot.reserve : 0);
    }
    return { keys, limits };
  }

  return {
    async take(slots, cost, mode, token, aheadMs = 0, chat): Promise<TakeResult> {
      if (slots.length === 0) return { taken: true };
      const { keys, limits } = scriptSlots(slots);
      const streamKeys = Array.from({ length: MAX_QUOTA_SCOPES }, (_, index) => `${keyOf(slots[index] ?? slots[0]!)}:streams`);
      const tracked = slots.find((slot) => slot.stream)?.stream;
      const shared = Array.from({ length: MAX_QUOTA_SCOPES }, (_, index) => (mode === "try" && slots[index]?.stream ? slots[index]!.stream!.sharedReserve : ""));
      const accounts = Array.from({ length: MAX_QUOTA_SCOPES }, (_, index) => (slots[index]?.account ? "1" : "0")).join("");
      const busy = [chat?.chat ?? "", chat?.state ?? "", chat?.idleMs ?? 0, accounts];
      const args = [clock(), token ?? randomUUID(), cost, mode, ...limits, Math.max(0, Math.round(aheadMs)), tracked?.replyId ?? "", tracked?.idleMs ?? 0, ...shared, ...busy];
      const answer = (await runScript(redis, takeScript, [...keys, ...streamKeys, `${tag}:busy`], args)) as number[];
      if (Number(answer[0]) === 1) return { taken: true };
      return { taken: false, waitMs: Number(answer[1]), blockedBy: Number(answer[2]) - 1 };
    },
    async answered(slots, token, cost, agoMs = 0) {
      if (slots.length === 0) return;
      const { keys, limits } = scriptSlots(slots);
      await runScript(redis, answeredScript, keys, [clock(), token, cost, ...limits, Math.max(0, Math.round(agoMs))]);
    },
    async close(slot, forMs) {
      await runScript(redis, closeScript, [keyOf(slot)], [clock(), randomUUID(), Math.max(0, Math.round(forMs)), slot.limit, slot.windowMs]);
    },
    async used(slot) {
      const at = options.now ? options.now() : Date.now();
      return redis.zcount(keyOf(slot), `(${at - slot.windowMs}`, "+inf");
    },
  };
}
