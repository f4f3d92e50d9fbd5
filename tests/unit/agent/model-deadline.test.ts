/**
 * A model server that never finishes must not wedge the chat: a stream of empty keep-alive chunks
 * times out at the idle limit, a stream of real content that never ends at the overall deadline;
 * either way the turn reports the failure and the chat's next message is answered.
 */
import { afterEach, describe, expect, it } from "vitest";
import { createOpenAICompatibleProvider } from "../../../src/providers/openai-compatible.js";
import { createChatModel } from "../../../src/providers/resilient-model.js";
import { type Harness, startHarness } from "../../support/agent-harness.js";
import { type FakeOpenAIServer, type FakeOpenAIStep, startFakeOpenAI } from "../../support/fake-openai-server.js";

let server: FakeOpenAIServer | undefined;
let harness: Harness | undefined;
afterEach(async () => {
  await harness?.close();
  await server?.close();
  harness = undefined;
  server = undefined;
});

async function start(script: FakeOpenAIStep[], limits: { timeoutMs: number; deadlineMs?: number }): Promise<Harness> {
  server = await startFakeOpenAI({ script });
  const provider = createOpenAICompatibleProvider({ name: "openai", apiKey: "sk-test", baseURL: server.url, ...limits });
  harness = await startHarness(createChatModel({ targets: [{ provider, model: "gpt-test" }], retries: 0 }));
  return harness;
}

describe("a model stream that never finishes", () => {
  it("dripping empty chunks: the turn times out, says so, and the next message is answered", async () => {
    const bot = await start([{ text: "Let me think", drip: { everyMs: 50 } }, { text: "second answer" }], { timeoutMs: 400 });
    await bot.send("chat-1", "first question");
    const [failed] = await bot.waitForFinals(1);
    expect(failed?.content).toMatch(/^Let me think\n\nSorry, the model request failed: .*no response for 400 ms/);
    await bot.send("chat-1", "second question");
    const finals = await bot.waitForFinals(2);
    expect(finals[1]?.content).toBe("second answer");
  }, 20_000);

  it("streaming content forever: the overall deadline ends it, and the next message is answered", async () => {
    const bot = await start([{ text: "on and on", drip: { everyMs: 20, text: " and on" } }, { text: "done now" }], { timeoutMs: 5_000, deadlineMs: 600 });
    await bot.send("chat-2", "tell me everything");
    const [failed] = await bot.waitForFinals(1);
    expect(failed?.content).toMatch(/Sorry, the model request failed: .*600 ms deadline/);
    await bot.send("chat-2", "and now?");
    expect((await bot.waitForFinals(2))[1]?.content).toBe("done now");
  }, 20_000);
});
