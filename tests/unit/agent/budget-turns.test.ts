/** Budgets as a chat sees them: turns answered until the budget is used up, then the budget's reply, /usage, the warning notice. */
import { afterEach, describe, expect, it } from "vitest";
import { type Harness, startHarness } from "../../support/agent-harness.js";
import { scriptedModel } from "../../support/scripted-model.js";

let harness: Harness | undefined;
afterEach(async () => {
  await harness?.close();
  harness = undefined;
});

describe("turns under a budget", () => {
  it("answers until the person's budget is used up, then answers every message with the budget's reply and keeps it out of the history", async () => {
    const model = scriptedModel(() => ({ text: "answer", usage: { inputTokens: 500, outputTokens: 300 } }));
    harness = await startHarness(model, { config: { budgets: { person: { limit: 1_000 } } } });
    await harness.send("a", "one", { senderId: "ada" });
    await harness.waitForFinals(1);
    // 800 of 1,000: the warning notice.
    expect(harness.notices.map((notice) => notice.content)).toEqual([expect.stringMatching(/^Heads-up: 80% of your daily budget is used \(800 tokens of 1,000 tokens\)/)]);
    await harness.send("b", "two", { senderId: "ada" });
    await harness.waitForFinals(2);
    await harness.send("a", "three", { senderId: "ada" });
    await harness.send("b", "four", { senderId: "ada" });
    const finals = await harness.waitForFinals(4);
    expect(finals.map((final) => final.content.slice(0, 40))).toEqual(["answer", "answer", expect.any(String), expect.any(String)]);
    const refusals = finals.slice(2).map((final) => final.content);
    // One of them got the whole explanation, the other one line.
    expect(refusals.filter((text) => text.startsWith("Sorry, I can't answer this: your daily budget is used up (1,600 tokens of 1,000 tokens)."))).toHaveLength(1);
    expect(refusals.filter((text) => text.startsWith("Budget used up (your daily budget: 1,600 tokens of 1,000 tokens;"))).toHaveLength(1);
    expect(model.requests).toHaveLength(2);
    const { history } = await harness.runtime.store.sessions.load("test:a");
    expect(history.map((entry) => entry.content)).toEqual(["one", "answer"]);

    // Another person in the same chat is not touched.
    await harness.send("a", "five", { senderId: "bob" });
    expect((await harness.waitForFinals(5))[4]!.content).toBe("answer");

    await harness.send("a", "/usage", { senderId: "ada" });
    const usage = (await harness.waitForFinals(6))[5]!.content;
    expect(usage).toContain("You (test:ada): 1,600 tokens of 1,000 tokens used, 160% of your daily budget (used up). It renews at");
    expect(usage).toContain("This chat (test:a): 1,600 tokens today in 2 model calls; no budget is set.");
  });
});

describe("an agent profile's budget", () => {
  it("counts every turn of the profile's chats, and no other profile's", async () => {
    const model = scriptedModel(() => ({ text: "answer", usage: { inputTokens: 500, outputTokens: 300 } }));
    const config = {
      agents: { support: {} },
      routing: [{ match: { chat: ["s1", "s2"] }, agent: "support" }],
      budgets: { agents: { support: { limit: 1_000 } } },
    };
    harness = await startHarness(model, { config });
    await harness.send("s1", "one", { senderId: "ada" });
    await harness.waitForFinals(1);
    // Another chat and another person, the same profile: the same budget.
    await harness.send("s2", "two", { senderId: "bob" });
    await harness.waitForFinals(2);
    await harness.send("s1", "three", { senderId: "cy" });
    const refused = (await harness.waitForFinals(3))[2]!.content;
    expect(refused).toMatch(/^Sorry, I can't answer this: the support agent's daily budget is used up \(1,600 tokens of 1,000 tokens\)\./);
    // The default profile's chats are not touched.
    await harness.send("d1", "four", { senderId: "cy" });
    expect((await harness.waitForFinals(4))[3]!.content).toBe("answer");
    expect(model.requests).toHaveLength(3);
  });
});

