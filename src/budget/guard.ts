/**
 * The budget guard: a ChatModel wrapper that makes every model call of a turn, subagent or team
 * agent count against the budgets of its scope (./policy.ts).
 *
 * Before the call it reserves the worst case (./estimate.ts) against every budget at once
 * (BudgetLedger.reserve: all or nothing, granted only while each has room). While the call
 * streams the reservation is renewed every third of its TTL, so only a dead worker's expires.
 * After the call it settles to the usage the provider reported and adds the call to the usage
 * report; a call that streamed something but never reported usage (cut off, or a server that does
 * not report it) is settled at its estimated prompt plus the text it streamed, one that failed
 * before any output at nothing.
 *
 * When a budget has no room:
 * - used up (its use alone reaches the limit): the call is refused with a BudgetExhaustedError
 *   whose `reply` names the budget, its use and when it renews, at length the first time in the
 *   budget's period and in one line after that;
 * - held only by calls in flight: the call waits until they settle (or expire) and tries again,
 *   so a burst spends the budget as far as it goes instead of being refused early.
 * When a settlement takes a budget past `warnAt` of its limit the log says so, and for a person's
 * or a chat's budget the chat is told (once a period).
 */
import { randomUUID } from "node:crypto";
import type { Logger } from "pino";
import type { BudgetsConfig } from "../config/budgets.js";
import { BudgetExhaustedError } from "../errors.js";
import type { Metrics } from "../metrics.js";
import type { ChatModel, Usage } from "../providers/chat-model.js";
import { type PriceBook, costIn } from "../providers/pricing.js";
import type { BudgetLedger, BudgetState } from "../store/budget-ledger.js";
import { sleep } from "../sleep.js";
import { DEFAULT_MAX_OUTPUT_TOKENS, estimatePromptTokens, estimateTextTokens } from "./estimate.js";
import { dayIn, freesAt } from "./periods.js";
import { type AppliedBudget, type CallScope, budgetsFor, channelOfChat } from "./policy.js";
import { fullRefusal, shortRefusal, warningText } from "./replies.js";
import { describeUsage, usageCounts } from "./usage-report.js";

export interface BudgetGuardOptions {
  ledger: BudgetLedger;
  /** The current `budgets` section (read at each call, so a reload applies to the next one). */
  config: () => BudgetsConfig;
  prices: () => PriceBook;
  logger: Logger;
  metrics?: Pick<Metrics, "modelUsage" | "budgetRefused">;
  now?: () => number;
  newId?: () => string;
  /** First wait while calls in flight hold a budget (ms); doubles up to a second. Default 50. */
  waitMs?: number;
}

export interface CallHooks {
  /** A person's or chat's budget passed `warnAt`: tell the chat. */
  onWarning?(text: string): void | Promise<void>;
}

export interface BudgetGuard {
  /** The model, each call counted against the scope's budgets and in the usage report. */
  bind(model: ChatModel, scope: CallScope, hooks?: CallHooks): ChatModel;
  /** `/usage`: the person's and the chat's spend against their budgets. */
  describe(scope: { person?: string; chat: string }): Promise<string>;
}

const DAY = 24 * 60 * 60 * 1000;

