import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterEach, describe, expect, it, vi } from "vitest";
import { z } from "zod";
import { nodeJobId } from "../../../src/jobs/workflows/engine.js";
import type { WorkflowRun } from "../../../src/store/team-record.js";
import { defineTool } from "../../../src/tools/tool.js";
import { type ModelCall, type WorkflowHarness, gates, team, workflowHarness } from "./workflow-harness.js";

const SESSION = "telegram:42";
const open: WorkflowHarness[] = [];
afterEach(async () => {
  for (const harness of open.splice(0)) await harness.close();
});

async function harness(options: Parameters<typeof workflowHarness>[0]): Promise<WorkflowHarness> {
  const created = await workflowHarness(options);
  open.push(created);
  return created;
}

const analysis = team({
  name: "Project Analysis",
  mode: "graph",
  agents: [
    { id: "frontend", role: "Frontend analyst", task: "analyse the front end" },
    { id: "backend", role: "Backend analyst", task: "analyse the back end" },
    { id: "database", role: "Database expert", task: "analyse the database" },
    { id: "integrator", role: "Architect", task: "combine the analyses", dependsOn: ["frontend", "backend", "database"] },
  ],
});

const statuses = (run: WorkflowRun | undefined) => Object.fromEntries((run?.nodes ?? []).map((node) => [node.id, node.status]));

