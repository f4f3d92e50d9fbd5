/**
 * Prometheus metrics (prom-client) for one process: the counters and histograms of the Metrics
 * contract, gauges read at scrape time (the bus's ready and leased sessions and dead letters, the
 * leader leases this process holds), and the process's own (CPU, memory, event loop).
 */
import { splitChannel } from "../config/accounts.js";
import { DEFAULT_PROFILE } from "../config/agents.js";
import type { FastifyInstance } from "fastify";
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from "prom-client";
import type { MessageBus } from "../bus/message-bus.js";
import type { Metrics } from "../metrics.js";

export interface PrometheusMetrics extends Metrics {
  registry: Registry;
  /** The text exposition format, for `/metrics`. */
  render(): Promise<string>;
  /** Adds what is read at scrape time. */
  watch(sources: {
    bus?: Pick<MessageBus, "stats">;
    leaders?: () => Array<{ name: string; leading: boolean }>;
    /** Each channel's health in this process (`up`/`degraded` count as up). */
    channels?: () => Array<{ name: string; state: string }>;
    queues?: () => Promise<Array<{ queue: string; waiting: number; active: number; failed: number }>>;
  }): void;
}

export function createPrometheusMetrics(options: { role: string }): PrometheusMetrics {
  const registry = new Registry();
  registry.setDefaultLabels({ role: options.role });
  // Node's default metrics keep their usual names (process_*, nodejs_*): the dashboards and alerts
  // people already have ask for those; CountBot's own metrics are the ones prefixed countbot_.
  collectDefaultMetrics({ register: registry });
  const messagesIn = new Counter({ name: "countbot_messages_in_total", help: "Platform events, by what admission did with them.", labelNames: ["channel", "account", "outcome"], registers: [registry] });
  const messagesOut = new Counter({ name: "countbot_messages_out_total", help: "Chunks delivered to a platform.", labelNames: ["channel", "account", "kind"], registers: [registry] });
  const retried = new Counter({ name: "countbot_deliveries_retried_total", help: "Platform calls tried again: rate limits waited out, network failures, refused markup.", labelNames: ["channel", "account", "reason"], registers: [registry] });
  const rateLimited = new Counter({ name: "countbot_platform_rate_limited_total", help: "Platform calls answered with the platform's rate limit (429, or its code for one).", labelNames: ["channel", "account"], registers: [registry] });
  const deferred = new Counter({ name: "countbot_sends_deferred_total", help: "Platform calls the send governor held back until the platform's budget had room.", labelNames: ["channel", "account"], registers: [registry] });
  const draftsSkipped = new Counter({ name: "countbot_draft_edits_skipped_total", help: "Streamed drafts left out because a platform budget ran low (the next draft or the final shows their text).", labelNames: ["channel", "account"], registers: [registry] });
  const turns = new Histogram({
    name: "countbot_turn_duration_seconds",
    help: "Turns from claim to acknowledgement.",
    labelNames: ["outcome", "profile"],
    buckets: [0.1, 0.25, 0.5, 1, 2, 5, 10, 20, 40, 80, 160],
    registers: [registry],
  });
  const modelCalls = new Histogram({
    name: "countbot_model_call_duration_seconds",
    help: "Model calls (one stream, retries and fallbacks included), by provider/model.",
    labelNames: ["model", "outcome"],
    buckets: [0.1, 0.25, 0.5, 1, 2, 5, 10, 20, 40, 80],
    registers: [registry],
  });
  const modelErrors = new Counter({ name: "countbot_model_errors_total", help: "Model calls that failed.", labelNames: ["model"], registers: [registry] });
  const toolCalls = new Counter({ name: "countbot_tool_calls_total", help: "Tool calls, by tool and outcome.", labelNames: ["tool", "outcome"], registers: [registry] });
  const tokens = new Counter({ name: "countbot_model_tokens_total", help: "Tokens of model calls, by provider/model, channel and kind: input (uncached), cached (read from the prompt cache), cache_write (written to it, Anthropic), output.", labelNames: ["model", "channel", "kind"], registers: [registry] });
  const cost = new Counter({ name: "countbot_model_cost_total", help: "Cost of model calls in the budgets' currency (calls of models with a price), by provider/model and channel.", labelNames: ["model", "channel"], registers: [registry] });
  const refusals = new Counter({ name: "countbot_budget_refusals_total", help: "Model calls refused because a budget was used up, by the budget's kind.", labelNames: ["budget"], registers: [registry] });
  const sources: ScrapeSources = {};
  registerScrapeGauges(registry, sources);
  return {
    registry,
    render: () => registry.metrics(),
    watch: (added) => Object.assign(sources, added),
    inbound: (channel, outcome) => messagesIn.inc({ ...channelLabels(channel), outcome }),
    outbound: (channel, kind) => messagesOut.inc({ ...channelLabels(channel), kind }),
    deliveryRetried: (channel, reason) => retried.inc({ ...channelLabels(channel), reason }),
    rateLimited: (channel) => rateLimited.inc(channelLabels(channel)),
    sendDeferred: (channel) => deferred.inc(channelLabels(channel)),
    draftSkipped: (channel) => draftsSkipped.inc(channelLabels(channel)),
    turn: (seconds, outcome, profile = DEFAULT_PROFILE) => turns.observe({ outcome, profile }, seconds),
    modelCall: (model, seconds, outcome) => {
      modelCalls.observe({ model, outcome }, seconds);
      if (outcome === "error") modelErrors.inc({ model });
    },
    toolCall: (tool, outcome) => toolCalls.inc({ tool, outcome }),
    modelUsage: (model, channel, usage, amount) => {
      const cached = usage.cachedInputTokens ?? 0;
      const written = usage.cacheWriteInputTokens ?? 0;
      tokens.inc({ model, channel, kind: "input" }, Math.max(0, usage.inputTokens - cached - written));
      if (cached > 0) tokens.inc({ model, channel, kind: "cached" }, cached);
      if (written > 0) tokens.inc({ model, channel, kind: "cache_write" }, written);
      tokens.inc({ model, channel, kind: "output" }, usage.outputTokens);
      if (amount !== undefined) cost.inc({ model, channel }, amount);
    },
    budgetRefused: (kind) => refusals.inc({ budget: kind }),
  };
}

