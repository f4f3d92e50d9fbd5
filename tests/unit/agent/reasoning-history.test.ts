/**
 * Reasoning never reaches the answer or the history, seen at the fake model servers: in every shape
 * an OpenAI-compatible server sends it and as Anthropic thinking blocks. Inside a turn it goes back
 * with the tool call it led to (DeepSeek and Anthropic require that); the next turn's request holds
 * none of it, and neither do the delivered replies nor the stored history.
 */
import { afterEach, describe, expect, it } from "vitest";
import { type Harness, startHarness } from "../../support/agent-harness.js";
import { type FakeAnthropicServer, type FakeAnthropicStep, startFakeAnthropic } from "../../support/fake-anthropic-server.js";
import { type FakeOpenAIServer, type FakeOpenAIStep, startFakeOpenAI } from "../../support/fake-openai-server.js";

let harness: Harness | undefined;
const servers: Array<FakeOpenAIServer | FakeAnthropicServer> = [];
afterEach(async () => {
  await harness?.close();
  harness = undefined;
  await Promise.all(servers.splice(0).map((server) => server.close()));
});

const FIRST_THOUGHT = "SECRET-THOUGHT-1: the user wants a listing";
const SECOND_THOUGHT = "SECRET-THOUGHT-2: the listing is empty";
const THIRD_THOUGHT = "SECRET-THOUGHT-3: a greeting again";

type Message = { role: string; content: unknown };
const lastOf = (body: Record<string, unknown>) => (body.messages as Message[]).at(-1)!;
const said = (body: Record<string, unknown>) => JSON.stringify(lastOf(body).content);

async function twoTurns(config: Record<string, unknown>): Promise<void> {
  harness = await startHarness(undefined, { config });
  await harness.send("chat", "list the files");
  await harness.waitForFinals(1);
  await harness.send("chat", "hello again");
  await harness.waitForFinals(2);
}

async function expectNoReasoningKept(): Promise<void> {
  expect(harness!.finals.map((final) => final.content)).toEqual(["Nothing there.", "Hello!"]);
  const { history } = await harness!.runtime.agent.loadSession("test:chat");
  expect(history.map((entry) => entry.content)).toEqual(["list the files", "Nothing there.", "hello again", "Hello!"]);
  expect(JSON.stringify(history)).not.toMatch(/SECRET-THOUGHT/);
}

describe("reasoning from an OpenAI-compatible server", () => {
  it.each(["reasoning_content", "reasoning", "think-tags"] as const)("sent as %s: never in the answer, the history or the next turn's request", async (reasoningField) => {
    const script = (body: Record<string, unknown>): FakeOpenAIStep => {
      if (lastOf(body).role === "tool") return { reasoning: SECOND_THOUGHT, reasoningField, text: "Nothing there." };
      if (said(body).includes("list the files")) return { reasoning: FIRST_THOUGHT, reasoningField, toolCalls: [{ name: "list_dir", arguments: "{}" }] };
      return { reasoning: ["SECRET-THOUGHT-3: ", "a greeting again"], reasoningField, text: ["Hel", "lo!"] };
    };
    const server = await startFakeOpenAI({ script });
    servers.push(server);
    await twoTurns({ agent: { model: "fake/reasoner" }, providers: { fake: { type: "openai", apiKey: "sk-test", baseURL: server.url } } });

    expect(server.requests).toHaveLength(3);
    // Within the first turn, the reasoning goes back beside the tool call it led to, as reasoning_content.
    const toolTurn = (server.requests[1]!.body.messages as Array<Record<string, unknown>>).find((message) => message.role === "assistant");
    expect(toolTurn).toMatchObject({ reasoning_content: FIRST_THOUGHT, tool_calls: [{ function: { name: "list_dir" } }] });
    expect(JSON.stringify(toolTurn!.content ?? "")).not.toContain("SECRET");
    // The next turn: the earlier answer alone, no reasoning field, no think tags.
    const next = server.requests[2]!;
    expect(next.raw).not.toMatch(/SECRET-THOUGHT|<think>|reasoning_content|"reasoning"/);
    expect((next.body.messages as Message[]).filter((message) => message.role === "assistant")).toEqual([{ role: "assistant", content: "Nothing there." }]);
    await expectNoReasoningKept();
    expect(JSON.stringify(harness!.finals)).not.toContain(THIRD_THOUGHT);
  });
});

describe("thinking blocks from Anthropic", () => {
  it("are sent back, signed, inside the turn only, and never reach the answer, the history or the next turn", async () => {
    const script = (body: Record<string, unknown>): FakeAnthropicStep => {
      const last = lastOf(body).content as Array<{ type: string }>;
      if (last.some((block) => block.type === "tool_result")) return { thinking: { text: SECOND_THOUGHT, signature: "sig-2" }, text: "Nothing there." };
      if (said(body).includes("list the files")) return { thinking: { text: [FIRST_THOUGHT.slice(0, 10), FIRST_THOUGHT.slice(10)], signature: "sig-1" }, toolCalls: [{ name: "list_dir", arguments: "{}" }] };
      return { thinking: { text: THIRD_THOUGHT, signature: "sig-3" }, redactedThinking: "opaque", text: "Hello!" };
    };
    const server = await startFakeAnthropic({ script });
    servers.push(server);
    await twoTurns({ agent: { model: "claude/claude-think" }, providers: { claude: { type: "anthropic", apiKey: "sk-ant-test", baseURL: server.url } } });

    expect(server.requests).toHaveLength(3);
    const assistant = (server.requests[1]!.body.messages as Array<{ role: string; content: Array<Record<string, unknown>> }>).find((message) => message.role === "assistant");
    expect(assistant!.content[0]).toEqual({ type: "thinking", thinking: FIRST_THOUGHT, signature: "sig-1" });
    const next = server.requests[2]!;
    expect(next.raw).not.toMatch(/SECRET-THOUGHT|"thinking"|sig-\d|opaque/);
    await expectNoReasoningKept();
  });
});
