/**
 * What a model call costs: the price of a `provider/model` (the config's `budgets.prices` over the
 * shipped table, ./prices.ts) applied to its usage. Money is counted in millionths of the currency
 * (integers), so that tokens × price per million tokens is the cost with no rounding until the end,
 * and Redis adds it exactly.
 */
import type { BudgetsConfig, ModelPrice } from "../config/budgets.js";
import type { Usage } from "./chat-model.js";
import { SHIPPED_PRICES } from "./prices.js";

/** Per million tokens, in the book's currency. */
export interface Price {
  input: number;
  cachedInput: number;
  output: number;
}

export interface PriceBook {
  /** ISO code, e.g. `USD`. */
  readonly currency: string;
  /** The price of `provider/model`; undefined when neither the config nor the shipped table knows it. */
  priceOf(model: string): Price | undefined;
  /** The cost of a call in millionths of the currency; undefined without a price. */
  costOf(model: string, usage: Usage): number | undefined;
}

/** A dated or `-latest` model id names the same model as its base: `gpt-4o-2024-08-06` is `gpt-4o`. */
const VERSION_SUFFIX = /-(\d{4}-\d{2}-\d{2}|\d{8}|latest)$/;

export function createPriceBook(config: Pick<BudgetsConfig, "currency" | "usdRate" | "prices">): PriceBook {
  // Shipped prices are dollars: another currency uses them only at the rate the operator gave.
  const rate = config.currency === "USD" ? 1 : config.usdRate;
  const configured = (model: string): ModelPrice | undefined => config.prices[model];
  const shipped = (model: string): Price | undefined => {
    const price = SHIPPED_PRICES[model];
    if (!price || rate === undefined) return undefined;
    return { input: price.input * rate, cachedInput: price.cachedInput * rate, output: price.output * rate };
  };
  const lookup = (model: string): Price | undefined => {
    const own = configured(model);
    if (own) return { input: own.input, cachedInput: own.cachedInput ?? own.input, output: own.output };
    return shipped(model);
  };
  const book: PriceBook = {
    currency: config.currency,
    priceOf(model) {
      const exact = lookup(model);
      if (exact) return exact;
      const base = model.replace(VERSION_SUFFIX, "");
      return base === model ? undefined : lookup(base);
    },
    costOf(model, usage) {
      const price = book.priceOf(model);
      return price ? costIn(price, usage) : undefined;
    },
  };
  return book;
}

/** Millionths of the currency, rounded up: a fraction of a millionth is never given away. */
export function costIn(price: Price, usage: Pick<Usage, "inputTokens" | "outputTokens" | "cachedInputTokens">): number {
  const cached = Math.min(usage.cachedInputTokens ?? 0, usage.inputTokens);
  return Math.ceil((usage.inputTokens - cached) * price.input + cached * price.cachedInput + usage.outputTokens * price.output);
}

/** `12.5` for 12,500,000 millionths: money as people read it. */
export function moneyOf(micros: number): number {
  return micros / 1_000_000;
}
