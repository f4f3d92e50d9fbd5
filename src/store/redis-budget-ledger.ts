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
 *
 * The usage report's counts are not written per call: the ledger sums them in the process and adds
 * them at most every 5 seconds (`usageFlushMs`), one script call per day (./lua/add-usage-1.lua),
 * and on close. That saves about 9 Redis calls per model call (a HINCRBY per field and a PEXPIRE);
 * the price is that a process that crashes loses at most its last 5 seconds of counts in the
 * report. Every 5 s and not every second: a flush writes a field per chat and person its calls
 * touched, and with four workers each chat's calls spread over all four, so a 1 s flush cost 1.25
 * HINCRBY per message in the closed-loop bench (0.58 with one worker). Budgets are not deferred:
 * what enforces a limit (reserve, settle, read) stays exact. This ledger's `usage` flushes first,
 * so a process reads its own calls; another process (`countbot usage`, the gateway's /api/usage)
 * sees them within 5 seconds.
 */
import { hashTag, type RedisClient } from "../redis/client.js";
import { loadScript, runScript } from "../redis/scripts.js";
import { type BudgetLedger, type BudgetState, type BudgetWindow, type SettleRequest, heldMember } from "./budget-ledger.js";

export interface RedisBudgetLedgerOptions {
  redis: RedisClient;
  /** The deployment's key prefix; keys live under the hash tag `{prefix}`. */
  prefix: string;
  /** How long the usage report's counts are summed in the process before they are written (ms). Default 5,000. */
  usageFlushMs?: number;
  /** A flush of the usage report's counts failed (they are kept and tried again at the next one). */
  onError?: (error: unknown) => void;
}

const scriptsDirectory = new URL("./lua/", import.meta.url);
const scripts = {
  reserve: loadScript(scriptsDirectory, "reserve-budget-10.lua"),
  extend: loadScript(scriptsDirectory, "extend-budget-5.lua"),
  settle: loadScript(scriptsDirectory, "settle-budget-10.lua"),
  read: loadScript(scriptsDirectory, "read-budget-10.lua"),
  addUsage: loadScript(scriptsDirectory, "add-usage-1.lua"),
};

/** How long a process sums the usage report's counts before it adds them to Redis. */
export const USAGE_FLUSH_MS = 5_000;

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
  const usageCounts = pendingUsage(options, (day, keepMs, counts) => runScript(redis, scripts.addUsage, [keys.usage(day)], [keepMs, ...counts]));

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
      if (usage) usageCounts.add(usage);
      // A call no budget covers has nothing to release or add but its usage report counts.
      if (budgets.length === 0) return [];
      const args = slots(budgets, (budget, index) => [budget.from, budget.bucket, reserved[index]!, used[index]!, budget.keepMs], ["", "", "", "", ""]);
      const reply = (await runScript(redis, scripts.settle, slotKeys(budgets), [now, id, ...args])) as number[];
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
    flushUsage: () => usageCounts.flush(),
    async usage(days) {
      await usageCounts.flush();
      const totals: Record<string, number> = {};
      const pipeline = redis.pipeline();
      for (const day of days) pipeline.hgetall(keys.usage(day));
      for (const [error, counts] of (await pipeline.exec()) ?? []) {
        if (error) throw error;
        for (const [field, value] of Object.entries(counts as Record<string, string>)) totals[field] = (totals[field] ?? 0) + Number(value);
      }
      return totals;
    },
    close: () => usageCounts.close(),
  };
}

type UsageDay = { keepMs: number; counts: Map<string, number> };

/**
 * The usage report's counts of this process's calls, summed per day and field until the next
 * flush: at most `usageFlushMs` after the first call since the last one, at `flush()`, and at
 * `close()`. Flushes run one after another; one that fails puts its counts back for the next.
 */
function pendingUsage(options: Pick<RedisBudgetLedgerOptions, "usageFlushMs" | "onError">, write: (day: string, keepMs: number, counts: Array<string | number>) => Promise<unknown>) {
  const flushMs = options.usageFlushMs ?? USAGE_FLUSH_MS;
  let days = new Map<string, UsageDay>();
  let timer: NodeJS.Timeout | undefined;
  let flushing: Promise<void> = Promise.resolve();

  const add = (day: string, keepMs: number, counts: Iterable<[string, number]>) => {
    const pending = days.get(day) ?? { keepMs, counts: new Map<string, number>() };
    pending.keepMs = Math.max(pending.keepMs, keepMs);
    for (const [field, increment] of counts) pending.counts.set(field, (pending.counts.get(field) ?? 0) + increment);
    days.set(day, pending);
  };
  const writeAll = async () => {
    const taken = days;
    days = new Map();
    for (const [day, { keepMs, counts }] of taken) {
      try {
        await write(day, keepMs, [...counts].flat());
      } catch (error) {
        add(day, keepMs, counts);
        options.onError?.(error);
      }
    }
  };
  const flush = (): Promise<void> => {
    clearTimeout(timer);
    timer = undefined;
    flushing = flushing.then(writeAll);
    return flushing;
  };
  return {
    add(usage: NonNullable<SettleRequest["usage"]>) {
      add(usage.day, usage.keepMs, usage.counts);
      // Unref'd: a process that ends without close() loses at most these seconds' counts, as a crash does.
      timer ??= setTimeout(() => void flush(), flushMs).unref();
    },
    flush,
    close: flush,
  };
}