describe("graph runs", () => {
  it("runs the three analysts at once, gives the integrator all three outputs and posts one result", async () => {
    const gate = gates();
    const h = await harness({
      async respond(call) {
        if (call.role === "Architect") return { text: "Architecture report" };
        await gate.hold("analysts");
        return { text: `${call.role} findings` };
      },
    });
    const run = await h.engine.start({ team: analysis, goal: "review the shop", sessionKey: SESSION });
    expect(run.status).toBe("running");
    // All three reach the model before any answers: they run side by side.
    await vi.waitFor(() => expect(h.active.now).toBe(3));
    expect(h.calls.map((call) => call.role).sort()).toEqual(["Backend analyst", "Database expert", "Frontend analyst"]);
    gate.release("analysts");
    const ended = await h.ended(run.id);

    expect(ended.status).toBe("completed");
    expect(ended.result).toBe("Architecture report");
    const integrator = h.calls.find((call) => call.role === "Architect")!;
    for (const finding of ["Frontend analyst findings", "Backend analyst findings", "Database expert findings"]) expect(integrator.input).toContain(finding);
    expect(integrator.input).toContain("Goal: review the shop");
    expect(h.calls).toHaveLength(4);
    expect(h.messages).toHaveLength(1);
    expect(h.messages[0]).toMatchObject({ sessionKey: SESSION, id: `workflow-${run.id}-completed` });
    expect(h.messages[0]!.content).toMatch(/^Team \[Project Analysis\] \(run ID: run-1\) completed\.\n\nResult:\nArchitecture report\n\n<!-- WORKFLOW_EXECUTION_METADATA\nrun: run-1\nmode: graph\nagents: 4\ntool_calls: 0\nduration: \d+ms\n-->$/);
    const stored = await h.runs.get(run.id);
    expect(stored?.nodes.find((node) => node.id === "integrator")).toMatchObject({ status: "completed", output: "Architecture report", model: "default/model", attempts: 1 });
    expect(stored?.nodes.every((node) => node.startedAt !== undefined && node.completedAt !== undefined && node.input)).toBe(true);
    expect(h.notices.filter((notice) => notice.type === "node-done").map((notice) => notice.node?.id).at(-1)).toBe("integrator");
  });

  it("starts a node as soon as its own dependencies are done, not when the whole wave is", async () => {
    const gate = gates();
    const graph = team({
      agents: [
        { id: "quick", task: "q" },
        { id: "slow", task: "s" },
        { id: "after-quick", task: "aq", dependsOn: ["quick"] },
        { id: "end", task: "e", dependsOn: ["slow", "after-quick"] },
      ],
    });
    const h = await harness({
      async respond(call) {
        if (call.role === "slow") await gate.hold("slow");
        return { text: `${call.role} out` };
      },
    });
    const run = await h.engine.start({ team: graph, goal: "g", sessionKey: SESSION });
    // "after-quick" runs while "slow" still holds its call.
    await vi.waitFor(async () => expect(statuses(await h.runs.get(run.id))["after-quick"]).toBe("completed"));
    expect(statuses(await h.runs.get(run.id)).slow).toBe("running");
    gate.release("slow");
    expect((await h.ended(run.id)).status).toBe("completed");
  });

  it("marks what needs a failed node upstream failed, all the way down, and tells the chat which", async () => {
    const graph = team({
      name: "Fragile",
      agents: [
        { id: "ok", task: "fine" },
        { id: "broken", task: "fails" },
        { id: "middle", task: "m", dependsOn: ["broken"] },
        { id: "last", task: "l", dependsOn: ["middle", "ok"] },
        { id: "side", task: "s", dependsOn: ["ok"] },
      ],
    });
    const h = await harness({ respond: (call) => (call.role === "broken" ? { error: new Error("the model said no") } : { text: `${call.role} done` }) });
    const run = await h.engine.start({ team: graph, goal: "g", sessionKey: SESSION });
    const ended = await h.ended(run.id);
    expect(statuses(ended)).toEqual({ ok: "completed", broken: "failed", middle: "upstream-failed", last: "upstream-failed", side: "completed" });
    expect(ended.nodes.find((node) => node.id === "middle")?.error).toBe("upstream agent broken failed");
    expect(ended.nodes.find((node) => node.id === "last")?.error).toBe("upstream agent middle failed");
    // "side" is a final node that completed: the run completed, and says what did not.
    expect(ended.status).toBe("completed");
    expect(h.calls.map((call) => call.role).sort()).toEqual(["broken", "ok", "side"]);
    const message = h.messages[0]!.content;
    expect(message).toContain("Not every agent finished:\n- broken (broken) failed: the model said no\n- middle (middle) did not run: upstream agent broken failed\n- last (last) did not run: upstream agent middle failed");
  });

  it("fails the run when no final node completed", async () => {
    const graph = team({ agents: [{ id: "a", task: "a" }, { id: "b", task: "b", dependsOn: ["a"] }] });
    const h = await harness({ respond: () => ({ error: new Error("down") }) });
    const run = await h.engine.start({ team: graph, goal: "g", sessionKey: SESSION });
    const ended = await h.ended(run.id);
    expect(ended.status).toBe("failed");
    expect(h.messages[0]!.content).toMatch(/^Team \[Team\] \(run ID: run-1\) failed\.\n\nNot every agent finished:\n- a \(a\) failed: down\n- b \(b\) did not run: upstream agent a failed/);
  });

  it("skips a node whose condition does not hold; what depends on it runs and is told", async () => {
    const graph = team({
      agents: [
        { id: "triage", task: "triage" },
        { id: "fix", task: "fix bugs", dependsOn: ["triage"], condition: { node: "triage", outputContains: "BUG" } },
        { id: "praise", task: "praise", dependsOn: ["triage"], condition: { node: "triage", outputNotContains: "bug" } },
        { id: "report", task: "report", dependsOn: ["fix", "praise"] },
      ],
    });
    const h = await harness({ respond: (call) => ({ text: call.role === "triage" ? "Found a bug in checkout" : `${call.role} out` }) });
    const run = await h.engine.start({ team: graph, goal: "g", sessionKey: SESSION });
    const ended = await h.ended(run.id);
    expect(statuses(ended)).toEqual({ triage: "completed", fix: "completed", praise: "skipped", report: "completed" });
    expect(ended.nodes.find((node) => node.id === "praise")?.error).toBe('condition not met: triage\'s output contains "bug"');
    const report = h.calls.find((call) => call.role === "report")!;
    expect(report.input).toContain("fix out");
    expect(report.input).toContain("Skipped (their condition did not hold), so there is no output from: praise (praise).");
    expect(h.notices.some((notice) => notice.type === "node-skipped" && notice.node?.id === "praise")).toBe(true);
  });
});

