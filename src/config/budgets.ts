/**
 * The `budgets` section: spend limits in tokens or money per person, chat, team run, channel and
 * for the whole deployment, and the prices that turn tokens into money. A default applies to
 * every person (chat, channel, team run) and named ones may override it (`null`: no budget for
 * that one). Every issue names its field (`budgets.people["telegram:42"].period`).
 */
import { z } from "zod";

export const BUDGET_PERIODS = ["day", "week", "month"] as const;
export type BudgetPeriod = (typeof BUDGET_PERIODS)[number];
export const BUDGET_RESETS = ["calendar", "rolling"] as const;
export type BudgetReset = (typeof BUDGET_RESETS)[number];

const timeZone = z.string().refine(isTimeZone, "expected an IANA time zone, e.g. UTC or Europe/Berlin");

function isTimeZone(name: string): boolean {
  try {
    new Intl.DateTimeFormat("en-US", { timeZone: name });
    return true;
  } catch {
    return false;
  }
}

/** A token limit is a whole number. */
function wholeTokens(budget: { limit: number; unit: "tokens" | "money" }, context: z.RefinementCtx): void {
  if (budget.unit === "tokens" && !Number.isInteger(budget.limit)) {
    context.addIssue({ code: "custom", path: ["limit"], message: `expected a whole number of tokens, got ${budget.limit} (for money set "unit": "money")` });
  }
}

const limitShape = {
  limit: z.number().positive().describe("The most a period may use: tokens (input plus output, as the provider reports them), or money in `budgets.currency` (5 for 5 USD)."),
  unit: z.enum(["tokens", "money"]).default("tokens").describe("What `limit` counts: `tokens`, or `money` (needs a price for every model, see `prices`)."),
};

/** A budget that renews: per person, chat, channel or the whole deployment. */
export const PeriodBudgetSchema = z
  .strictObject({
    ...limitShape,
    period: z.enum(BUDGET_PERIODS).default("day").describe("How long the limit lasts before it renews."),
    reset: z
      .enum(BUDGET_RESETS)
      .optional()
      .describe("`calendar`: renews at the start of each day, week (Monday) or month in `timeZone`; `rolling`: counts the last 24 hours, 7 days or 30 days. Default: `budgets.reset`."),
    timeZone: timeZone.optional().describe("IANA time zone the calendar period follows. Default: `budgets.timeZone`."),
  })
  .superRefine(wholeTokens);
export type PeriodBudgetConfig = z.infer<typeof PeriodBudgetSchema>;

/** A budget for one team run, from its start to its end: no period. */
export const RunBudgetSchema = z.strictObject(limitShape).superRefine(wholeTokens);
export type RunBudgetConfig = z.infer<typeof RunBudgetSchema>;

/** Price of a model per million tokens, in `budgets.currency`. */
export const ModelPriceSchema = z.strictObject({
  input: z.number().min(0).describe("Per million input tokens not read from the prompt cache."),
  cachedInput: z.number().min(0).optional().describe("Per million input tokens read from the prompt cache. Default: `input`."),
  output: z.number().min(0).describe("Per million output tokens (reasoning included)."),
});
export type ModelPrice = z.infer<typeof ModelPriceSchema>;

const personKey = z.string().regex(/^[\w.-]+:.+$/, "expected a person `channel:senderId`, e.g. telegram:123456");
const chatKey = z.string().regex(/^[\w.-]+:.+$/, "expected a chat `channel:chat_id`, e.g. telegram:-100123");
const modelKey = z.string().regex(/^[\w.-]+\/.+$/, "expected `provider/model`, e.g. openai/gpt-4o-mini");

export const BudgetsSchema = z
  .strictObject({
    currency: z
      .string()
      .regex(/^[A-Z]{3}$/, "expected a three-letter currency code, e.g. USD")
      .default("USD")
      .describe("The currency of money budgets and of `prices`. The shipped prices are in USD: with another currency they apply only with `usdRate`."),
    usdRate: z.number().positive().optional().describe("Units of `currency` per US dollar, to convert the shipped prices (e.g. 0.92 for EUR). Unset with a currency other than USD: only `prices` count."),
    timeZone: timeZone.default("UTC").describe("IANA time zone where calendar days, weeks and months begin (and of the usage report's days)."),
    reset: z.enum(BUDGET_RESETS).default("calendar").describe("Default of each budget's `reset`."),
    warnAt: z.number().gt(0).max(1).default(0.8).describe("Share of a budget at which the person is warned (once a period) and the log says so."),
    reservationTtlMs: z
      .number()
      .int()
      .min(1_000)
      .max(3_600_000)
      .default(60_000)
      .describe("A model call's reservation is renewed every third of this while the call runs; a crashed worker's reservation is released after at most this long."),
    usageRetentionDays: z.number().int().min(1).max(3_660).default(400).describe("Days the usage report (`countbot usage`, `/api/usage`) keeps."),
    prices: z
      .record(modelKey, ModelPriceSchema)
      .default({})
      .describe("Prices per million tokens by `provider/model`, over the shipped ones (see README, Budgets)."),
    person: PeriodBudgetSchema.optional().describe("Every person's budget (`channel:senderId`), unless `people` names them."),
    people: z.record(personKey, PeriodBudgetSchema.nullable()).default({}).describe("Budgets of named people; `null` exempts one from `person`."),
    chat: PeriodBudgetSchema.optional().describe("Every chat's budget (`channel:chat_id`), unless `chats` names it."),
    chats: z.record(chatKey, PeriodBudgetSchema.nullable()).default({}).describe("Budgets of named chats; `null` exempts one from `chat`."),
    channel: PeriodBudgetSchema.optional().describe("Every channel's budget (all chats of a platform together), unless `channels` names it."),
    channels: z.record(z.string().regex(/^[\w.-]+$/, "expected a channel name, e.g. telegram"), PeriodBudgetSchema.nullable()).default({}).describe("Budgets of named channels; `null` exempts one from `channel`."),
    teamRun: RunBudgetSchema.optional().describe("Every team run's budget, from its start to its end, unless `teams` names its team."),
    teams: z.record(z.string().min(1), RunBudgetSchema.nullable()).default({}).describe("Run budgets of named teams; `null` exempts a team from `teamRun`."),
    agent: PeriodBudgetSchema.optional().describe("Every agent profile's budget (all the calls of its turns, subagents and team runs), unless `agents` names it (see README, Several bots)."),
    agents: z.record(z.string().regex(/^[\w-]{1,32}$/, "expected an agent profile id, e.g. support"), PeriodBudgetSchema.nullable()).default({}).describe("Budgets of named agent profiles (`default` included); `null` exempts one from `agent`."),
    deployment: PeriodBudgetSchema.optional().describe("The whole deployment's budget: every model call counts."),
  })
  .prefault({});
export type BudgetsConfig = z.infer<typeof BudgetsSchema>;

/** Whether any budget counts money (then every model used needs a price). */
export function hasMoneyBudget(budgets: BudgetsConfig): boolean {
  const all = [
    ...[budgets.person, budgets.chat, budgets.channel, budgets.teamRun, budgets.agent, budgets.deployment],
    ...[budgets.people, budgets.chats, budgets.channels, budgets.teams, budgets.agents].flatMap((named) => Object.values(named)),
  ];
  return all.some((budget) => budget?.unit === "money");
}
