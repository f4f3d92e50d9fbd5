/**
 * The shipped price table: US dollars per million tokens by `provider/model`, as the providers
 * published them for their common models (list prices, standard tier, no batch discount). Data
 * only, kept apart from the code that reads it (./pricing.ts) and from the provider catalog, so
 * that either can change without the other. `budgets.prices` in the config overrides or adds.
 *
 * `cachedInput` is the price of input read from the prompt cache (OpenAI's cached input,
 * Anthropic's cache read, DeepSeek's cache hit). Anthropic's cache writes cost more than input;
 * they are counted as input here, the providers' usage reports do not tell them apart everywhere.
 */
export interface ShippedPrice {
  input: number;
  cachedInput: number;
  output: number;
}

export const SHIPPED_PRICES: Readonly<Record<string, ShippedPrice>> = {
  "openai/gpt-4o": { input: 2.5, cachedInput: 1.25, output: 10 },
  "openai/gpt-4o-mini": { input: 0.15, cachedInput: 0.075, output: 0.6 },
  "openai/gpt-4.1": { input: 2, cachedInput: 0.5, output: 8 },
  "openai/gpt-4.1-mini": { input: 0.4, cachedInput: 0.1, output: 1.6 },
  "openai/gpt-4.1-nano": { input: 0.1, cachedInput: 0.025, output: 0.4 },
  "openai/gpt-5": { input: 1.25, cachedInput: 0.125, output: 10 },
  "openai/gpt-5-mini": { input: 0.25, cachedInput: 0.025, output: 2 },
  "openai/gpt-5-nano": { input: 0.05, cachedInput: 0.005, output: 0.4 },
  "openai/o3": { input: 2, cachedInput: 0.5, output: 8 },
  "openai/o3-mini": { input: 1.1, cachedInput: 0.55, output: 4.4 },
  "openai/o4-mini": { input: 1.1, cachedInput: 0.275, output: 4.4 },
  "anthropic/claude-opus-4-1": { input: 15, cachedInput: 1.5, output: 75 },
  "anthropic/claude-opus-4-0": { input: 15, cachedInput: 1.5, output: 75 },
  "anthropic/claude-sonnet-4-5": { input: 3, cachedInput: 0.3, output: 15 },
  "anthropic/claude-sonnet-4-0": { input: 3, cachedInput: 0.3, output: 15 },
  "anthropic/claude-3-7-sonnet": { input: 3, cachedInput: 0.3, output: 15 },
  "anthropic/claude-haiku-4-5": { input: 1, cachedInput: 0.1, output: 5 },
  "anthropic/claude-3-5-haiku": { input: 0.8, cachedInput: 0.08, output: 4 },
  "deepseek/deepseek-chat": { input: 0.28, cachedInput: 0.028, output: 0.42 },
  "deepseek/deepseek-reasoner": { input: 0.28, cachedInput: 0.028, output: 0.42 },
  "moonshot/kimi-k2": { input: 0.6, cachedInput: 0.15, output: 2.5 },
};
