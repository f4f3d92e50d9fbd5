/**
 * What CountBot counts, as a contract every layer may use (the Prometheus registry behind it is
 * the composition root's, src/app/metrics.ts). Labels are small closed sets or names the operator
 * configured (channel, tool, `provider/model`), never a chat id or user text.
 */
export interface Metrics {
  /** A platform event and what admission did with it (`published`, `duplicate`, `ignored:bot`, ...). */
  inbound(channel: string, outcome: string): void;
  /** A chunk that reached the platform. */
  outbound(channel: string, kind: "final" | "notice" | "gateway"): void;
  /** A platform call that is tried again: a rate limit waited out, a network failure, refused markup. */
  deliveryRetried(channel: string, reason: "rate-limit" | "network" | "formatting"): void;
  /** The platform answered a call with its rate limit (a 429, or its own code for one). */
  rateLimited(channel: string): void;
  /** A call the send governor held back until the platform's budget had room. */
  sendDeferred(channel: string): void;
  /** A streamed draft left out (the budgets were low): the next one, or the final, shows its text. */
  draftSkipped(channel: string): void;
  /** A turn from claim to ack. */
  /** `profile`: the agent profile the turn ran as (src/config/agents.ts). Default `default`. */
  turn(seconds: number, outcome: "answered" | "failed" | "cancelled" | "dead-letter", profile?: string): void;
  /** One model call (a stream), by `provider/model`. */
  modelCall(model: string, seconds: number, outcome: "ok" | "error"): void;
  toolCall(tool: string, outcome: "ok" | "error"): void;
  /** What a model call used, by `provider/model` and channel; `cost` in the budgets' currency when the model has a price. */
  modelUsage(model: string, channel: string, usage: { inputTokens: number; outputTokens: number; cachedInputTokens?: number; cacheWriteInputTokens?: number }, cost: number | undefined): void;
  /** A model call refused because a budget of this kind (person, chat, team, channel, deployment) was used up. */
  budgetRefused(kind: string): void;
}

export const noMetrics: Metrics = {
  inbound: () => undefined,
  outbound: () => undefined,
  deliveryRetried: () => undefined,
  rateLimited: () => undefined,
  sendDeferred: () => undefined,
  draftSkipped: () => undefined,
  turn: () => undefined,
  modelCall: () => undefined,
  toolCall: () => undefined,
  modelUsage: () => undefined,
  budgetRefused: () => undefined,
};