/** What the gauges read at scrape time: whatever `watch` has handed in so far. */
type ScrapeSources = Parameters<PrometheusMetrics["watch"]>[0];

/**
 * The gauges read when Prometheus scrapes, from the sources `watch` added (one not added yet reads
 * as nothing): the bus's sessions and dead letters, the leader leases, each channel's state, the
 * job queues.
 */
function registerScrapeGauges(registry: Registry, sources: ScrapeSources): void {
  new Gauge({
    name: "countbot_bus_sessions",
    help: "Chat sessions waiting for a worker (ready) and being answered (leased).",
    labelNames: ["state"],
    registers: [registry],
    async collect() {
      if (!sources.bus) return;
      const stats = await sources.bus.stats();
      this.set({ state: "ready" }, stats.ready);
      this.set({ state: "leased" }, stats.leased);
    },
  });
  new Gauge({
    name: "countbot_dead_letters",
    help: "Messages parked after their turn kept failing.",
    registers: [registry],
    async collect() {
      if (sources.bus) this.set((await sources.bus.stats()).deadLetters);
    },
  });
  new Gauge({
    name: "countbot_leader",
    help: "1 for each channel account this process leads (connects and delivers for), 0 while it waits.",
    labelNames: ["name"],
    registers: [registry],
    collect() {
      this.reset();
      for (const leader of sources.leaders?.() ?? []) this.set({ name: leader.name }, leader.leading ? 1 : 0);
    },
  });
  new Gauge({
    name: "countbot_channel_up",
    help: "1 while a channel this process runs is up (or degraded but working), 0 while it is starting or down.",
    labelNames: ["channel", "account"],
    registers: [registry],
    collect() {
      this.reset();
      for (const channel of sources.channels?.() ?? []) this.set(channelLabels(channel.name), channel.state === "up" || channel.state === "degraded" ? 1 : 0);
    },
  });
  new Gauge({
    name: "countbot_channel_state",
    help: "1 for each channel's current state (starting, up, degraded, down, standby) in this process.",
    labelNames: ["channel", "account", "state"],
    registers: [registry],
    collect() {
      this.reset();
      for (const channel of sources.channels?.() ?? []) this.set({ ...channelLabels(channel.name), state: channel.state }, 1);
    },
  });
  new Gauge({
    name: "countbot_jobs",
    help: "Background jobs (subagents, team agents) waiting, running and failed, per queue.",
    labelNames: ["queue", "state"],
    registers: [registry],
    async collect() {
      if (!sources.queues) return;
      for (const counts of await sources.queues()) {
        for (const state of ["waiting", "active", "failed"] as const) this.set({ queue: counts.queue, state }, counts[state]);
      }
    },
  });
}

/** `GET /metrics`; register it behind the API token. */
export function registerMetricsRoute(scope: FastifyInstance, metrics: Pick<PrometheusMetrics, "render" | "registry">): void {
  scope.get("/metrics", async (_request, reply) => reply.header("content-type", metrics.registry.contentType).send(await metrics.render()));
}

/** A bus channel's labels: the platform (`channel`) and its account (`default` for a section without `accounts`). */
function channelLabels(name: string): { channel: string; account: string } {
  const { platform, account } = splitChannel(name);
  return { channel: platform, account };
}
