import { afterEach, describe, expect, it, vi } from "vitest";
import { mayStartTeam, recognizeTrigger, triggerRunId } from "../../../src/jobs/workflows/triggers.js";
import type { ChatMessage, ChatModel, StreamPart } from "../../../src/providers/chat-model.js";
import { type Harness, startHarness } from "../../support/agent-harness.js";
import { team } from "./workflow-harness.js";

const research = team({ name: "Research", agents: [{ id: "a", task: "a" }] });
const researchTeam = team({ name: "Research Team", agents: [{ id: "a", task: "a" }] });
const chinese = team({ name: "文档处理团队", mode: "pipeline", agents: [{ id: "a", task: "a" }] });
const teams = [research, researchTeam, chinese];

describe("recognizing a team trigger", () => {
  it("takes the longest enabled name at a word boundary, without case", () => {
    expect(recognizeTrigger("@research team compare the two vendors", teams)).toMatchObject({ kind: "run", team: { name: "Research Team" }, goal: "compare the two vendors" });
    expect(recognizeTrigger("@Research compare the two vendors", teams)).toMatchObject({ kind: "run", team: { name: "Research" }, goal: "compare the two vendors" });
    expect(recognizeTrigger("@Research, look at pricing", teams)).toMatchObject({ team: { name: "Research" }, goal: "look at pricing" });
    expect(recognizeTrigger("@Researchers look at pricing", teams)).toBeUndefined();
    expect(recognizeTrigger("@文档处理团队 分析这份文档", teams)).toMatchObject({ team: { name: "文档处理团队" }, goal: "分析这份文档" });
  });

  it("finds the name after a space anywhere in the text, never inside a word or an address", () => {
    expect(recognizeTrigger("please ask @Research Team about pricing", teams)).toMatchObject({ team: { name: "Research Team" }, goal: "please ask about pricing" });
    expect(recognizeTrigger("mail me at bob@Research please", teams)).toBeUndefined();
    expect(recognizeTrigger("research pricing", teams)).toBeUndefined();
    expect(recognizeTrigger("@Research", teams)).toEqual({ kind: "reply", text: "What should Research do? Write @Research <goal>." });
  });

  it("reads /team <name> <goal>, and lists the teams for /team alone or an unknown name", () => {
    expect(recognizeTrigger("/team research team dig into churn", teams)).toMatchObject({ kind: "run", team: { name: "Research Team" }, goal: "dig into churn" });
    expect(recognizeTrigger("/team@countbot_bot Research churn", teams)).toMatchObject({ team: { name: "Research" }, goal: "churn" });
    const listing = recognizeTrigger("/team", teams);
    expect(listing).toMatchObject({ kind: "reply" });
    expect(listing?.kind === "reply" && listing.text).toMatch(/^Teams: Research \(graph\); Research Team \(graph\); 文档处理团队 \(pipeline\)\./);
    expect(recognizeTrigger("/team Sales close the deal", teams)).toMatchObject({ kind: "reply", text: expect.stringMatching(/^No enabled team is called that\. Teams: /) });
    expect(recognizeTrigger("/teams", teams)).toBeUndefined();
  });

  it("marks what may start a team cheaply, and gives a re-run turn the same run id", () => {
    expect(["@x go", "hi @x", "/team", " /team a b"].every(mayStartTeam)).toBe(true);
    expect(["hello", "a@b", "@ alone", "/teams"].some(mayStartTeam)).toBe(false);
    expect(triggerRunId({ channel: "telegram", chatId: "1", id: "m1" })).toBe(triggerRunId({ channel: "telegram", chatId: "1", id: "m1" }));
    expect(triggerRunId({ channel: "telegram", chatId: "1", id: "m1" })).not.toBe(triggerRunId({ channel: "telegram", chatId: "2", id: "m1" }));
  });
});

/**
 * One scripted model for the main agent and the team's agents, answering by the prompt: team agents
 * by their role, the main agent by what it was sent. Team agents named `slow` hang until aborted.
 */
function chatModel(): ChatModel & { prompts: string[] } {
  const prompts: string[] = [];
  return {
    id: "scripted/model",
    prompts,
    async *stream(request): AsyncIterable<StreamPart> {
      const system = String(request.messages[0]?.content ?? "");
      const last = request.messages.at(-1) as ChatMessage;
      const text = typeof last.content === "string" ? last.content : "";
      prompts.push(`${system.split("\n")[0]} | ${text.split("\n")[0]}`);
      const role = /^You are (.+?), one agent/m.exec(system)?.[1];
      let answer: string;
      if (role === "slow") {
        await new Promise((_resolve, reject) => request.signal?.addEventListener("abort", () => reject(new Error("aborted")), { once: true }));
        answer = "never";
      } else if (role) answer = `${role} says: ${text.includes("front end") ? "front" : "done"}`;
      else if (last.role === "tool") answer = `tool said: ${last.content}`;
      else if (text.startsWith("[Background event]")) answer = `Relayed: ${text.slice(0, 200)}`;
      else if (text.includes("use the team")) {
        yield { type: "tool-call", call: { id: "c1", name: "workflow_run", arguments: JSON.stringify({ team: "analysts", goal: "look at the front end" }) } };
        yield { type: "finish", reason: "tool-calls", usage: { inputTokens: 1, outputTokens: 1 }, model: "scripted" };
        return;
      } else answer = `echo: ${text}`;
      yield { type: "text-delta", text: answer };
      yield { type: "finish", reason: "stop", usage: { inputTokens: 1, outputTokens: 1 }, model: "scripted" };
    },
  };
}