export function createBudgetGuard(options: BudgetGuardOptions): BudgetGuard {
  const { ledger, logger } = options;
  const now = options.now ?? Date.now;
  const newId = options.newId ?? randomUUID;
  const context: GuardContext = { ledger, logger, metrics: options.metrics, now };

  async function reserve(id: string, budgets: AppliedBudget[], amounts: number[], config: BudgetsConfig, signal: AbortSignal | undefined): Promise<void> {
    for (let wait = options.waitMs ?? 50; ; wait = Math.min(wait * 2, 1_000)) {
      const outcome = await ledger.reserve({ id, budgets, amounts, ttlMs: config.reservationTtlMs, now: now() });
      if (outcome.granted) return;
      const spent = budgets.findIndex((budget, index) => outcome.states[index]!.used >= budget.limit);
      if (spent >= 0) throw await refusal(context, budgets[spent]!, outcome.states[spent]!, config);
      // Only calls in flight fill it: they settle (or expire) soon, and most settle below their worst case.
      await sleep(wait + Math.floor(Math.random() * wait), signal);
    }
  }

  return {
    describe: (scope) => describeUsage(ledger, options.config(), scope, now()),
    bind(model, scope, hooks) {
      return {
        id: model.id,
        async *stream(request) {
          const config = options.config();
          const prices = options.prices();
          const budgets = budgetsFor(config, scope, now());
          const price = prices.priceOf(model.id);
          if (!price && budgets.some((budget) => budget.unit === "money")) {
            throw new Error(`${model.id} has no price, and a money budget applies to this call: add it to budgets.prices in the config`);
          }
          const promptTokens = estimatePromptTokens(request);
          const worst = { inputTokens: promptTokens, outputTokens: request.maxTokens ?? DEFAULT_MAX_OUTPUT_TOKENS };
          const amounts = budgets.map((budget) => (budget.unit === "tokens" ? worst.inputTokens + worst.outputTokens : costIn(price!, worst)));
          const id = newId();
          if (budgets.length > 0) await reserve(id, budgets, amounts, config, request.signal);

          const renewal = budgets.length > 0 ? setInterval(() => {
            ledger.extend({ id, budgets, amounts, ttlMs: config.reservationTtlMs, now: now() }).catch((error: unknown) => logger.warn({ err: error }, "a budget reservation could not be renewed"));
          }, Math.max(100, Math.floor(config.reservationTtlMs / 3))) : undefined;
          let reported: Usage | undefined;
          let streamed = "";
          try {
            for await (const part of model.stream(request)) {
              if (part.type === "finish") reported = part.usage;
              else if (part.type === "text-delta" || part.type === "reasoning-delta") streamed += part.text;
              else if (part.type === "tool-call") streamed += part.call.arguments;
              yield part;
            }
          } finally {
            clearInterval(renewal);
            const usage = reported ?? (streamed === "" ? { inputTokens: 0, outputTokens: 0 } : { inputTokens: promptTokens, outputTokens: estimateTextTokens(streamed) });
            await settle(usage);
          }

          async function settle(usage: Usage): Promise<void> {
            const cost = price ? costIn(price, usage) : undefined;
            const used = budgets.map((budget) => (budget.unit === "tokens" ? usage.inputTokens + usage.outputTokens : (cost ?? 0)));
            const at = now();
            const channel = scope.channel ?? (scope.chat ? channelOfChat(scope.chat) : "none");
            options.metrics?.modelUsage(model.id, channel, usage, cost === undefined ? undefined : cost / 1_000_000);
            try {
              const after = await ledger.settle({
                id,
                budgets,
                reserved: budgets.length > 0 ? amounts : [],
                used,
                now: at,
                usage: { day: dayIn(config.timeZone, at), counts: usageCounts(scope, model.id, usage, cost), keepMs: config.usageRetentionDays * DAY },
              });
              await warn(context, budgets, after, used, config, hooks);
            } catch (error) {
              // The reservation expires by itself; the usage of this one call is lost from the report.
              logger.error({ err: error, model: model.id, inputTokens: usage.inputTokens, outputTokens: usage.outputTokens }, "a model call's usage could not be recorded");
            }
          }
        },
      };
    },
  };
}

/** What the refusal and the warning need of the guard. */
interface GuardContext {
  ledger: BudgetLedger;
  logger: Logger;
  metrics?: Pick<Metrics, "budgetRefused">;
  now: () => number;
}

/**
 * The error a call gets when a budget it counts against is spent: the full explanation the first
 * time in the budget's period (once across the deployment, through the ledger), a short one after.
 */
async function refusal(context: GuardContext, budget: AppliedBudget, state: BudgetState, config: BudgetsConfig): Promise<BudgetExhaustedError> {
  const { ledger, logger, now } = context;
  context.metrics?.budgetRefused(budget.kind);
  const at = now();
  const frees = budget.spec && budget.resetsAt === undefined && state.oldestBucket !== undefined ? freesAt(budget.spec, state.oldestBucket) : undefined;
  const facts = { budget, used: state.used, currency: config.currency, ...(frees === undefined ? {} : { freesAt: frees }) };
  const periodEnd = budget.resetsAt ?? frees ?? at + DAY;
  const first = await ledger.firstNotice(`refused:${budget.unit}:${budget.scope}:${budget.from}`, periodEnd, at);
  logger.info({ budget: budget.scope, unit: budget.unit, used: state.used, limit: budget.limit, resetsAt: budget.resetsAt }, "model call refused: budget used up");
  const short = shortRefusal(facts);
  return new BudgetExhaustedError(`budget exhausted: ${short}`, first ? fullRefusal(facts) : short, {
    kind: budget.kind,
    subject: budget.subject,
    unit: budget.unit,
    used: state.used,
    limit: budget.limit,
    ...(budget.resetsAt === undefined ? {} : { resetsAt: budget.resetsAt }),
  });
}

/** Tells a person or chat once per period (through the ledger) that a budget passed `warnAt`. */
async function warn(context: GuardContext, budgets: AppliedBudget[], after: BudgetState[], used: number[], config: BudgetsConfig, hooks: CallHooks | undefined): Promise<void> {
  const { ledger, logger, now } = context;
  for (const [index, budget] of budgets.entries()) {
    const threshold = budget.limit * config.warnAt;
    const state = after[index]!;
    if (state.used < threshold || state.used - used[index]! >= threshold) continue;
    const at = now();
    if (!(await ledger.firstNotice(`warned:${budget.unit}:${budget.scope}:${budget.from}`, budget.resetsAt ?? at + DAY, at))) continue;
    logger.warn({ budget: budget.scope, unit: budget.unit, used: state.used, limit: budget.limit, warnAt: config.warnAt }, "budget nearly used up");
    if (budget.kind === "person" || budget.kind === "chat") await hooks?.onWarning?.(warningText(budget, state.used, config.currency));
  }
}

/** `guard`, each call also counted against agent profile `agent`'s budget (`budgets.agent`, `budgets.agents`). */
export function guardForAgent(guard: BudgetGuard, agent: string): BudgetGuard {
  return {
    bind: (model, scope, hooks) => guard.bind(model, { ...scope, agent }, hooks),
    describe: (scope) => guard.describe(scope),
  };
}
