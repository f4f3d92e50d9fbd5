/**
 * The usage report: what each model call adds to its day's counts (by person, chat, team run,
 * channel, and in all, each per model), how those counts add up for a period (`countbot usage`,
 * `/api/usage`), and what `/usage` tells a person about themselves and their chat.
 */
import type { BudgetPeriod, BudgetsConfig } from "../config/budgets.js";
import type { Usage } from "../providers/chat-model.js";
import { moneyOf } from "../providers/pricing.js";
import type { BudgetLedger } from "../store/budget-ledger.js";
import { dayIn, daysOfPeriod } from "./periods.js";
import { type CallScope, budgetsFor, channelOfChat } from "./policy.js";
import { budgetName, formatAmount, renewal } from "./replies.js";

export const USAGE_DIMENSIONS = ["person", "chat", "team", "channel", "model"] as const;
export type UsageDimension = (typeof USAGE_DIMENSIONS)[number];

const SEPARATOR = "\u001f";
const METRICS = ["calls", "input", "cached", "output", "cost", "unpriced"] as const;
type Metric = (typeof METRICS)[number];

/**
 * The counts one call adds: `<dimension>␟<id>␟<model>␟<metric>` → increment. A Map, not an object:
 * every chat's names are new keys, and an object would intern each as a property name.
 */
export function usageCounts(scope: CallScope, model: string, usage: Usage, cost: number | undefined): Map<string, number> {
  const values: Record<Metric, number> = {
    calls: 1,
    input: usage.inputTokens,
    cached: usage.cachedInputTokens ?? 0,
    output: usage.outputTokens,
    cost: cost ?? 0,
    unpriced: cost === undefined ? 1 : 0,
  };
  const channel = scope.channel ?? (scope.chat ? channelOfChat(scope.chat) : undefined);
  const subjects: Array<[string, string | undefined]> = [["all", "*"], ["person", scope.person], ["chat", scope.chat], ["team", scope.teamRun?.id], ["channel", channel]];
  const counts = new Map<string, number>();
  for (const [dimension, id] of subjects) {
    if (id === undefined) continue;
    const names = fieldNames(dimension, id, model);
    METRICS.forEach((metric, index) => {
      if (values[metric] !== 0) counts.set(names[index]!, values[metric]);
    });
  }
  return counts;
}

/**
 * A subject's field names, one per metric, made once per subject and model: every call of a chat
 * counts under the same names, and a name made once is hashed once wherever it is a key after
 * (the counts, the ledger's sums). By model, dimension and id; forgotten all at once past
 * MOST_NAMED subjects.
 */
const modelsNamed = new Map<string, Map<string, Map<string, string[]>>>();
let namedCount = 0;
const MOST_NAMED = 20_000;

function fieldNames(dimension: string, id: string, model: string): string[] {
  // Looked up by the parts as they come, not by a string joined (and hashed) on every call.
  let byDimension = modelsNamed.get(model);
  let byId = byDimension?.get(dimension);
  const known = byId?.get(id);
  if (known) return known;
  if (namedCount >= MOST_NAMED) {
    modelsNamed.clear();
    namedCount = 0;
    byDimension = byId = undefined;
  }
  if (!byDimension) modelsNamed.set(model, (byDimension = new Map()));
  if (!byId) byDimension.set(dimension, (byId = new Map()));
  const prefix = `${dimension}${SEPARATOR}${id}${SEPARATOR}${model}${SEPARATOR}`;
  const names = METRICS.map((metric) => prefix + metric);
  byId.set(id, names);
  namedCount += 1;
  return names;
}

export interface UsageRow {
  /** The person, chat, run, channel or model. */
  key: string;
  calls: number;
  inputTokens: number;
  cachedInputTokens: number;
  outputTokens: number;
  tokens: number;
  /** In the currency (not millionths). */
  cost: number;
  /** Calls whose model had no price: `cost` leaves them out. */
  unpricedCalls: number;
}