const teamsConfig = {
  // A run left hanging at the end of a test must not hold up the runtime's close.
  shutdownGraceMs: 100,
  teams: {
    Analysts: {
      mode: "graph",
      agents: [
        { id: "ui", role: "UI analyst", task: "look at the front end" },
        { id: "report", role: "Reporter", task: "report", dependsOn: ["ui"] },
      ],
    },
    Sleepers: { mode: "graph", agents: [{ id: "slow", role: "slow", task: "never ends" }] },
    Off: { mode: "graph", enabled: false, agents: [{ id: "a", role: "A", task: "a" }] },
  },
};

let harness: Harness | undefined;
afterEach(async () => {
  await harness?.close();
  harness = undefined;
});

describe("team triggers and agent profiles (embedded)", () => {
  const profilesConfig = {
    ...teamsConfig,
    teams: { ...teamsConfig.teams, Pinned: { mode: "graph", agent: "eng", agents: [{ id: "p", role: "Pinned agent", task: "pin" }] } },
    agents: { support: { teams: ["Sleepers"] }, eng: { teams: ["analysts"] } },
    routing: [
      { match: { chat: "b" }, agent: "support" },
      { match: { chat: "c" }, agent: "eng" },
    ],
  };

  it("starts only the teams a chat's profile names, and runs them as that profile", async () => {
    const model = chatModel();
    harness = await startHarness(model, { config: profilesConfig });
    // Not a team of the support profile: the message is the model's, and so is its tool's refusal.
    await harness.send("b", "@analysts review the checkout page");
    const [echoed] = await harness.waitForFinals(1);
    expect(echoed!.content).toBe("echo: @analysts review the checkout page");
    await harness.send("b", "use the team");
    const [, refused] = await harness.waitForFinals(2);
    expect(refused!.content).toMatch(/^tool said: .*no enabled team is called "analysts".*Use one of: Sleepers\./s);
    // The eng profile's team: started, recorded as the profile's run, and its result brought back.
    await harness.send("c", "@analysts review the checkout page");
    const [, , started] = await harness.waitForFinals(3);
    expect(started!.content).toMatch(/^Team \[Analysts\] started/);
    await harness.waitForFinals(4);
    const [run] = await harness.runtime.jobs.workflows.list({ sessionKey: "test:c" });
    expect(run).toMatchObject({ status: "completed", profile: "eng", teamName: "Analysts" });
    expect(await harness.runtime.jobs.workflows.list({ sessionKey: "test:b" })).toEqual([]);
    // A team that names a profile runs as it, from a chat of another profile too.
    await harness.send("a", "@pinned hold the line");
    await harness.waitForFinals(6);
    const [pinned] = await harness.runtime.jobs.workflows.list({ sessionKey: "test:a" });
    expect(pinned).toMatchObject({ status: "completed", profile: "eng", teamName: "Pinned" });
  });
});

