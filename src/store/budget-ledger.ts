/**
 * The BudgetLedger contract: what has been spent against each budget, what is held by model calls
 * in flight, and the usage report's daily counts. Two implementations pass one conformance suite
 * (tests/conformance/budget-ledger.suite.ts): in one process (./memory-budget-ledger.ts, every
 * method one synchronous step, so no lock is needed) and Redis (./redis-budget-ledger.ts, each
 * write one Lua script).
 *
 * Guarantees:
 * - `reserve` is all or nothing over the budgets it is given, and grants only while every one of
 *   them has room: used plus held below its limit. So with any number of calls at once, on any
 *   number of processes, what is spent passes a limit by at most the one call that was granted
 *   last (its amount being its worst case).
 * - A reservation that is neither extended nor settled is released once it expires (a crashed
 *   worker's), by the next `reserve` or `read` of that budget.
 * - `settle` releases the reservation, if it is still held, and adds what the call really used;
 *   usage is added even when the reservation had expired (the tokens were spent). Budgets see it at
 *   once; the usage report's counts may reach other ledgers up to a second later (`flushUsage`).
 * The ledger knows no calendar: the caller says which window of a budget counts now.
 */

export type BudgetUnit = "tokens" | "money";

/** One budget a call counts against, and where it stands in time now. */
export interface BudgetWindow {
  /** Which budget: `person:telegram:42`, `chat:web:a`, `team:wf-1`, `channel:telegram`, `deployment`. */
  scope: string;
  /** Tokens, or millionths of the currency. */
  unit: BudgetUnit;
  /** In the unit. */
  limit: number;
  /** Use recorded at or after this time (ms) counts. */
  from: number;
  /** The bucket (its start, ms) new use is added to: the window's start, or the current slice of a rolling window. */
  bucket: number;
  /** How long the record is kept after its last change (ms), at least the window's length. */
  keepMs: number;
}

/** A budget as the ledger sees it now. */
export interface BudgetState {
  /** Spent in the window. */
  used: number;
  /** Held by calls in flight. */
  held: number;
  /** Start of the oldest bucket with use in the window (a rolling window frees from there); undefined when nothing was used. */
  oldestBucket?: number;
}

export interface ReserveRequest {
  /** Unique per model call. */
  id: string;
  budgets: BudgetWindow[];
  /** The worst case per budget, in its unit (same order as `budgets`). */
  amounts: number[];
  ttlMs: number;
  now: number;
}

export type ReserveOutcome = { granted: true } | { granted: false; states: BudgetState[] };

export interface SettleRequest {
  id: string;
  budgets: BudgetWindow[];
  /** What each budget was reserved (0 when nothing was: a call no budget covered). */
  reserved: number[];
  /** What the call really used, per budget. */
  used: number[];
  now: number;
  /** The usage report's counts to add: the day (`YYYY-MM-DD`) and field → increment. */
  usage?: { day: string; counts: ReadonlyMap<string, number>; keepMs: number };
}

export interface BudgetLedger {
  reserve(request: ReserveRequest): Promise<ReserveOutcome>;
  /** Keeps a reservation held `ttlMs` longer; false when it was released meanwhile (expired or settled). */
  extend(request: Pick<ReserveRequest, "id" | "budgets" | "amounts" | "ttlMs" | "now">): Promise<boolean>;
  /** Releases the reservation and adds the real use; the budgets' states afterwards. */
  settle(request: SettleRequest): Promise<BudgetState[]>;
  /** The budgets' states now (expired reservations released first). */
  read(budgets: BudgetWindow[], now: number): Promise<BudgetState[]>;
  /** True the first time `key` is asked until `expiresAt` (ms): "tell the person once a period". */
  firstNotice(key: string, expiresAt: number, now: number): Promise<boolean>;
  /**
   * The usage report's counts of these days, summed field by field: this ledger's own calls
   * included; another ledger's once it has flushed them (see `flushUsage`).
   */
  usage(days: string[]): Promise<Record<string, number>>;
  /**
   * Writes the usage report's counts this ledger still holds back. The Redis ledger sums them in
   * the process and writes them at most a second after a call (and at close); the one-process
   * ledger has nothing to write.
   */
  flushUsage(): Promise<void>;
  close(): Promise<void>;
}

/** The member a reservation holds in a budget's set: its id and amount, so a release knows what to give back. */
export function heldMember(id: string, amount: number): string {
  return `${id}:${amount}`;
}