describe("pipeline runs", () => {
  it("gives each stage the goal and every earlier stage's output, in order", async () => {
    const pipeline = team({
      mode: "pipeline",
      agents: [
        { id: "extract", role: "Extractor", task: "extract" },
        { id: "analyse", role: "Analyst", task: "analyse" },
        { id: "summarise", role: "Writer", task: "summarise" },
      ],
    });
    const h = await harness({ respond: (call) => ({ text: `${call.role} output` }) });
    const run = await h.engine.start({ team: pipeline, goal: "digest the document", sessionKey: SESSION });
    const ended = await h.ended(run.id);
    expect(h.calls.map((call) => call.role)).toEqual(["Extractor", "Analyst", "Writer"]);
    const writer = h.calls[2]!.input;
    expect(writer).toContain("Goal: digest the document");
    expect(writer).toContain("Your task: summarise");
    expect(writer.indexOf("## Extractor (extract)\nExtractor output")).toBeLessThan(writer.indexOf("## Analyst (analyse)\nAnalyst output"));
    expect(ended.result).toBe("Writer output");
  });

  it("does not run the stages after a failed one", async () => {
    const pipeline = team({ mode: "pipeline", agents: [{ id: "one", task: "1" }, { id: "two", task: "2" }, { id: "three", task: "3" }] });
    const h = await harness({ respond: (call) => (call.role === "two" ? { error: new Error("stage two broke") } : { text: "ok" }) });
    const ended = await h.ended((await h.engine.start({ team: pipeline, goal: "g", sessionKey: SESSION })).id);
    expect(statuses(ended)).toEqual({ one: "completed", two: "failed", three: "upstream-failed" });
    expect(ended.status).toBe("failed");
  });
});

describe("council runs", () => {
  const council = team({
    name: "Review Council",
    mode: "council",
    crossReview: true,
    agents: [
      { id: "tech", role: "Tech expert", perspective: "feasibility" },
      { id: "biz", role: "Business analyst", perspective: "value" },
      { id: "risk", role: "Risk manager", perspective: "risk" },
    ],
  });

  it("runs round one in parallel, a cross-review where each sees the others, then a synthesis", async () => {
    const gate = gates();
    const h = await harness({
      async respond(call) {
        if (call.role === "_synthesis") return { text: "Council verdict" };
        const review = call.input.includes("Your first analysis:");
        if (!review) await gate.hold("round-one");
        return { text: `${call.role} ${review ? "revised" : "initial"} position` };
      },
    });
    const run = await h.engine.start({ team: council, goal: "adopt the new stack?", sessionKey: SESSION });
    await vi.waitFor(() => expect(h.active.now).toBe(3));
    gate.release("round-one");
    const ended = await h.ended(run.id);
    expect(h.calls).toHaveLength(7);
    const reviews = h.calls.filter((call) => call.input.includes("Your first analysis:"));
    expect(reviews).toHaveLength(3);
    const techReview = reviews.find((call) => call.role === "Tech expert")!;
    expect(techReview.input).toContain("Your first analysis:\nTech expert initial position");
    expect(techReview.input).toContain("## Business analyst (value)\nBusiness analyst initial position");
    expect(techReview.input).toContain("## Risk manager (risk)\nRisk manager initial position");
    expect(techReview.input).not.toContain("## Tech expert");
    const synthesis = h.calls.find((call) => call.role === "_synthesis")!;
    for (const role of ["Tech expert", "Business analyst", "Risk manager"]) expect(synthesis.input).toContain(`${role} revised position`);
    expect(synthesis.input).not.toContain("initial position");
    expect(ended).toMatchObject({ status: "completed", result: "Council verdict" });
    expect(ended.nodes.map((node) => node.id)).toEqual(["tech", "biz", "risk", "tech.review", "biz.review", "risk.review", "_synthesis"]);
  });

  it("reports a failed member and goes on with the rest", async () => {
    const h = await harness({
      respond: (call) => (call.role === "Risk manager" && !call.input.includes("Your first analysis:") ? { error: new Error("risk model down") } : { text: `${call.role} says` }),
    });
    const ended = await h.ended((await h.engine.start({ team: council, goal: "g", sessionKey: SESSION })).id);
    expect(statuses(ended)).toEqual({ tech: "completed", biz: "completed", risk: "failed", "tech.review": "completed", "biz.review": "completed", "risk.review": "upstream-failed", _synthesis: "completed" });
    const techReview = h.calls.find((call) => call.role === "Tech expert" && call.input.includes("Your first analysis:"))!;
    expect(techReview.input).toContain("Members without a position (they failed): Risk manager (risk).");
    const synthesis = h.calls.find((call) => call.role === "_synthesis")!;
    expect(synthesis.input).toContain("Members without a position (they failed): Risk manager (risk): upstream agent risk failed.");
    expect(ended.status).toBe("completed");
    expect(h.messages[0]!.content).toContain("- Risk manager (risk) failed: risk model down");
  });

  it("without cross-review goes from round one straight to the synthesis", async () => {
    const plain = team({ mode: "council", agents: [{ id: "a", perspective: "cost" }, { id: "b", perspective: "speed" }] });
    const h = await harness({ respond: (call) => ({ text: `${call.role} view` }) });
    const ended = await h.ended((await h.engine.start({ team: plain, goal: "g", sessionKey: SESSION })).id);
    expect(ended.nodes.map((node) => node.id)).toEqual(["a", "b", "_synthesis"]);
    expect(h.calls.find((call) => call.role === "_synthesis")!.input).toContain("## a (cost)\na view");
  });
});

