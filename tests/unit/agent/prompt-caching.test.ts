/**
 * Prompt caching, seen at the fake model servers: the stable part of the system prompt opens every
 * request, byte for byte, whatever the clock, the chat's memory or the turn; Anthropic requests
 * carry cache breakpoints after it and on the history; the cached input tokens the servers report
 * are counted in the turn's usage and in the metrics.
 */
import { mkdir, writeFile } from "node:fs/promises";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { ContextBuilder } from "../../../src/agent/context-builder.js";
import { createFileMemoryStore } from "../../../src/memory/memory.js";
import { createPrometheusMetrics } from "../../../src/app/metrics.js";
import { type Harness, startHarness } from "../../support/agent-harness.js";
import { type FakeAnthropicServer, startFakeAnthropic } from "../../support/fake-anthropic-server.js";
import { type FakeOpenAIServer, type FakeOpenAIStep, type RecordedRequest, startFakeOpenAI } from "../../support/fake-openai-server.js";

let harness: Harness | undefined;
const servers: Array<FakeOpenAIServer | FakeAnthropicServer> = [];
afterEach(async () => {
  await harness?.close();
  harness = undefined;
  await Promise.all(servers.splice(0).map((server) => server.close()));
});

type Message = { role: string; content: unknown };

function lastUser(body: Record<string, unknown>): string {
  const user = [...(body.messages as Message[])].reverse().find((message) => message.role === "user");
  if (typeof user?.content === "string") return user.content;
  return ((user?.content ?? []) as Array<{ type: string; text?: string; content?: string }>).map((block) => block.text ?? block.content ?? "").join(" ");
}

function commonPrefixLength(texts: string[]): number {
  const [first = "", ...rest] = texts;
  let length = first.length;
  for (const text of rest) {
    let index = 0;
    while (index < length && index < text.length && text[index] === first[index]) index += 1;
    length = index;
  }
  return length;
}

/** The stable part of the system prompt as the agent builds it for this workspace (no clock, no chat in it). */
async function stablePrompt(workspace: string): Promise<string> {
  const memory = createFileMemoryStore({ workspace, scope: "chat" });
  const context = new ContextBuilder({ workspace, persona: { name: "CountBot", personality: "professional" }, memory });
  return (await context.buildSystemParts({ sessionKey: "anything:else", channel: "other" })).stable;
}

/** A clock that jumps an hour between turns, so a time early in the prompt would change its bytes. */
function jumpingClock() {
  let offset = 0;
  return { now: () => Date.now() + offset, jump: () => (offset += 3_600_000) };
}

async function writeSkill(root: string): Promise<void> {
  const skill = path.join(root, "data", "workspace", "skills", "tone");
  await mkdir(skill, { recursive: true });
  await writeFile(path.join(skill, "SKILL.md"), "---\nname: tone\ndescription: House style\nalways: true\n---\nAnswer in British English.\n");
}

