/**
 * `countbot usage`: what the deployment's model calls used, from the usage report the workers keep
 * (Redis, or the one-process ledger file under the data directory).
 *
 *   countbot usage [--by person|chat|team|channel|model] [--period day|week|month] [--json]
 *                  [--person channel:senderId] [--chat channel:chat_id]
 *
 * Rows are calls, tokens (input, of which cached, output) and cost over the calendar period that
 * holds today (in `budgets.timeZone`), most tokens first. With `--person` or `--chat` the budgets
 * that apply to them follow, with what is used and when they renew.
 */
import { type BudgetStatus, type UsageDimension, type UsageReport, budgetStatus, usageReport } from "../budget/usage-report.js";
import { formatTime } from "../budget/periods.js";
import { createInfrastructure } from "../app/infrastructure.js";
import type { BudgetPeriod } from "../config/budgets.js";
import { type CliContext, loadCliConfig } from "./setup.js";

export interface UsageCommandOptions {
  by: UsageDimension;
  period: BudgetPeriod;
  json?: boolean;
  person?: string;
  chat?: string;
}

export async function runUsageCommand(options: UsageCommandOptions, context: CliContext = {}): Promise<number> {
  const { config, logger } = loadCliConfig(context);
  const infrastructure = await createInfrastructure(config, logger);
  try {
    const now = Date.now();
    const report = await usageReport(infrastructure.budgetLedger, config.budgets, { by: options.by, period: options.period }, now);
    const scope = { ...(options.person ? { person: options.person } : {}), ...(options.chat ? { chat: options.chat } : {}) };
    const budgets = options.person || options.chat ? await budgetStatus(infrastructure.budgetLedger, config.budgets, scope, now) : [];
    if (options.json) process.stdout.write(`${JSON.stringify({ ...report, budgets }, null, 2)}\n`);
    else process.stdout.write(`${[table(report), ...budgets.map((budget) => budgetLine(budget, report.currency, config.budgets.timeZone))].join("\n")}\n`);
    return 0;
  } finally {
    await infrastructure.close();
  }
}

function table(report: UsageReport): string {
  const span = report.days.length === 1 ? report.days[0]! : `${report.days[0]} to ${report.days.at(-1)}`;
  if (report.rows.length === 0) return `no model calls ${span}`;
  const header = [report.by.toUpperCase(), "CALLS", "INPUT", "CACHED", "OUTPUT", "TOKENS", `COST (${report.currency})`];
  const rows = report.rows.map((row) => [
    row.key,
    String(row.calls),
    row.inputTokens.toLocaleString("en-US"),
    row.cachedInputTokens.toLocaleString("en-US"),
    row.outputTokens.toLocaleString("en-US"),
    row.tokens.toLocaleString("en-US"),
    `${row.cost.toFixed(4)}${row.unpricedCalls > 0 ? ` (+${row.unpricedCalls} unpriced)` : ""}`,
  ]);
  const widths = header.map((title, column) => Math.max(title.length, ...rows.map((row) => row[column]!.length)));
  const line = (cells: string[]) => cells.map((cell, column) => (column === 0 ? cell.padEnd(widths[column]!) : cell.padStart(widths[column]!))).join("  ").trimEnd();
  return [`usage ${span} by ${report.by}`, line(header), ...rows.map(line)].join("\n");
}

function budgetLine(budget: BudgetStatus, currency: string, timeZone: string): string {
  const amount = (value: number) => (budget.unit === "tokens" ? `${value.toLocaleString("en-US")} tokens` : `${currency} ${value.toFixed(4)}`);
  const renews = budget.resetsAt === null ? (budget.period ? " (rolling)" : " (per run)") : `, renews ${formatTime(timeZone, budget.resetsAt)}`;
  return `budget ${budget.kind} ${budget.subject}: ${amount(budget.used)} of ${amount(budget.limit)} used${budget.held > 0 ? `, ${amount(budget.held)} held by calls in flight` : ""}${budget.period ? `, per ${budget.period}` : ""}${renews}`;
}