describe("agent settings", () => {
  it("honours each agent's and the team's model, temperature and iteration cap", async () => {
    const looping = defineTool({ name: "look", description: "Looks.", parameters: z.object({}), execute: async () => "seen" });
    const configured = team({
      maxIterations: 3,
      modelConfig: { model: "team/model", temperature: 0.2 },
      agents: [
        { id: "own", task: "t", model: "agent/model", temperature: 1.1, maxIterations: 2 },
        { id: "inherits", task: "t" },
      ],
    });
    const h = await harness({ tools: [looping], respond: () => ({ tool: "look" }) });
    const ended = await h.ended((await h.engine.start({ team: configured, goal: "g", sessionKey: SESSION })).id);
    const own = h.calls.filter((call) => call.role === "own");
    const inherits = h.calls.filter((call) => call.role === "inherits");
    expect(own.map((call: ModelCall) => [call.model, call.temperature])).toEqual([
      ["agent/model", 1.1],
      ["agent/model", 1.1],
    ]);
    expect(inherits.map((call) => [call.model, call.temperature])).toEqual(Array.from({ length: 3 }, () => ["team/model", 0.2]));
    expect(ended.nodes.find((node) => node.id === "own")?.output).toContain("[max tool calls reached: 2]");
    expect(ended.nodes.find((node) => node.id === "inherits")?.toolCalls).toHaveLength(3);
    // Each tool call is a progress notice of its own.
    expect(h.notices.filter((notice) => notice.type === "node-tool").map((notice) => [notice.node?.id, notice.toolCall?.name]).sort()).toEqual([
      ["inherits", "look"],
      ["inherits", "look"],
      ["inherits", "look"],
      ["own", "look"],
      ["own", "look"],
    ]);
  });

  it("fails a node that runs past its timeout and aborts its model call", async () => {
    const slow = team({ nodeTimeoutSeconds: 1, agents: [{ id: "slow", task: "t" }, { id: "after", task: "t", dependsOn: ["slow"] }] });
    const h = await harness({ respond: () => ({ hang: true }) });
    const ended = await h.ended((await h.engine.start({ team: slow, goal: "g", sessionKey: SESSION })).id);
    expect(ended.nodes[0]).toMatchObject({ status: "failed", error: "timed out after 1 s (nodeTimeoutSeconds)" });
    expect(ended.nodes[1]?.status).toBe("upstream-failed");
    expect(h.calls[0]!.signal?.aborted).toBe(true);
  });
});