describe("prompt caching against the fake OpenAI server", () => {
  it("opens the requests of turns 2-10 of a chat with the same bytes, at least the whole stable system prompt, while memory and the clock change", async () => {
    // Turns 3 and 6 write the chat's memory (a tool call), so what the prompt shows of it changes.
    const script = (body: Record<string, unknown>): FakeOpenAIStep => {
      const messages = body.messages as Message[];
      if (messages.at(-1)?.role === "tool") return { text: "noted", usage: { promptTokens: 900, completionTokens: 2, cachedTokens: 800 } };
      const said = lastUser(body);
      if (said === "turn 3" || said === "turn 6") {
        return { toolCalls: [{ name: "memory", arguments: JSON.stringify({ action: "append", content: `fact from ${said}` }) }], usage: { promptTokens: 800, completionTokens: 5, cachedTokens: 640 } };
      }
      return { text: `answer to ${said}`, usage: { promptTokens: 700, completionTokens: 4, cachedTokens: 512 } };
    };
    const server = await startFakeOpenAI({ script });
    servers.push(server);
    const clock = jumpingClock();
    const metrics = createPrometheusMetrics({ role: "worker" });
    harness = await startHarness(undefined, {
      config: { agent: { model: "fake/chat-model" }, providers: { fake: { type: "openai", apiKey: "sk-test", baseURL: server.url } } },
      now: clock.now,
      metrics,
    });
    await writeSkill(harness.root);

    for (let turn = 1; turn <= 10; turn += 1) {
      await harness.send("chat-1", `turn ${turn}`);
      await harness.waitForFinals(turn);
      clock.jump();
    }

    const turnOf = (request: RecordedRequest) => Number(/^turn (\d+)$/.exec(lastUser(request.body))?.[1]);
    const later = server.requests.filter((request) => turnOf(request) >= 2);
    expect(later.length).toBe(11); // turns 3 and 6 take two model calls
    const stable = await stablePrompt(path.join(harness.root, "data", "workspace"));
    expect(stable).toContain("# Safety");
    expect(stable).toContain("Answer in British English.");
    // Where the stable prompt ends in the raw bytes of a request: the prefix must reach at least there.
    const first = later[0]!.raw;
    const start = first.indexOf(JSON.stringify(stable).slice(1, -1));
    expect(start).toBeGreaterThan(0);
    const shared = commonPrefixLength(later.map((request) => request.raw));
    expect(shared).toBeGreaterThanOrEqual(start + JSON.stringify(stable).length - 2);
    // What changed did change: the memory written in turn 3 and the clock, after the stable part.
    const system = (request: RecordedRequest) => ((request.body.messages as Message[])[0]!.content as string);
    expect(system(later.at(-1)!)).toContain("fact from turn 3");
    expect(system(later[0]!)).not.toContain("fact from turn 3");
    expect(system(later.at(-1)!).slice(stable.length)).toMatch(/Current time: \d{4}-\d{2}-\d{2}T\d{2}:\d{2}Z/);
    expect(new Set(later.map((request) => /Current time: (\S+)/.exec(system(request))?.[1])).size).toBeGreaterThan(5);

    // The cached tokens the server reported: summed over the turn's calls, in its usage and in /metrics.
    const sixth = harness.finals[5]!;
    expect(sixth.metadata.usage).toMatchObject({ inputTokens: 1_700, cachedInputTokens: 1_440 });
    const history = await harness.runtime.agent.loadSession("test:chat-1");
    expect(history.history.at(-1)!.usage).toMatchObject({ inputTokens: 700, cachedInputTokens: 512 });
    const rendered = await metrics.render();
    const cachedLine = rendered.split("\n").find((line) => line.startsWith("countbot_model_tokens_total") && line.includes('kind="cached"'));
    expect(cachedLine).toBeDefined();
    expect(Number(cachedLine!.split(" ").at(-1))).toBe(8 * 512 + 2 * (640 + 800));
  });
});

describe("prompt caching against the fake Anthropic server", () => {
  it("marks the stable system prompt and the last message of the history as cache breakpoints, and counts cache reads and writes", async () => {
    const server = await startFakeAnthropic({
      script: (body) => ({
        text: `answer to ${lastUser(body)}`,
        usage: { inputTokens: 50, outputTokens: 4, cacheReadInputTokens: 1_000, cacheCreationInputTokens: 200 },
      }),
    });
    servers.push(server);
    const clock = jumpingClock();
    harness = await startHarness(undefined, {
      config: { agent: { model: "claude/claude-test" }, providers: { claude: { type: "anthropic", apiKey: "sk-ant-test", baseURL: server.url } } },
      now: clock.now,
    });
    for (let turn = 1; turn <= 3; turn += 1) {
      await harness.send("chat-2", `turn ${turn}`);
      await harness.waitForFinals(turn);
      clock.jump();
    }
    const stable = await stablePrompt(path.join(harness.root, "data", "workspace"));
    for (const request of server.requests) {
      const system = request.body.system as Array<{ type: string; text: string; cache_control?: unknown }>;
      expect(system[0]).toEqual({ type: "text", text: stable, cache_control: { type: "ephemeral" } });
      expect(system[1]!.text).toContain("# This conversation");
      expect(system[1]).not.toHaveProperty("cache_control");
      const messages = request.body.messages as Array<{ role: string; content: Array<Record<string, unknown>> }>;
      expect(messages.at(-1)!.content.at(-1)).toMatchObject({ type: "text", cache_control: { type: "ephemeral" } });
      // One breakpoint on the history, not one per message.
      expect(messages.slice(0, -1).flatMap((message) => message.content).filter((block) => "cache_control" in block)).toEqual([]);
    }
    expect(server.requests.map((request) => (request.body.messages as unknown[]).length)).toEqual([1, 3, 5]);
    expect(harness.finals[2]!.metadata.usage).toMatchObject({ inputTokens: 1_250, cachedInputTokens: 1_000, cacheWriteInputTokens: 200 });
  });
});
