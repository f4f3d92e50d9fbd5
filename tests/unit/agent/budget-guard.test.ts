import pino from "pino";
import { describe, expect, it } from "vitest";
import { createBudgetGuard } from "../../../src/budget/guard.js";
import { estimatePromptTokens, estimateTextTokens } from "../../../src/budget/estimate.js";
import { usageReport } from "../../../src/budget/usage-report.js";
import { type BudgetsConfig, BudgetsSchema } from "../../../src/config/budgets.js";
import { BudgetExhaustedError } from "../../../src/errors.js";
import type { ChatModel } from "../../../src/providers/chat-model.js";
import { createPriceBook } from "../../../src/providers/pricing.js";
import { createMemoryBudgetLedger } from "../../../src/store/memory-budget-ledger.js";
import { gate } from "../../support/agent-harness.js";
import { scriptedModel } from "../../support/scripted-model.js";

const NOON = Date.UTC(2026, 11, 4, 12);

function setup(budgets: Record<string, unknown>, model: ChatModel, clock = { now: NOON }) {
  const config: BudgetsConfig = BudgetsSchema.parse(budgets);
  const ledger = createMemoryBudgetLedger();
  const refusals: string[] = [];
  const usages: Array<[string, string, number, number | undefined]> = [];
  const guard = createBudgetGuard({
    ledger,
    config: () => config,
    prices: () => createPriceBook(config),
    logger: pino({ level: "silent" }),
    now: () => clock.now,
    waitMs: 1,
    metrics: { budgetRefused: (kind) => refusals.push(kind), modelUsage: (name, channel, usage, cost) => usages.push([name, channel, usage.inputTokens + usage.outputTokens, cost]) },
  });
  return { guard, ledger, config, refusals, usages, model };
}

async function drain(model: ChatModel, maxTokens = 100): Promise<string> {
  let text = "";
  for await (const part of model.stream({ messages: [{ role: "user", content: "hi" }], maxTokens })) if (part.type === "text-delta") text += part.text;
  return text;
}

