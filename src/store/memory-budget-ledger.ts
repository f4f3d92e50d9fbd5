/**
 * The BudgetLedger of one process (`countbot start` without Redis, `countbot chat`). Every method
 * does its reading and writing in one synchronous step before its first await, so two turns of
 * the process cannot interleave inside a reservation: JavaScript's one thread is the lock.
 *
 * With `file`, what was spent and the usage report survive a restart: the state is written there
 * (atomically, at most once a second, and on close) and read back at start. Reservations are not
 * written: they die with the process, as the calls that held them do. `countbot usage` reads the
 * file of a running process.
 */
import { readFileSync } from "node:fs";
import { mkdir } from "node:fs/promises";
import path from "node:path";
import { writeFileAtomic } from "./file-io.js";
import { type BudgetLedger, type BudgetState, type BudgetWindow, heldMember } from "./budget-ledger.js";

interface BudgetRecord {
  /** Bucket start (ms) → use. */
  buckets: Map<number, number>;
  held: number;
  /** Member (`id:amount`) → expiry (ms). */
  reservations: Map<string, number>;
  keepUntil: number;
}

interface Snapshot {
  budgets: Array<{ key: string; buckets: Array<[number, number]>; keepUntil: number }>;
  usage: Array<{ day: string; counts: Record<string, number>; keepUntil: number }>;
}

export interface MemoryBudgetLedgerOptions {
  /** Where the state is kept across restarts; unset: memory only. */
  file?: string;
  /** How long after a change the file is written (ms). Default 1,000. */
  writeDelayMs?: number;
  onError?: (error: unknown) => void;
}

const keyOf = (budget: Pick<BudgetWindow, "scope" | "unit">) => `${budget.unit}:${budget.scope}`;

type UsageDays = Map<string, { counts: Map<string, number>; keepUntil: number }>;

/** The record as of `now`: expired reservations released, buckets before `from` and stale records dropped. */
function currentRecord(records: Map<string, BudgetRecord>, budget: BudgetWindow, now: number): BudgetRecord {
  const key = keyOf(budget);
  let record = records.get(key);
  if (record && record.keepUntil <= now && record.reservations.size === 0) {
    records.delete(key);
    record = undefined;
  }
  if (!record) {
    record = { buckets: new Map(), held: 0, reservations: new Map(), keepUntil: now + budget.keepMs };
    records.set(key, record);
  }
  for (const [member, expiresAt] of record.reservations) {
    if (expiresAt > now) continue;
    record.reservations.delete(member);
    record.held -= amountOf(member);
  }
  for (const bucket of record.buckets.keys()) if (bucket < budget.from) record.buckets.delete(bucket);
  return record;
}

/** What a record has used (its buckets' sum) and holds, with its oldest bucket that counts. */
function stateOf(record: BudgetRecord): BudgetState {
  let used = 0;
  let oldest: number | undefined;
  for (const [bucket, amount] of record.buckets) {
    used += amount;
    if (amount > 0 && (oldest === undefined || bucket < oldest)) oldest = bucket;
  }
  return { used, held: record.held, ...(oldest === undefined ? {} : { oldestBucket: oldest }) };
}

/** Adds a settle's usage counts to its day, and drops the days kept long enough. */
function addUsage(usage: UsageDays, counts: { day: string; counts: ReadonlyMap<string, number>; keepMs: number }, now: number): void {
  const entry = usage.get(counts.day) ?? { counts: new Map<string, number>(), keepUntil: 0 };
  for (const [field, increment] of counts.counts) entry.counts.set(field, (entry.counts.get(field) ?? 0) + increment);
  entry.keepUntil = now + counts.keepMs;
  usage.set(counts.day, entry);
  for (const [day, kept] of usage) if (kept.keepUntil <= now) usage.delete(day);
}

/**
 * Writes the ledger to its file a moment after a change (`writeDelayMs`), one write at a time, so
 * a burst of settles is one write; `flush` writes what is still due, for close.
 */
class SnapshotWriter {
  private timer: NodeJS.Timeout | undefined;
  private writing: Promise<void> = Promise.resolve();

  constructor(
    private readonly options: MemoryBudgetLedgerOptions,
    private readonly records: Map<string, BudgetRecord>,
    private readonly usage: UsageDays,
  ) {}

