/** A subagent counts against its person's and chat's budgets and stops at its next model call once one is used up. */
import { mkdtemp, realpath, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import pino from "pino";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { createBudgetGuard } from "../../../src/budget/guard.js";
import { BudgetsSchema } from "../../../src/config/budgets.js";
import { BudgetExhaustedError } from "../../../src/errors.js";
import { createSubagentRunner } from "../../../src/jobs/subagents/runner.js";
import type { SubagentTask } from "../../../src/jobs/subagents/task.js";
import { createPriceBook } from "../../../src/providers/pricing.js";
import { createMemoryBudgetLedger } from "../../../src/store/memory-budget-ledger.js";
import { ToolRegistry } from "../../../src/tools/registry.js";
import { defineTool } from "../../../src/tools/tool.js";
import { scriptedModel } from "../../support/scripted-model.js";
import { z } from "zod";

let workspace: string;
beforeEach(async () => {
  workspace = await realpath(await mkdtemp(path.join(tmpdir(), "countbot-subagent-budget-")));
});
afterEach(() => rm(workspace, { recursive: true, force: true }));

describe("subagent under a budget", () => {
  it("stops at its next model call once its person's budget is used up, failing with budget exhausted", async () => {
    const config = BudgetsSchema.parse({ person: { limit: 1_000 } });
    const ledger = createMemoryBudgetLedger();
    const budgets = createBudgetGuard({ ledger, config: () => config, prices: () => createPriceBook(config), logger: pino({ level: "silent" }) });
    const tools = new ToolRegistry();
    tools.register(defineTool({ name: "noop", description: "does nothing", parameters: z.object({}), execute: async () => "done" }));
    const model = scriptedModel(() => ({ text: "working", toolCalls: [{ name: "noop", arguments: {} }], usage: { inputTokens: 900, outputTokens: 200 } }));
    const run = createSubagentRunner({ model, tools, workspace, budgets, retryDelayMs: 0 });
    const task: SubagentTask = { id: "t1", label: "l", task: "work", sessionKey: "telegram:7", person: "telegram:42", status: "running", progress: 0, toolCalls: [], createdAt: 0, attempts: 1 };
    const failure = await run(task, new AbortController().signal, () => undefined).catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(BudgetExhaustedError);
    expect((failure as Error).message).toMatch(/^budget exhausted: Budget used up \(your daily budget: 1,100 tokens of 1,000 tokens; renews \d{4}-\d\d-\d\d 00:00 UTC\)\.$/);
    expect((failure as BudgetExhaustedError).budget).toMatchObject({ kind: "person", subject: "telegram:42", used: 1_100 });
    expect(model.requests).toHaveLength(1);
  });
});