describe("concurrency caps", () => {
  it("runs at most the team's maxParallel nodes of one run at once", async () => {
    const gate = gates();
    const wide = team({ maxParallel: 2, agents: ["a", "b", "c", "d", "e"].map((id) => ({ id, task: id })) });
    const h = await harness({ respond: async () => (await gate.hold("all"), { text: "ok" }) });
    const run = await h.engine.start({ team: wide, goal: "g", sessionKey: SESSION });
    await vi.waitFor(() => expect(h.active.now).toBe(2));
    expect(Object.values(statuses(await h.runs.get(run.id))).sort()).toEqual(["pending", "pending", "pending", "running", "running"]);
    gate.release("all");
    const ended = await h.ended(run.id);
    expect(ended.status).toBe("completed");
    expect(h.calls).toHaveLength(5);
    expect(h.active.max).toBe(2);
  });

  it("runs at most the queue's concurrency over all runs", async () => {
    const gate = gates();
    const wide = team({ agents: ["a", "b", "c"].map((id) => ({ id, task: id })) });
    const h = await harness({ concurrency: 2, respond: async () => (await gate.hold("all"), { text: "ok" }) });
    const first = await h.engine.start({ team: wide, goal: "one", sessionKey: "telegram:1" });
    const second = await h.engine.start({ team: wide, goal: "two", sessionKey: "telegram:2" });
    await vi.waitFor(() => expect(h.active.now).toBe(2));
    gate.release("all");
    await Promise.all([h.ended(first.id), h.ended(second.id)]);
    expect(h.calls).toHaveLength(6);
    expect(h.active.max).toBe(2);
  });

  it("refuses a start past the session's limit of unfinished runs", async () => {
    const h = await harness({ perSession: 1, respond: () => ({ hang: true }) });
    const one = team({ agents: [{ id: "a", task: "a" }] });
    await h.engine.start({ team: one, goal: "g", sessionKey: SESSION });
    await expect(h.engine.start({ team: one, goal: "g", sessionKey: SESSION })).rejects.toThrow(/already has 1 team run going/);
    await expect(h.engine.start({ team: { ...one, enabled: false }, goal: "g", sessionKey: "telegram:2" })).rejects.toThrow(/is disabled/);
  });
});

describe("cancel", () => {
  it("cancels one run, aborting its running node, and leaves another chat's run running", async () => {
    const gate = gates();
    const one = team({ agents: [{ id: "a", task: "a" }, { id: "b", task: "b", dependsOn: ["a"] }] });
    const h = await harness({ respond: async (call) => (call.input.includes("keep") ? (await gate.hold("kept"), { text: "kept done" }) : { hang: true }) });
    const doomed = await h.engine.start({ team: one, goal: "stop me", sessionKey: "telegram:1" });
    const kept = await h.engine.start({ team: one, goal: "keep me", sessionKey: "telegram:2" });
    await vi.waitFor(() => expect(h.active.now).toBe(2));
    const cancelled = await h.engine.cancelSession("telegram:1");
    expect(cancelled.map((run) => run.id)).toEqual([doomed.id]);
    expect(statuses(cancelled[0])).toEqual({ a: "cancelled", b: "cancelled" });
    await vi.waitFor(() => expect(h.calls.find((call) => call.input.includes("stop me"))?.signal?.aborted).toBe(true));
    expect(h.messages).toEqual([{ sessionKey: "telegram:1", id: `workflow-${doomed.id}-cancelled`, content: expect.stringMatching(/^Team \[Team\] \(run ID: run-1\) was cancelled\./) }]);
    expect((await h.runs.get(kept.id))?.status).toBe("running");
    gate.release("kept");
    const ended = await h.ended(kept.id);
    expect(ended.status).toBe("completed");
    // A second cancel changes nothing and says nothing.
    expect((await h.engine.cancel(doomed.id))?.status).toBe("cancelled");
    expect(h.messages.filter((message) => message.sessionKey === "telegram:1")).toHaveLength(1);
  });
});