  /** Schedules a write, unless there is no file or one is scheduled already. */
  schedule(): void {
    if (!this.options.file || this.timer) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.enqueue();
    }, this.options.writeDelayMs ?? 1_000);
    this.timer.unref();
  }

  /** Writes at once what a scheduled write would have, and waits for every write. */
  async flush(): Promise<void> {
    if (this.timer) {
      clearTimeout(this.timer);
      this.timer = undefined;
      this.enqueue();
    }
    await this.writing;
  }

  private enqueue(): void {
    this.writing = this.writing.then(() => this.write()).catch((error: unknown) => this.options.onError?.(error));
  }

  private async write(): Promise<void> {
    const file = this.options.file!;
    const snapshot: Snapshot = {
      budgets: [...this.records].map(([key, record]) => ({ key, buckets: [...record.buckets], keepUntil: record.keepUntil })),
      usage: [...this.usage].map(([day, entry]) => ({ day, counts: Object.fromEntries(entry.counts), keepUntil: entry.keepUntil })),
    };
    await mkdir(path.dirname(file), { recursive: true });
    await writeFileAtomic(file, JSON.stringify(snapshot));
  }
}

export function createMemoryBudgetLedger(options: MemoryBudgetLedgerOptions = {}): BudgetLedger {
  const records = new Map<string, BudgetRecord>();
  const usage: UsageDays = new Map();
  const notices = new Map<string, number>();
  if (options.file) restore(options.file, records, usage);
  const writer = new SnapshotWriter(options, records, usage);
  const current = (budget: BudgetWindow, now: number) => currentRecord(records, budget, now);

  return {
    async reserve({ id, budgets, amounts, ttlMs, now }) {
      const touched = budgets.map((budget) => current(budget, now));
      const states = touched.map(stateOf);
      if (budgets.some((budget, index) => states[index]!.used + states[index]!.held >= budget.limit)) return { granted: false, states };
      touched.forEach((record, index) => {
        const amount = amounts[index]!;
        record.reservations.set(heldMember(id, amount), now + ttlMs);
        record.held += amount;
        record.keepUntil = Math.max(record.keepUntil, now + budgets[index]!.keepMs);
      });
      return { granted: true };
    },
    async extend({ id, budgets, amounts, ttlMs, now }) {
      let held = false;
      budgets.forEach((budget, index) => {
        const record = records.get(keyOf(budget));
        const member = heldMember(id, amounts[index]!);
        const expiresAt = record?.reservations.get(member);
        if (record && expiresAt !== undefined && expiresAt > now) {
          record.reservations.set(member, now + ttlMs);
          held = true;
        }
      });
      return held;
    },
    async settle({ id, budgets, reserved, used, now, usage: counts }) {
      const states = budgets.map((budget, index) => {
        const record = current(budget, now);
        const member = heldMember(id, reserved[index]!);
        if (record.reservations.delete(member)) record.held -= reserved[index]!;
        const amount = used[index]!;
        if (amount > 0) record.buckets.set(budget.bucket, (record.buckets.get(budget.bucket) ?? 0) + amount);
        record.keepUntil = Math.max(record.keepUntil, now + budget.keepMs);
        return stateOf(record);
      });
      if (counts) addUsage(usage, counts, now);
      writer.schedule();
      return states;
    },
    async read(budgets, now) {
      return budgets.map((budget) => stateOf(current(budget, now)));
    },
    async firstNotice(key, expiresAt, now) {
      const until = notices.get(key);
      if (until !== undefined && until > now) return false;
      notices.set(key, expiresAt);
      if (notices.size > 10_000) for (const [other, otherUntil] of notices) if (otherUntil <= now) notices.delete(other);
      return true;
    },
    async usage(days) {
      const totals: Record<string, number> = {};
      for (const day of days) {
        for (const [field, value] of usage.get(day)?.counts ?? []) totals[field] = (totals[field] ?? 0) + value;
      }
      return totals;
    },
    // Counted in the ledger at once: nothing held back.
    flushUsage: async () => undefined,
    close: () => writer.flush(),
  };
}

/** Reads the usage report's counts from a ledger file (`countbot usage` beside a running process). */
export function readLedgerFile(file: string): Pick<BudgetLedger, "usage" | "read"> {
  const ledger = createMemoryBudgetLedger({ file });
  return { usage: (days) => ledger.usage(days), read: (budgets, now) => ledger.read(budgets, now) };
}

function amountOf(member: string): number {
  return Number(member.slice(member.lastIndexOf(":") + 1));
}

function restore(file: string, records: Map<string, BudgetRecord>, usage: Map<string, { counts: Map<string, number>; keepUntil: number }>): void {
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return;
    throw error;
  }
  const snapshot = JSON.parse(text) as Snapshot;
  for (const budget of snapshot.budgets) records.set(budget.key, { buckets: new Map(budget.buckets), held: 0, reservations: new Map(), keepUntil: budget.keepUntil });
  for (const day of snapshot.usage) usage.set(day.day, { counts: new Map(Object.entries(day.counts)), keepUntil: day.keepUntil });
}