/** The day's counts summed into rows by one dimension, most tokens first. */
export function summarize(totals: Record<string, number>, by: UsageDimension): UsageRow[] {
  const rows = new Map<string, UsageRow>();
  for (const [field, value] of Object.entries(totals)) {
    const [dimension, id, model, metric] = field.split(SEPARATOR) as [string, string, string, Metric];
    if (by === "model" ? dimension !== "all" : dimension !== by) continue;
    const key = by === "model" ? model : id;
    const row = rows.get(key) ?? { key, calls: 0, inputTokens: 0, cachedInputTokens: 0, outputTokens: 0, tokens: 0, cost: 0, unpricedCalls: 0 };
    if (metric === "calls") row.calls += value;
    else if (metric === "input") row.inputTokens += value;
    else if (metric === "cached") row.cachedInputTokens += value;
    else if (metric === "output") row.outputTokens += value;
    else if (metric === "cost") row.cost += moneyOf(value);
    else if (metric === "unpriced") row.unpricedCalls += value;
    row.tokens = row.inputTokens + row.outputTokens;
    rows.set(key, row);
  }
  return [...rows.values()].sort((left, right) => right.tokens - left.tokens || left.key.localeCompare(right.key));
}

export interface UsageQuery {
  by: UsageDimension;
  period: BudgetPeriod;
}

export interface UsageReport {
  by: UsageDimension;
  period: BudgetPeriod;
  /** The days it covers, oldest first. */
  days: string[];
  currency: string;
  rows: UsageRow[];
}

export async function usageReport(ledger: Pick<BudgetLedger, "usage">, config: Pick<BudgetsConfig, "timeZone" | "currency">, query: UsageQuery, now: number): Promise<UsageReport> {
  const days = daysOfPeriod(query.period, config.timeZone, now);
  return { by: query.by, period: query.period, days, currency: config.currency, rows: summarize(await ledger.usage(days), query.by) };
}

/** `/usage`: the person's and the chat's spend against their budgets, or today's use where none is set. */
export async function describeUsage(ledger: Pick<BudgetLedger, "usage" | "read">, config: BudgetsConfig, scope: { person?: string; chat: string }, now: number): Promise<string> {
  const today = await ledger.usage([dayIn(config.timeZone, now)]);
  const lines: string[] = [];
  const subjects: Array<["person" | "chat", string | undefined, string]> = [
    ["person", scope.person, `You (${scope.person ?? "unknown"})`],
    ["chat", scope.chat, `This chat (${scope.chat})`],
  ];
  for (const [kind, subject, label] of subjects) {
    if (subject === undefined) continue;
    const budget = budgetsFor(config, kind === "person" ? { person: subject } : { chat: subject }, now).find((applied) => applied.kind === kind);
    if (budget) {
      const [state] = await ledger.read([budget], now);
      const used = state?.used ?? 0;
      const share = Math.floor((used / budget.limit) * 100);
      const status = used >= budget.limit ? " (used up)" : "";
      lines.push(`${label}: ${formatAmount(budget.unit, used, config.currency)} of ${formatAmount(budget.unit, budget.limit, config.currency)} used, ${share}% of ${budgetName(budget)}${status}. ${renewal(budget, undefined)}`);
      continue;
    }
    const row = summarize(today, kind).find((candidate) => candidate.key === subject);
    const cost = row && row.cost > 0 ? `, ${config.currency} ${row.cost.toFixed(4)}` : "";
    lines.push(`${label}: ${formatAmount("tokens", row?.tokens ?? 0, config.currency)} today in ${row?.calls ?? 0} model call${row?.calls === 1 ? "" : "s"}${cost}; no budget is set.`);
  }
  return lines.join("\n");
}

export interface BudgetStatus {
  kind: string;
  subject: string;
  unit: "tokens" | "money";
  /** In tokens, or in the currency for money. */
  used: number;
  held: number;
  limit: number;
  period: string | null;
  resetsAt: number | null;
}

/** The budgets that apply to a person and a chat (with their channel's and the deployment's), as they stand now. */
export async function budgetStatus(ledger: Pick<BudgetLedger, "read">, config: BudgetsConfig, scope: CallScope, now: number): Promise<BudgetStatus[]> {
  const applied = budgetsFor(config, scope, now);
  const states = await ledger.read(applied, now);
  const inUnit = (unit: "tokens" | "money", amount: number) => (unit === "tokens" ? amount : moneyOf(amount));
  return applied.map((budget, index) => ({
    kind: budget.kind,
    subject: budget.subject,
    unit: budget.unit,
    used: inUnit(budget.unit, states[index]!.used),
    held: inUnit(budget.unit, states[index]!.held),
    limit: inUnit(budget.unit, budget.limit),
    period: budget.spec ? `${budget.spec.reset === "rolling" ? "rolling " : ""}${budget.spec.period}` : null,
    resetsAt: budget.resetsAt ?? null,
  }));
}