describe("crash recovery", () => {
  it("never runs a finished node again: a re-delivered job of a completed node only moves the run on", async () => {
    const graph = team({ agents: [{ id: "a", task: "a" }, { id: "b", task: "b", dependsOn: ["a"] }] });
    const h = await harness({ idle: true, respond: (call) => ({ text: `${call.role} out` }) });
    const run = await h.engine.start({ team: graph, goal: "g", sessionKey: SESSION });
    // As if a worker finished "a" and died before it queued "b".
    await h.runs.updateNode(run.id, "a", { status: "completed", output: "a out", completedAt: 1 });
    const signal = new AbortController().signal;
    await h.engine.execute({ id: nodeJobId(run.id, "a"), name: "node", data: { runId: run.id, nodeId: "a" }, attempt: 2, signal });
    expect(h.calls).toEqual([]);
    expect(statuses(await h.runs.get(run.id)).b).toBe("queued");
    await h.engine.process({ concurrency: 4 });
    const ended = await h.ended(run.id);
    expect(h.calls.map((call) => call.role)).toEqual(["b"]);
    expect(ended.status).toBe("completed");
  });

  it("moves the run on when a finished node's job fails before it could", async () => {
    const graph = team({ agents: [{ id: "a", task: "a" }, { id: "b", task: "b", dependsOn: ["a"] }] });
    const h = await harness({ idle: true, respond: () => ({ text: "out" }) });
    const run = await h.engine.start({ team: graph, goal: "g", sessionKey: SESSION });
    await h.runs.updateNode(run.id, "a", { status: "completed", output: "a out" });
    await h.engine.handleFailed({ id: nodeJobId(run.id, "a"), data: { runId: run.id, nodeId: "a" } }, { reason: "error", message: "the store went away mid-advance" });
    expect(statuses(await h.runs.get(run.id))).toEqual({ a: "completed", b: "queued" });
  });

  it("runs a node whose worker died again, once; a second death fails it", async () => {
    const graph = team({ agents: [{ id: "a", task: "a" }, { id: "b", task: "b" }] });
    const h = await harness({ idle: true, respond: (call) => ({ text: `${call.role} out` }) });
    const run = await h.engine.start({ team: graph, goal: "g", sessionKey: SESSION });
    await h.runs.updateNode(run.id, "a", { status: "running", attempts: 1 });
    await h.runs.updateNode(run.id, "b", { status: "running", attempts: 2 });
    const signal = new AbortController().signal;
    await h.engine.execute({ id: nodeJobId(run.id, "a"), name: "node", data: { runId: run.id, nodeId: "a" }, attempt: 2, signal });
    await h.engine.execute({ id: nodeJobId(run.id, "b"), name: "node", data: { runId: run.id, nodeId: "b" }, attempt: 2, signal });
    const after = await h.runs.get(run.id);
    expect(after?.nodes[0]).toMatchObject({ status: "completed", attempts: 2, output: "a out" });
    expect(after?.nodes[1]).toMatchObject({ status: "failed", error: "its worker died twice before it finished" });
    expect(h.calls.map((call) => call.role)).toEqual(["a"]);
  });

  it("re-queues the queued and running nodes of unfinished runs after a restart, leaving finished ones alone", async () => {
    const graph = team({ agents: [{ id: "done", task: "d" }, { id: "was-running", task: "r" }, { id: "next", task: "n", dependsOn: ["done", "was-running"] }] });
    const directory = await mkdtemp(path.join(tmpdir(), "countbot-restart-"));
    try {
      const first = await workflowHarness({ idle: true, directory, respond: () => ({ text: "never" }) });
      const run = await first.engine.start({ team: graph, goal: "g", sessionKey: SESSION });
      await first.runs.updateNode(run.id, "done", { status: "completed", output: "done before the crash" });
      await first.runs.updateNode(run.id, "was-running", { status: "running", attempts: 1 });
      await first.close();
      // The same data directory, a new process: the in-process queue lost its jobs.
      const after = await harness({ directory, respond: (call) => ({ text: `${call.role} after restart` }) });
      expect(await after.engine.recover()).toBe(1);
      const ended = await after.ended(run.id);
      expect(after.calls.map((call) => call.role)).toEqual(["was-running", "next"]);
      expect(ended.nodes.find((node) => node.id === "was-running")).toMatchObject({ status: "completed", attempts: 2 });
      expect(ended.nodes.find((node) => node.id === "done")?.output).toBe("done before the crash");
      expect(after.calls[1]!.input).toContain("done before the crash");
    } finally {
      await rm(directory, { recursive: true, force: true });
    }
  });
});

describe("streamed text", () => {
  it("tells listeners what each agent writes as it streams (node-chunk), the whole output staying on the run", async () => {
    const h = await harness({ respond: (call) => ({ text: `${call.role} says hello` }) });
    const run = await h.engine.start({ team: analysis, goal: "review the shop", sessionKey: SESSION });
    await vi.waitFor(async () => expect((await h.engine.get(run.id))?.status).toBe("completed"));
    const chunks = h.notices.filter((notice) => notice.type === "node-chunk");
    expect(chunks.map((notice) => [notice.node?.id, notice.text]).sort()).toEqual([
      ["backend", "Backend analyst says hello"],
      ["database", "Database expert says hello"],
      ["frontend", "Frontend analyst says hello"],
      ["integrator", "Architect says hello"],
    ]);
  });
});
