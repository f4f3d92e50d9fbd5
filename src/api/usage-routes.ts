/**
 * Usage and budgets, behind the API token:
 * - `GET /api/usage?by=person|chat|team|channel|model&period=day|week|month` the usage report:
 *   calls, tokens (input, cached input, output) and cost per person (chat, team run, channel,
 *   model) over the calendar period that holds today, most tokens first;
 * - `GET /api/usage/budgets?person=&chat=` the budgets that apply to that person and chat (with
 *   their channel's and the deployment's): used, held by calls in flight, limit, when they renew.
 */
import type { FastifyInstance } from "fastify";
import { z } from "zod";
import { USAGE_DIMENSIONS, budgetStatus, usageReport } from "../budget/usage-report.js";
import { BUDGET_PERIODS, type BudgetsConfig } from "../config/budgets.js";
import { parseRequest } from "../gateway/http-request.js";
import type { BudgetLedger } from "../store/budget-ledger.js";

const ReportQuerySchema = z.strictObject({
  by: z.enum(USAGE_DIMENSIONS).default("person"),
  period: z.enum(BUDGET_PERIODS).default("day"),
});

const key = z.string().min(3).max(256).regex(/^[\w.-]+:.+$/, "expected `channel:id`");
const BudgetQuerySchema = z.strictObject({ person: key.optional(), chat: key.optional() });

export interface UsageRoutesOptions {
  ledger: Pick<BudgetLedger, "usage" | "read">;
  /** The current `budgets` section. */
  config: () => BudgetsConfig;
  now?: () => number;
}

export function registerUsageRoutes(scope: FastifyInstance, options: UsageRoutesOptions): void {
  const now = options.now ?? Date.now;
  scope.get("/api/usage", async (request) => {
    const query = parseRequest(ReportQuerySchema, request.query, "query");
    const report = await usageReport(options.ledger, options.config(), query, now());
    return { ...report, timeZone: options.config().timeZone };
  });
  scope.get("/api/usage/budgets", async (request) => {
    const query = parseRequest(BudgetQuerySchema, request.query, "query");
    const config = options.config();
    const budgets = await budgetStatus(options.ledger, config, { ...(query.person ? { person: query.person } : {}), ...(query.chat ? { chat: query.chat } : {}) }, now());
    return { currency: config.currency, timeZone: config.timeZone, budgets: budgets.map((budget) => ({ ...budget, resetsAt: budget.resetsAt === null ? null : new Date(budget.resetsAt).toISOString() })) };
  });
}
