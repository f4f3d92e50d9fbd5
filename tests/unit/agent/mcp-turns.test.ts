/**
 * MCP tools in agent turns, on the embedded runtime with a scripted model and the stdio test
 * server (tests/support/mcp-stdio-server.ts): the model calls an MCP tool and answers with its
 * result (recorded in the audit log and the tool history like any tool's); a hanging tool times
 * out and the turn goes on; a server that died is restarted for the next turn; subagents and team
 * agents get a server's tools only when its config offers them.
 */
import { afterEach, describe, expect, it } from "vitest";
import type { ChatMessage } from "../../../src/providers/chat-model.js";
import { type Harness, startHarness } from "../../support/agent-harness.js";
import { eventually, stdioServerEntry, unwrapped } from "../../support/mcp-fixtures.js";
import { type ScriptStep, scriptedModel } from "../../support/scripted-model.js";

let harness: Harness | undefined;
afterEach(async () => {
  await harness?.close();
  harness = undefined;
});

function lastToolResult(messages: ChatMessage[]): string | undefined {
  const last = messages[messages.length - 1];
  return last?.role === "tool" ? last.content : undefined;
}

function userText(messages: ChatMessage[]): string {
  const user = [...messages].reverse().find((message) => message.role === "user");
  return typeof user?.content === "string" ? user.content : JSON.stringify(user?.content);
}

describe("MCP tools in a turn", () => {
  it("are offered from the first turn, called by the model, and their result answers the user", async () => {
    const model = scriptedModel((request) => {
      const result = lastToolResult(request.messages);
      if (result === undefined) return { toolCalls: [{ name: "mcp_local_echo", arguments: { text: "the answer is 42" } }] };
      return { text: `The server said: ${unwrapped(result)}` };
    });
    harness = await startHarness(model, { config: { tools: { mcpServers: { local: stdioServerEntry() } } } });
    await harness.send("chat", "ask the echo server");
    const [reply] = await harness.waitForFinals(1);
    expect(reply!.content).toBe("The server said: echo: the answer is 42");
    expect(model.requests[0]!.tools!.map((tool) => tool.name)).toContain("mcp_local_echo");

    const audit = await harness.runtime.audit!.tail(10);
    expect(audit.some((line) => line.includes('"tool":"mcp_local_echo"'))).toBe(true);
    const history = harness.runtime.infrastructure.toolHistory();
    let entries: Awaited<ReturnType<typeof history.list>> = [];
    for (let attempt = 0; entries.length === 0 && attempt < 100; attempt += 1) {
      entries = await history.list("test:chat", { tool: "mcp_local_echo" });
      if (entries.length === 0) await new Promise((resolve) => setTimeout(resolve, 20));
    }
    expect(entries[0]).toMatchObject({ tool: "mcp_local_echo", arguments: { text: "the answer is 42" }, success: true });
    await history.close();
  });

  it("times a hanging tool out, and the turn goes on to an answer", async () => {
    const model = scriptedModel((request) => {
      const result = lastToolResult(request.messages);
      if (result === undefined) return { toolCalls: [{ name: "mcp_local_hang", arguments: {} }] };
      return { text: result.includes("did not answer within 300 ms") ? "The tool timed out, so I answered without it." : `unexpected: ${result}` };
    });
    harness = await startHarness(model, { config: { agent: { maxRetries: 1 }, tools: { mcpServers: { local: stdioServerEntry({ callTimeoutMs: 300 }) } } } });
    await harness.send("chat", "use the slow tool");
    const [reply] = await harness.waitForFinals(1);
    expect(reply!.content).toBe("The tool timed out, so I answered without it.");
  });

  it("restarts a server that died in one turn for the next", async () => {
    const model = scriptedModel((request) => {
      const result = lastToolResult(request.messages);
      const asked = userText(request.messages);
      if (result === undefined) return { toolCalls: [{ name: asked.includes("crash") ? "mcp_local_crash" : "mcp_local_pid", arguments: {} }] };
      return { text: result.startsWith("Error:") ? "It broke." : `Running as ${unwrapped(result)}.` };
    });
    harness = await startHarness(model, { config: { agent: { maxRetries: 1 }, tools: { mcpServers: { local: stdioServerEntry() } } } });
    await harness.send("chat", "please crash");
    await harness.waitForFinals(1);
    await harness.send("chat", "which pid?");
    const [first, second] = await harness.waitForFinals(2);
    expect(first!.content).toBe("It broke.");
    expect(second!.content).toMatch(/^Running as \d+\.$/);
  });

  it("go to subagents and team agents only from servers whose config offers them", async () => {
    const seen: Record<"agent" | "subagent" | "team", string[] | undefined> = { agent: undefined, subagent: undefined, team: undefined };
    const model = scriptedModel((request): ScriptStep => {
      const system = String(request.messages[0]?.content ?? "");
      const names = (request.tools ?? []).map((tool) => tool.name).filter((name) => name.startsWith("mcp_"));
      if (system.includes("# Subagent")) {
        seen.subagent = names;
        return { text: "subagent report" };
      }
      if (system.includes("# Team agent")) {
        seen.team = names;
        return { text: "team contribution" };
      }
      seen.agent ??= names;
      if (userText(request.messages).includes("spawn one") && lastToolResult(request.messages) === undefined) {
        return { toolCalls: [{ name: "spawn", arguments: { task: "report which tools you have" } }] };
      }
      return { text: "ok" };
    });
    const shared = stdioServerEntry({ subagents: true, teams: true });
    const own = stdioServerEntry({ enabledTools: ["echo"] });
    harness = await startHarness(model, {
      config: {
        tools: { mcpServers: { shared: { ...shared, enabledTools: ["echo"] }, own } },
        teams: { squad: { mode: "pipeline", agents: [{ id: "solo", role: "Solo", task: "say which tools you have" }] } },
      },
    });
    await harness.send("chat", "spawn one");
    await eventually(() => seen.subagent !== undefined, "the subagent's model call");
    await harness.send("chat", "@squad list your tools");
    await eventually(() => seen.team !== undefined, "the team agent's model call");
    expect(seen.agent).toEqual(["mcp_shared_echo", "mcp_own_echo"]);
    expect(seen.subagent).toEqual(["mcp_shared_echo"]);
    expect(seen.team).toEqual(["mcp_shared_echo"]);
  });
});