describe("team triggers in a chat (embedded)", () => {
  it("answers @Team at once without the model, then brings the result back through the agent", async () => {
    const model = chatModel();
    harness = await startHarness(model, { config: teamsConfig });
    const trigger = await harness.send("a", "@analysts review the checkout page");
    const [started] = await harness.waitForFinals(1);
    expect(started).toMatchObject({ id: `${trigger.id}:0`, content: expect.stringMatching(/^Team \[Analysts\] started \(run ID: wf-[0-9a-f]{32}\) with 2 steps\./) });
    const [, result] = await harness.waitForFinals(2);
    expect(result!.content).toMatch(/^Relayed: \[Background event\] Team \[Analysts\] \(run ID: wf-[0-9a-f]{32}\) completed\.\n\nResult:\nReporter says: done/);
    // The main agent was called once, for the background event; the trigger went to no model.
    expect(model.prompts.filter((prompt) => !prompt.startsWith("# Team agent"))).toHaveLength(1);
    // What every chat that shows notices gets; the streamed text comes as transient notices beside it.
    const lasting = harness.notices.filter((notice) => notice.metadata.transient !== true);
    expect(lasting.map((notice) => notice.content)).toEqual([
      "Team [Analysts]: UI analyst (ui) started",
      "Team [Analysts]: UI analyst (ui) done",
      "Team [Analysts]: Reporter (report) started",
      "Team [Analysts]: Reporter (report) done",
    ]);
    const streamed = harness.notices.filter((notice) => (notice.metadata.workflow as { event: string }).event === "node-chunk");
    expect(streamed.map((notice) => (notice.metadata.workflow as { event: string; nodeId: string }).nodeId).sort()).toEqual(["report", "ui"]);
    const { history } = await harness.runtime.store.sessions.load("test:a");
    // The run's start and end are transient notices too: what puts a status message up and settles it.
    const runEvents = harness.notices.filter((notice) => (notice.metadata.workflow as { event: string }).event.startsWith("run-"));
    expect(runEvents.map((notice) => [notice.content, notice.metadata.transient])).toEqual([
      ["Team [Analysts] started", true],
      ["Team [Analysts] completed", true],
    ]);
    // The background event is kept as an event, not as something the user said.
    expect(history.map((entry) => entry.role)).toEqual(["user", "assistant", "event", "assistant"]);
    expect(history[0]).toMatchObject({ content: "@analysts review the checkout page", messageIds: [trigger.id] });
    // The execution metadata is kept in the history with the background event.
    expect(history[2]!.content).toMatch(/<!-- WORKFLOW_EXECUTION_METADATA\nrun: wf-\w+\nmode: graph\nagents: 2\ntool_calls: 0\nduration: \d+ms\n-->/);
    const [run] = await harness.runtime.jobs.workflows.list({ sessionKey: "test:a" });
    expect(run).toMatchObject({ status: "completed", goal: "review the checkout page", teamName: "Analysts", origin: "mention" });
  });

  it("is its own turn when it arrives with other messages, and says so for a disabled team", async () => {
    const model = chatModel();
    harness = await startHarness(model, { config: teamsConfig });
    await harness.send("a", "hello");
    await harness.send("a", "@off do it");
    await harness.send("a", "/team Off do it");
    const finals = await harness.waitForFinals(3);
    expect(finals[0]!.content).toBe("echo: hello");
    // "Off" is no enabled team: @off is an ordinary message, /team lists what there is.
    expect(finals[1]!.content).toBe("echo: @off do it");
    expect(finals[2]!.content).toMatch(/^No enabled team is called that\. Teams: Analysts \(graph\); Sleepers \(graph\)\./);
  });

  it("starts a team through the workflow_run tool", async () => {
    harness = await startHarness(chatModel(), { config: teamsConfig });
    await harness.send("a", "please use the team");
    const [started] = await harness.waitForFinals(1);
    expect(started!.content).toMatch(/^tool said: Team \[Analysts\] started \(run ID: wf-[\w-]+\)/);
    const [, result] = await harness.waitForFinals(2);
    expect(result!.content).toContain("Team [Analysts]");
    expect(result!.content).toContain("completed");
    const [run] = await harness.runtime.jobs.workflows.list({ sessionKey: "test:a" });
    expect(run).toMatchObject({ teamName: "Analysts", origin: "tool" });
  });

  it("cancels the chat's runs on /stop and leaves another chat's run running", async () => {
    harness = await startHarness(chatModel(), { config: teamsConfig });
    await harness.send("a", "@sleepers work on a");
    await harness.send("b", "@sleepers work on b");
    await harness.waitForFinals(2);
    const workflows = harness.runtime.jobs.workflows;
    await vi.waitFor(async () => expect((await workflows.list({ status: "running" })).flatMap((run) => run.nodes.map((node) => node.status))).toEqual(["running", "running"]));
    // What the gateway does on /stop: a cancel request for the chat's session, to every worker.
    await harness.runtime.bus.requestCancel("test:a");
    const [, , cancelled] = await harness.waitForFinals(3);
    expect(cancelled).toMatchObject({ chatId: "a", content: expect.stringMatching(/^Relayed: \[Background event\] Team \[Sleepers\] \(run ID: [\w-]+\) was cancelled\./) });
    expect((await workflows.list({ sessionKey: "test:a" }))[0]?.status).toBe("cancelled");
    expect((await workflows.list({ sessionKey: "test:b" }))[0]?.status).toBe("running");
  });

  it("gives the same team triggered in two chats at once two independent runs", async () => {
    harness = await startHarness(chatModel(), { config: teamsConfig });
    await Promise.all([harness.send("a", "@analysts one"), harness.send("b", "@analysts two")]);
    await harness.waitForFinals(4);
    const runs = await harness.runtime.jobs.workflows.list();
    expect(runs.map((run) => [run.sessionKey, run.goal, run.status]).sort()).toEqual([
      ["test:a", "one", "completed"],
      ["test:b", "two", "completed"],
    ]);
    expect(new Set(runs.map((run) => run.id)).size).toBe(2);
  });
});