describe("budget guard", () => {
  it("lets calls through while the budget has room, then refuses without calling the model: at length once, then in one line", async () => {
    const scripted = scriptedModel(() => ({ text: "ok", usage: { inputTokens: 400, outputTokens: 200 } }), "openai/gpt-4o-mini");
    const { guard, refusals } = setup({ person: { limit: 1_000 } }, scripted);
    const model = guard.bind(scripted, { person: "web:ada", chat: "web:a" });
    expect(await drain(model)).toBe("ok");
    expect(await drain(model)).toBe("ok"); // 600 < 1,000: granted, ends at 1,200
    const first = await drain(model).catch((error: unknown) => error);
    expect(first).toBeInstanceOf(BudgetExhaustedError);
    const refused = first as BudgetExhaustedError;
    expect(refused.message).toMatch(/^budget exhausted: /);
    expect(refused.reply).toBe(
      "Sorry, I can't answer this: your daily budget is used up (1,200 tokens of 1,000 tokens). It renews at 2026-12-05 00:00 UTC. Until then I make no model calls for you. Send /usage to see where you stand; the operator can raise the limit in the budgets config.",
    );
    const second = (await drain(model).catch((error: unknown) => error)) as BudgetExhaustedError;
    expect(second.reply).toBe("Budget used up (your daily budget: 1,200 tokens of 1,000 tokens; renews 2026-12-05 00:00 UTC).");
    expect(scripted.requests).toHaveLength(2);
    expect(refusals).toEqual(["person", "person"]);
    // Another person is not touched.
    expect(await drain(guard.bind(scripted, { person: "web:bob", chat: "web:b" }))).toBe("ok");
  });

  it("renews a used-up daily budget at midnight in its time zone", async () => {
    const scripted = scriptedModel(() => ({ text: "ok", usage: { inputTokens: 900, outputTokens: 200 } }));
    const clock = { now: Date.UTC(2026, 11, 4, 22, 30) };
    const { guard } = setup({ person: { limit: 1_000 }, timeZone: "Europe/Berlin" }, scripted, clock);
    const model = guard.bind(scripted, { person: "web:ada" });
    await drain(model);
    const refused = (await drain(model).catch((error: unknown) => error)) as BudgetExhaustedError;
    expect(refused.reply).toContain("It renews at 2026-12-05 00:00 Europe/Berlin.");
    clock.now = Date.UTC(2026, 11, 4, 23, 0); // midnight in Berlin
    expect(await drain(model)).toBe("ok");
  });

  it("waits while only calls in flight fill the budget, then runs on what they left", async () => {
    const held = gate();
    let calls = 0;
    const scripted = scriptedModel(() => {
      calls += 1;
      return calls === 1 ? { text: "first", usage: { inputTokens: 100, outputTokens: 50 } } : { text: "second", usage: { inputTokens: 100, outputTokens: 50 } };
    });
    const slow: ChatModel = {
      id: scripted.id,
      async *stream(request) {
        await held.promise;
        yield* scripted.stream(request);
      },
    };
    const { guard, ledger } = setup({ chat: { limit: 1_000 } }, slow);
    const model = guard.bind(slow, { chat: "web:a" });
    // The worst case, about 100 tokens of prompt plus 900 of output, fills the budget while the first call runs.
    const first = drain(model, 900);
    const second = drain(model, 900);
    await new Promise((resolve) => setTimeout(resolve, 30));
    expect(calls).toBe(0);
    held.open();
    expect(await Promise.all([first, second])).toEqual(["first", "second"]);
    expect((await ledger.read([{ scope: "chat:web:a", unit: "tokens", limit: 1_000, from: Date.UTC(2026, 11, 4), bucket: Date.UTC(2026, 11, 4), keepMs: 1 }], NOON))[0]).toMatchObject({ used: 300, held: 0 });
  });

  it("warns the chat once when a person's budget passes the warning share", async () => {
    const scripted = scriptedModel(() => ({ text: "ok", usage: { inputTokens: 300, outputTokens: 150 } }));
    const { guard } = setup({ person: { limit: 1_000 }, warnAt: 0.5 }, scripted);
    const warnings: string[] = [];
    const model = guard.bind(scripted, { person: "web:ada" }, { onWarning: (text) => void warnings.push(text) });
    await drain(model); // 450
    expect(warnings).toEqual([]);
    await drain(model); // 900: past 50 %
    await drain(model).catch(() => undefined); // refused or not, no second warning this period
    expect(warnings).toEqual(["Heads-up: 90% of your daily budget is used (900 tokens of 1,000 tokens). It renews at 2026-12-05 00:00 UTC."]);
  });

  it("counts money with the price table, and refuses to guess the cost of a model without a price", async () => {
    const priced = scriptedModel(() => ({ text: "ok", usage: { inputTokens: 1_000_000, outputTokens: 1_000_000 } }), "openai/gpt-4o-mini");
    const { guard, usages, ledger, config } = setup({ deployment: { limit: 1, unit: "money" } }, priced);
    await drain(guard.bind(priced, { chat: "web:a" }));
    // 0.15 + 0.60 per million: 0.75 USD.
    expect(usages).toEqual([["openai/gpt-4o-mini", "web", 2_000_000, 0.75]]);
    const report = await usageReport(ledger, config, { by: "model", period: "day" }, NOON);
    expect(report.rows).toEqual([{ key: "openai/gpt-4o-mini", calls: 1, inputTokens: 1_000_000, cachedInputTokens: 0, outputTokens: 1_000_000, tokens: 2_000_000, cost: 0.75, unpricedCalls: 0 }]);
    const unpriced = scriptedModel(() => ({ text: "ok" }), "local/llama");
    await expect(drain(guard.bind(unpriced, { chat: "web:a" }))).rejects.toThrow("local/llama has no price, and a money budget applies to this call: add it to budgets.prices in the config");
    expect(unpriced.requests).toHaveLength(0);
  });

  it("reports usage by person, chat and channel, with or without budgets", async () => {
    const scripted = scriptedModel(() => ({ text: "ok", usage: { inputTokens: 10, outputTokens: 5, cachedInputTokens: 4 } }), "local/llama");
    const { guard, ledger, config } = setup({}, scripted);
    await drain(guard.bind(scripted, { person: "web:ada", chat: "web:a" }));
    await drain(guard.bind(scripted, { person: "web:ada", chat: "web:b" }));
    await drain(guard.bind(scripted, { person: "telegram:7", chat: "telegram:7" }));
    const byPerson = await usageReport(ledger, config, { by: "person", period: "week" }, NOON);
    expect(byPerson.rows.map((row) => [row.key, row.calls, row.tokens, row.cachedInputTokens, row.unpricedCalls])).toEqual([
      ["web:ada", 2, 30, 8, 2],
      ["telegram:7", 1, 15, 4, 1],
    ]);
    const byChannel = await usageReport(ledger, config, { by: "channel", period: "month" }, NOON);
    expect(byChannel.rows.map((row) => [row.key, row.tokens])).toEqual([["web", 30], ["telegram", 15]]);
  });
});

describe("prompt estimate", () => {
  it("errs high: a token per three ASCII characters, one and a half per other character, a fixed count per image", () => {
    expect(estimateTextTokens("abcdef")).toBe(2);
    expect(estimateTextTokens("你好")).toBe(3);
    expect(estimateTextTokens("😀")).toBe(2);
    // Mixed: the ASCII part at a third, each other character at one and a half.
    expect(estimateTextTokens("abc你")).toBe(3);
    expect(estimateTextTokens("é")).toBe(2);
    expect(estimateTextTokens("")).toBe(0);
    // A tool's definition counts the same on every call (estimated once).
    const tool = { name: "read_file", description: "Reads a file.", parameters: { type: "object", properties: { path: { type: "string" } } } };
    const once = estimatePromptTokens({ messages: [], tools: [tool] });
    expect(once).toBeGreaterThan(0);
    expect(estimatePromptTokens({ messages: [], tools: [tool, tool] })).toBe(2 * once);
    const withImage = estimatePromptTokens({ messages: [{ role: "user", content: [{ type: "text", text: "abc" }, { type: "image", mediaType: "image/png", data: "" }] }] });
    expect(withImage).toBe(8 + 1 + 2_000);
  });
});
