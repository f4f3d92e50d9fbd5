/**
 * The BudgetLedger over Redis, shared by every worker, gateway and `countbot usage` of a deployment.
 *
 * Layout, under the deployment's hash tag (one cluster slot, so a script may touch every budget
 * of a call together):
 * - `{p}:budget:<unit>:<scope>` HASH bucket start (ms) → use; `held` → total held by reservations
 * - `{p}:budget:<unit>:<scope>:held` ZSET `<reservation id>:<amount>` → expiry (ms)
 * - `{p}:budget:notice:<key>` a "told once" marker, until the period ends
 * - `{p}:usage:<YYYY-MM-DD>` HASH field → count, the usage report's day
 * Every write is one Lua script (./lua/*-budget-*.lua): reserve checks and holds all budgets in
 * one step, settle releases and adds in one step; both release expired reservations first.
 */
import { hashTag, type RedisClient } from "../redis/client.js";
import { loadScript, runScript } from "../redis/scripts.js";
import { type BudgetLedger, type BudgetState, type BudgetWindow, heldMember } from "./budget-ledger.js";

export interface RedisBudgetLedgerOptions {
  redis: RedisClient;
  /** The deployment's key prefix; keys live under the hash tag `{prefix}`. */
  prefix: string;
}

const scriptsDirectory = new URL("./lua/", import.meta.url);
const scripts = {
  reserve: loadScript(scriptsDirectory, "reserve-budget-10.lua"),
  extend: loadScript(scriptsDirectory, "extend-budget-5.lua"),
  settle: loadScript(scriptsDirectory, "settle-budget-11.lua"),
  read: loadScript(scriptsDirectory, "read-budget-10.lua"),
};

/** Budgets one call counts against at most: person, chat, team run, channel, deployment. */
export const MAX_BUDGETS_PER_CALL = 5;

export function budgetKeys(prefix: string) {
  const tag = hashTag(prefix);
  return {
    budget: (budget: Pick<BudgetWindow, "unit" | "scope">) => `${tag}:budget:${budget.unit}:${budget.scope}`,
    held: (budget: Pick<BudgetWindow, "unit" | "scope">) => `${tag}:budget:${budget.unit}:${budget.scope}:held`,
    notice: (key: string) => `${tag}:budget:notice:${key}`,
    usage: (day: string) => `${tag}:usage:${day}`,
    /** Named by unused slots: a key of the same tag that no script writes. */
    unused: `${tag}:budget:unused`,
  };
}

export function createRedisBudgetLedger(options: RedisBudgetLedgerOptions): BudgetLedger {
  const { redis } = options;
  const keys = budgetKeys(options.prefix);

  /** Two keys per slot, the unused ones padded. */
  const slotKeys = (budgets: BudgetWindow[]): string[] => {
    if (budgets.length > MAX_BUDGETS_PER_CALL) throw new Error(`a model call counts against at most ${MAX_BUDGETS_PER_CALL} budgets, got ${budgets.length}`);
    return Array.from({ length: MAX_BUDGETS_PER_CALL }, (_, slot) => {
      const budget = budgets[slot];
      return budget ? [keys.budget(budget), keys.held(budget)] : [keys.unused, keys.unused];
    }).flat();
  };
  const slots = (budgets: BudgetWindow[], fields: (budget: BudgetWindow, index: number) => Array<string | number>, empty: string[]): Array<string | number> =>
    Array.from({ length: MAX_BUDGETS_PER_CALL }, (_, slot) => (budgets[slot] ? fields(budgets[slot], slot) : empty)).flat();
  const statesOf = (reply: number[], offset: number, count: number): BudgetState[] =>
    Array.from({ length: count }, (_, index) => {
      const [used, held, oldest] = reply.slice(offset + index * 3, offset + index * 3 + 3).map(Number) as [number, number, number];
      return { used, held, ...(oldest >= 0 ? { oldestBucket: oldest } : {}) };
    });

  return {
    async reserve({ id, budgets, amounts, ttlMs, now }) {
      const args = slots(budgets, (budget, index) => [budget.limit, budget.from, amounts[index]!, budget.keepMs], ["", "", "", ""]);
      const reply = (await runScript(redis, scripts.reserve, slotKeys(budgets), [now, ttlMs, id, ...args])) as number[];
      if (Number(reply[0]) === 1) return { granted: true };
      return { granted: false, states: statesOf(reply, 1, budgets.length) };
    },
    async extend({ id, budgets, amounts, ttlMs, now }) {
      const members = Array.from({ length: MAX_BUDGETS_PER_CALL }, (_, slot) => (budgets[slot] ? heldMember(id, amounts[slot]!) : ""));
      const zsets = Array.from({ length: MAX_BUDGETS_PER_CALL }, (_, slot) => (budgets[slot] ? keys.held(budgets[slot]) : keys.unused));
      return Number(await runScript(redis, scripts.extend, zsets, [now, ttlMs, ...members])) > 0;
    },
    async settle({ id, budgets, reserved, used, now, usage }) {
      const args = slots(budgets, (budget, index) => [budget.from, budget.bucket, reserved[index]!, used[index]!, budget.keepMs], ["", "", "", "", ""]);
      const counts = usage ? [usage.keepMs, ...Object.entries(usage.counts).flat()] : [""];
      const reply = (await runScript(redis, scripts.settle, [...slotKeys(budgets), usage ? keys.usage(usage.day) : keys.unused], [now, id, ...args, ...counts])) as number[];
      return statesOf(reply, 0, budgets.length);
    },
    async read(budgets, now) {
      if (budgets.length === 0) return [];
      const starts = Array.from({ length: MAX_BUDGETS_PER_CALL }, (_, slot) => (budgets[slot] ? budgets[slot].from : ""));
      const reply = (await runScript(redis, scripts.read, slotKeys(budgets), [now, ...starts])) as number[];
      return statesOf(reply, 0, budgets.length);
    },
    async firstNotice(key, expiresAt, now) {
      const ttl = Math.max(1, expiresAt - now);
      return (await redis.set(keys.notice(key), "1", "PX", ttl, "NX")) === "OK";
    },
    async usage(days) {
      const totals: Record<string, number> = {};
      const pipeline = redis.pipeline();
      for (const day of days) pipeline.hgetall(keys.usage(day));
      for (const [error, counts] of (await pipeline.exec()) ?? []) {
        if (error) throw error;
        for (const [field, value] of Object.entries(counts as Record<string, string>)) totals[field] = (totals[field] ?? 0) + Number(value);
      }
      return totals;
    },
    close: async () => undefined,
  };
}
