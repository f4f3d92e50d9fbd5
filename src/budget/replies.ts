/** What people read about budgets: refusals (long the first time in a period, then one line), warnings, amounts. */
import { moneyOf } from "../providers/pricing.js";
import type { BudgetUnit } from "../store/budget-ledger.js";
import { formatTime } from "./periods.js";
import type { AppliedBudget, BudgetKind } from "./policy.js";

const PERIOD_WORDS = { day: "daily", week: "weekly", month: "monthly" } as const;
const ROLLING_WORDS = { day: "24-hour", week: "7-day", month: "30-day" } as const;

/** `your daily budget`, `this chat's weekly budget`, `the team run's budget`, `this bot's monthly budget`. */
export function budgetName(budget: Pick<AppliedBudget, "kind" | "subject" | "spec">): string {
  const span = budget.spec ? `${(budget.spec.reset === "rolling" ? ROLLING_WORDS : PERIOD_WORDS)[budget.spec.period]} ` : "";
  const owner: Record<BudgetKind, string> = {
    person: "your",
    chat: "this chat's",
    team: "the team run's",
    channel: `the ${budget.subject} channel's`,
    agent: `the ${budget.subject} agent's`,
    deployment: "this bot's",
  };
  return `${owner[budget.kind]} ${span}budget`;
}

export function formatAmount(unit: BudgetUnit, amount: number, currency: string): string {
  if (unit === "tokens") return `${amount.toLocaleString("en-US")} tokens`;
  return `${currency} ${moneyOf(amount).toFixed(moneyOf(amount) < 1 ? 4 : 2)}`;
}

/** When the budget has room again, as a phrase: `It renews at 2026-12-05 00:00 UTC.` */
export function renewal(budget: Pick<AppliedBudget, "spec" | "resetsAt">, freesAt: number | undefined): string {
  if (!budget.spec) return "It lasts for the whole run.";
  if (budget.resetsAt !== undefined) return `It renews at ${formatTime(budget.spec.timeZone, budget.resetsAt)}.`;
  if (freesAt !== undefined) return `It frees up as older use ages out, from ${formatTime(budget.spec.timeZone, freesAt)}.`;
  return "It frees up as older use ages out.";
}

export interface RefusalFacts {
  budget: AppliedBudget;
  used: number;
  currency: string;
  freesAt?: number;
}

/** The first refusal in a period: which budget, how much was used, when it renews, what to do. */
export function fullRefusal(facts: RefusalFacts): string {
  const { budget, used, currency } = facts;
  const name = budgetName(budget);
  return [
    `Sorry, I can't answer this: ${name} is used up (${formatAmount(budget.unit, used, currency)} of ${formatAmount(budget.unit, budget.limit, currency)}).`,
    renewal(budget, facts.freesAt),
    `Until then I make no model calls for ${budget.kind === "person" ? "you" : budget.kind === "chat" ? "this chat" : "it"}. Send /usage to see where you stand; the operator can raise the limit in the budgets config.`,
  ].join(" ");
}

/** Every later refusal in the same period: one line. */
export function shortRefusal(facts: RefusalFacts): string {
  const { budget, used, currency } = facts;
  const when = budget.resetsAt !== undefined && budget.spec ? `; renews ${formatTime(budget.spec.timeZone, budget.resetsAt)}` : "";
  return `Budget used up (${budgetName(budget)}: ${formatAmount(budget.unit, used, currency)} of ${formatAmount(budget.unit, budget.limit, currency)}${when}).`;
}

export function warningText(budget: AppliedBudget, used: number, currency: string): string {
  const share = Math.floor((used / budget.limit) * 100);
  const name = budgetName(budget);
  return `Heads-up: ${share}% of ${name} is used (${formatAmount(budget.unit, used, currency)} of ${formatAmount(budget.unit, budget.limit, currency)}). ${renewal(budget, undefined)}`;
}
