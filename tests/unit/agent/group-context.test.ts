/** The system prompt of a group turn: the group section and the speakers' person memory, last and apart. */
import { mkdtemp, realpath, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { ContextBuilder } from "../../../src/agent/context-builder.js";
import { createFileMemoryStore } from "../../../src/memory/memory.js";
import { createMemoryTool } from "../../../src/agent/memory-tool.js";
import { createPersonMemory } from "../../../src/memory/person-memory.js";
import type { GroupSetting } from "../../../src/prompt/speakers.js";
import { ToolError } from "../../../src/errors.js";

let workspace: string;
const persona = { name: "Nova", personality: "concise" as const };
const group: GroupSetting = { platform: "discord", chatType: "group", botHandle: "NovaBot", addressing: "mention" };
const alice = { id: "discord:1", name: "Alice" };
const bob = { id: "discord:2", name: "Bob" };

beforeEach(async () => {
  workspace = await realpath(await mkdtemp(path.join(tmpdir(), "countbot-group-")));
});
afterEach(async () => {
  await rm(workspace, { recursive: true, force: true });
});

function setUp(identities: Record<string, string[]> = {}) {
  let clock = Date.UTC(2026, 0, 1);
  const memory = createFileMemoryStore({ workspace, scope: "chat" });
  const people = createPersonMemory(createFileMemoryStore({ workspace, scope: "person", now: () => clock }), identities);
  const context = new ContextBuilder({ workspace, persona, memory, people, now: () => (clock += 1_000) });
  return { memory, people, context };
}

describe("group context in the system prompt", () => {
  it("says it is a group, who the bot is, how it is addressed, whom to answer and whose memory is private, after the fixed sections", async () => {
    const { context } = setUp();
    const prompt = await context.buildSystemPrompt({ sessionKey: "discord:chan", channel: "discord", group, speakers: [alice] });
    const section = prompt.slice(prompt.indexOf("# Group chat"));
    expect(section).toContain("This chat is a discord group: several people talk here, and you are one participant in it, Nova (@NovaBot on discord).");
    expect(section).toContain("People address you by mentioning @NovaBot or by replying to one of your messages");
    expect(section).toContain("Answer the person who asked, by name. When several people asked something at once, answer each of them");
    expect(section).toContain("never reveal one member's personal memory to another member");
    const order = ["# Identity", "# Using tools", "# Memory", "# Safety", "# Group chat", "# Person memory"].map((heading) => prompt.indexOf(heading));
    expect(order.every((index) => index >= 0)).toBe(true);
    expect(order).toEqual([...order].sort((left, right) => left - right));
  });

  it("keeps the group section the same bytes for every turn of a chat, whoever speaks", async () => {
    const { context } = setUp();
    const groupSectionOf = (prompt: string) => prompt.slice(prompt.indexOf("# Group chat"), prompt.indexOf("# Person memory"));
    const first = await context.buildSystemPrompt({ sessionKey: "discord:chan", channel: "discord", group, speakers: [alice] });
    const second = await context.buildSystemPrompt({ sessionKey: "discord:chan", channel: "discord", group, speakers: [bob, alice] });
    expect(groupSectionOf(first)).not.toBe("");
    expect(groupSectionOf(second)).toBe(groupSectionOf(first));
    const thread = await context.buildSystemPrompt({ sessionKey: "discord:t", channel: "discord", group: { ...group, chatType: "thread", addressing: "all" }, speakers: [alice] });
    expect(thread).toContain("This chat is a thread in a discord group");
    expect(thread).toContain("You see every message in this chat, addressed to you or not");
  });

  it("has no group section in a private chat", async () => {
    const { context } = setUp();
    const prompt = await context.buildSystemPrompt({ sessionKey: "discord:dm", channel: "discord", speakers: [alice] });
    expect(prompt).not.toContain("# Group chat");
  });

  it("shows a person's memory only in turns where they speak, in a group and in their DM", async () => {
    const { people, context } = setUp();
    await people.store.append(people.keyOf("discord:1"), "Alice is vegetarian.");
    const bobOnly = await context.buildSystemPrompt({ sessionKey: "discord:chan", channel: "discord", group, speakers: [bob] });
    expect(bobOnly).not.toContain("Alice is vegetarian.");
    expect(bobOnly).toContain("## [Bob (discord:2)] (memory/people/discord%3A2/MEMORY.md)\nNothing saved yet.");
    const both = await context.buildSystemPrompt({ sessionKey: "discord:chan", channel: "discord", group, speakers: [bob, alice] });
    expect(both).toMatch(/## \[Alice \(discord:1\)\] \(memory\/people\/discord%3A1\/MEMORY\.md\)\n## .*\n\nAlice is vegetarian\./);
    const direct = await context.buildSystemPrompt({ sessionKey: "discord:dm-alice", channel: "discord", speakers: [alice] });
    expect(direct).toContain("Alice is vegetarian.");
    const background = await context.buildSystemPrompt({ sessionKey: "discord:chan", channel: "discord", group, speakers: [] });
    expect(background).not.toContain("# Person memory");
  });

  it("shares one memory between accounts the config links", async () => {
    const { people, context } = setUp({ alice: ["telegram:7", "discord:1"] });
    await people.store.write(people.keyOf("telegram:7"), "Alice's time zone is Europe/Paris.");
    const prompt = await context.buildSystemPrompt({ sessionKey: "discord:chan", channel: "discord", group, speakers: [alice] });
    expect(prompt).toContain("## [Alice (discord:1)] (memory/people/alice/MEMORY.md)\nAlice's time zone is Europe/Paris.");
  });
});

describe("the memory tool's person scope", () => {
  const context = (speakers: string[]) => ({ sessionKey: "discord:chan", channel: "discord", chatId: "chan", workspace, restrictToWorkspace: true, signal: new AbortController().signal, speakers });

  it("writes the speaker's person memory and says which scope it wrote", async () => {
    const { memory, people } = setUp();
    const tool = createMemoryTool(memory, people);
    expect(await tool.execute({ action: "append", content: "Alice is vegetarian.", scope: "person" }, context(["discord:1"]))).toBe(
      "Appended a dated note to person memory of discord:1, memory/people/discord%3A1/MEMORY.md.",
    );
    expect(await people.store.read("discord:1")).toContain("Alice is vegetarian.");
    expect(await memory.read("discord:chan")).toBe("");
    expect(await tool.execute({ action: "append", content: "Lunch on Friday." }, context(["discord:1"]))).toBe("Appended a dated note to this chat's memory, memory/chats/discord%3Achan/MEMORY.md.");
  });

  it("asks whose memory when several people speak, and refuses anyone not speaking", async () => {
    const { memory, people } = setUp();
    const tool = createMemoryTool(memory, people);
    await people.store.write("discord:3", "Carol's secret");
    const several = await tool.execute({ action: "read", scope: "person" }, context(["discord:1", "discord:2"])).catch((error: unknown) => error);
    expect(several).toBeInstanceOf(ToolError);
    expect((several as ToolError).message).toBe("several people speak in this turn: say whose memory in `person` (one of discord:1, discord:2)");
    const other = await tool.execute({ action: "read", scope: "person", person: "discord:3" }, context(["discord:1", "discord:2"])).catch((error: unknown) => error);
    expect((other as ToolError).message).toMatch(/^discord:3 does not speak in this turn/);
    expect(await tool.execute({ action: "read", scope: "person", person: "discord:2" }, context(["discord:1", "discord:2"]))).toMatch(/^Memory is empty \(person memory of discord:2/);
    const nobody = await tool.execute({ action: "read", scope: "person" }, context([])).catch((error: unknown) => error);
    expect((nobody as ToolError).message).toBe("nobody is speaking in this turn, so there is no person memory to use");
  });
});
