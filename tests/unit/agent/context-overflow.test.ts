/**
 * A chat whose history outgrew the model's context window is never stuck: the turn the model
 * refuses for its size folds more of the history into memory and runs again, and a message too
 * long on its own gets a plain answer and is kept only in part, so the next turn fits.
 */
import { afterEach, describe, expect, it } from "vitest";
import { ProviderError } from "../../../src/errors.js";
import type { ChatRequest } from "../../../src/providers/chat-model.js";
import type { HistoryEntry } from "../../../src/store/store.js";
import { type Harness, startHarness } from "../../support/agent-harness.js";
import { type ScriptStep, scriptedModel } from "../../support/scripted-model.js";

/** The model's window, in characters of the prompt's messages (a stand-in for tokens); a summary request over it is refused too. */
const WINDOW = 40_000;

const overflow = () =>
  new ProviderError("fake/model: This model's maximum context length is 10000 tokens. However, your messages resulted in 12000 tokens.", {
    kind: "context-overflow",
    status: 400,
  });

function promptSize(request: Omit<ChatRequest, "model">): number {
  return request.messages.reduce((sum, message) => sum + (typeof message.content === "string" ? message.content.length : JSON.stringify(message.content).length), 0);
}

const isSummary = (request: Omit<ChatRequest, "model">) => String(request.messages[0]?.content).includes("condense conversations");

/** A model with a window: a summary request gets a short summary, a turn that fits gets `answer`. */
function windowedModel(answer: string) {
  const refused: number[] = [];
  const model = scriptedModel((request): ScriptStep => {
    const size = promptSize(request);
    if (size > WINDOW) {
      if (!isSummary(request)) refused.push(size);
      return { error: overflow() };
    }
    return isSummary(request) ? { text: "- the user pasted long logs earlier" } : { text: answer };
  });
  return { model, refused };
}

function longHistory(pairs: number, size: number): HistoryEntry[] {
  return Array.from({ length: pairs }, (_, index) => [
    { role: "user" as const, content: `log ${index}: ${"x".repeat(size)}`, at: index },
    { role: "assistant" as const, content: `noted ${index}`, at: index },
  ]).flat();
}

let harness: Harness | undefined;
afterEach(async () => {
  await harness?.close();
  harness = undefined;
});

describe("a prompt that does not fit the model's context window", () => {
  it("summarizes more of the history and answers the turn, once, with nothing of the refused attempt shown", async () => {
    const { model, refused } = windowedModel("Here is the answer.");
    harness = await startHarness(model);
    const sessions = harness.runtime.infrastructure.store.sessions;
    // 12 pairs of 5,000 characters: 60,000, within maxHistory (50 entries) but over the window.
    await sessions.append("test:a", longHistory(12, 5_000));

    await harness.send("a", "what did the logs say?");
    const [final] = await harness.waitForFinals(1);
    expect(final!.content).toBe("Here is the answer.");
    expect(refused.length).toBe(1);
    // Nothing of the refused attempt reached the chat.
    expect(harness.drafts.every((draft) => !draft.text.includes("Sorry"))).toBe(true);
    const { history } = await sessions.load("test:a");
    expect(history.length).toBeLessThan(24);
    expect(history.at(-2)).toMatchObject({ role: "user", content: "what did the logs say?" });
    expect(history.at(-1)).toMatchObject({ role: "assistant", content: "Here is the answer." });
    // The summary went to memory, which the answered turn's prompt carries.
    const answered = model.requests.filter((request) => !isSummary(request)).at(-1)!;
    expect(JSON.stringify(answered.messages[0])).toContain("the user pasted long logs earlier");
  });

  it("drops the whole history when a quarter of it is still too much", async () => {
    const { model, refused } = windowedModel("Fits now.");
    harness = await startHarness(model);
    const sessions = harness.runtime.infrastructure.store.sessions;
    // 4 pairs of 39,000 characters: even the last pair is over the window with the prompt around it.
    await sessions.append("test:b", longHistory(4, 39_000));
    await harness.send("b", "and now?");
    const [final] = await harness.waitForFinals(1);
    expect(final!.content).toBe("Fits now.");
    expect(refused.length).toBe(2);
    const { history } = await sessions.load("test:b");
    expect(history.map((entry) => entry.content)).toEqual(["and now?", "Fits now."]);
  });

  it("answers a message too long on its own plainly, keeps only its start, and the next message is answered", async () => {
    const { model } = windowedModel("Short enough.");
    harness = await startHarness(model);
    await harness.send("c", `please read: ${"y".repeat(60_000)}`);
    const [first] = await harness.waitForFinals(1);
    expect(first!.content).toContain("your message is too long for the model's context window");
    await harness.send("c", "sorry, in short: hello");
    const [, second] = await harness.waitForFinals(2);
    expect(second!.content).toBe("Short enough.");
    const { history } = await harness.runtime.infrastructure.store.sessions.load("test:c");
    expect(history[0]!.content.length).toBeLessThan(2_200);
    expect(history[0]!.content).toContain("too long for the model's context window, not kept");
  });
});
