/**
 * The budget guard of a process, built on the deployment's ledger, with the config's budgets and
 * prices read at each call (a reload applies to the next one), and the start-up check that every
 * model a money budget may count has a price.
 */
import type { Logger } from "pino";
import { type BudgetGuard, createBudgetGuard } from "../budget/guard.js";
import { hasMoneyBudget } from "../config/budgets.js";
import type { ResolvedConfig } from "../config/schema.js";
import { ConfigError } from "../errors.js";
import type { Metrics } from "../metrics.js";
import { type PriceBook, createPriceBook } from "../providers/pricing.js";
import type { BudgetLedger } from "../store/budget-ledger.js";

export interface ProcessBudgets {
  guard: BudgetGuard;
  /** Applies a reloaded config's `budgets` from the next model call on. */
  reload(config: ResolvedConfig): void;
}

export function createProcessBudgets(config: ResolvedConfig, ledger: BudgetLedger, logger: Logger, metrics?: Metrics): ProcessBudgets {
  checkModelPrices(config);
  let budgets = config.budgets;
  let prices: PriceBook = createPriceBook(budgets);
  const guard = createBudgetGuard({ ledger, config: () => budgets, prices: () => prices, logger: logger.child({ component: "budgets" }), metrics });
  return {
    guard,
    reload(next) {
      checkModelPrices(next);
      budgets = next.budgets;
      prices = createPriceBook(budgets);
    },
  };
}

/** With a money budget, the configured models (agent, fallbacks, config teams) must have a price: ConfigError naming `budgets.prices`. */
export function checkModelPrices(config: ResolvedConfig): void {
  if (!hasMoneyBudget(config.budgets)) return;
  const book = createPriceBook(config.budgets);
  const teamModels = Object.values(config.teams).flatMap((team) => [team.modelConfig?.model, ...team.agents.map((agent) => agent.model)]);
  const models = [config.agent.model, ...config.agent.fallbackModels, ...teamModels].filter((model): model is string => model !== undefined);
  const unpriced = [...new Set(models)].filter((model) => !book.priceOf(model));
  if (unpriced.length > 0) {
    throw new ConfigError(
      `budgets: a money budget is set, but ${unpriced.join(", ")} ha${unpriced.length === 1 ? "s" : "ve"} no price in ${config.budgets.currency}: add ${unpriced.length === 1 ? "it" : "them"} to budgets.prices (per million tokens: input, cachedInput, output)`,
      "budgets.prices",
    );
  }
}
