import { mkdtemp, realpath, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { z } from "zod";
import { safetySection } from "../../../src/prompt/sections.js";
import { limitNote } from "../../../src/agent/react-loop.js";
import { ConfigSchema } from "../../../src/config/schema.js";
import { ProviderError, ToolError } from "../../../src/errors.js";
import { createInProcessQueue } from "../../../src/jobs/in-process-queue.js";
import {
  type SubagentJobData,
  type SubagentManager,
  type SubagentManagerOptions,
  type SubagentNotice,
  createSubagentManager,
  subagentEndMessage,
} from "../../../src/jobs/subagents/manager.js";
import { createSubagentRunner } from "../../../src/jobs/subagents/runner.js";
import type { SubagentTask } from "../../../src/jobs/subagents/task.js";
import { SUBAGENT_EXEC_TIMEOUT_SECONDS, createSubagentTools } from "../../../src/jobs/subagents/tools.js";
import type { Job, JobFailure, JobQueue } from "../../../src/jobs/job-queue.js";
import { type FileTaskStore, createFileTaskStore } from "../../../src/store/file-tasks.js";
import { ToolRegistry } from "../../../src/tools/registry.js";
import { createSpawnTool } from "../../../src/jobs/subagents/spawn-tool.js";
import { type Tool, type ToolContext, defineTool } from "../../../src/tools/tool.js";
import { type Script, type ScriptedModel, scriptedModel } from "../../support/scripted-model.js";

const START = 1_700_000_000_000;
const HOUR = 60 * 60 * 1000;
const SESSION = "telegram:42";

let root: string;
let workspace: string;
let clock: number;

beforeEach(async () => {
  root = await realpath(await mkdtemp(path.join(tmpdir(), "countbot-subagents-")));
  workspace = path.join(root, "workspace");
  clock = START;
});

interface Harness {
  manager: SubagentManager;
  store: FileTaskStore;
  queue: JobQueue<SubagentJobData>;
  model: ScriptedModel;
  /** System messages posted, in order. */
  messages: Array<{ sessionKey: string; content: string }>;
  notices: SubagentNotice[];
  /** What the queue reported to onFailed. */
  failures: Array<{ id: string; failure: JobFailure }>;
  /** Every status a task was written with, per task id, in order. */
  statuses: Map<string, string[]>;
}

const open: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const close of open.splice(0).reverse()) await close();
  await rm(root, { recursive: true, force: true });
});

/** A store that records each status written, to show the transitions a task went through. */
function recording(store: FileTaskStore, statuses: Map<string, string[]>): FileTaskStore {
  const note = (task: SubagentTask | undefined) => {
    if (task) statuses.set(task.id, [...(statuses.get(task.id) ?? []), task.status]);
  };
  return {
    ...store,
    async create(task) {
      await store.create(task);
      note(task);
    },
    async update(id, patch, from) {
      const updated = await store.update(id, patch, from);
      if (patch.status) note(updated);
      return updated;
    },
  };
}

async function harness(
  script: Script,
  options: { tools?: Tool[]; limits?: SubagentManagerOptions["limits"]; maxIterations?: number; start?: boolean; publishSystem?: SubagentManagerOptions["publishSystem"] } = {},
): Promise<Harness> {
  const statuses = new Map<string, string[]>();
  const store = recording(createFileTaskStore({ directory: path.join(root, "data", "tasks") }), statuses);
  const failures: Harness["failures"] = [];
  const messages: Harness["messages"] = [];
  const notices: SubagentNotice[] = [];
  const model = scriptedModel(script);
  const queue = createInProcessQueue<SubagentJobData>({
    name: "subagents",
    events: {
      onFailed: async (job, failure) => {
        failures.push({ id: job.id, failure });
        // The queue is built first (the manager needs it) and reports back to the manager.
        await manager.handleFailed(job, failure);
      },
    },
  });
  const tools = new ToolRegistry();
  for (const tool of options.tools ?? []) tools.register(tool);
  const runTask = createSubagentRunner({ model, tools, workspace, maxIterations: options.maxIterations ?? 15, retryDelayMs: 0, now: () => clock });
  let ids = 0;
  const manager = createSubagentManager({
    store,
    queue,
    runTask,
    publishSystem:
      options.publishSystem ??
      (async (sessionKey, content) => {
        messages.push({ sessionKey, content });
      }),
    notify: (notice) => notices.push(structuredClone(notice)),
    limits: options.limits ?? { perSession: 3 },
    now: () => clock,
    newId: () => `task-${++ids}`,
    publishRetryDelaysMs: [0, 0],
  });
  if (options.start !== false) await manager.start({ concurrency: 10 });
  open.push(async () => {
    await queue.close(0);
    await store.close();
  });
  return { manager, store, queue, model, messages, notices, failures, statuses };
}

function toolContext(sessionKey = SESSION): ToolContext {
  return { sessionKey, channel: "telegram", chatId: "42", workspace, restrictToWorkspace: true, signal: new AbortController().signal };
}

/** Waits until the task has ended and the queue is done with its job. */
async function ended(h: Harness, id: string): Promise<SubagentTask> {
  await vi.waitFor(async () => expect(["completed", "failed", "cancelled"]).toContain((await h.manager.get(id))?.status), { timeout: 5_000, interval: 5 });
  return (await h.manager.get(id))!;
}

/** A tool that answers only once the run is aborted: a long command, cut by cancel or shutdown. */
function waitingTool() {
  let started!: () => void;
  const running = new Promise<void>((resolve) => (started = resolve));
  const seen: { reason?: unknown } = {};
  const tool = defineTool({
    name: "wait",
    description: "Waits until the run is stopped.",
    parameters: z.object({}),
    async execute(_args, context) {
      started();
      await new Promise<void>((resolve) => {
        if (context.signal.aborted) resolve();
        context.signal.addEventListener("abort", () => resolve(), { once: true });
      });
      seen.reason = context.signal.reason;
      return "stopped";
    },
  });
  return { tool, running, seen };
}

describe("SubagentManager", () => {
  it("runs a spawned task pending → running → completed, reporting progress, and posts one message with the result", async () => {
    const progressSeen: number[] = [];
    const reference: { manager?: SubagentManager } = {};
    const probe = defineTool({
      name: "probe",
      description: "Reads the task's progress.",
      parameters: z.object({}),
      async execute(_args, context) {
        const [task] = await reference.manager!.list({ sessionKey: context.sessionKey });
        progressSeen.push(task!.progress);
        clock += 1000;
        return `progress ${task!.progress}`;
      },
    });
    const h = await harness(
      [{ text: "Looking.", toolCalls: [{ name: "probe", arguments: {} }] }, { toolCalls: [{ name: "probe", arguments: {} }] }, { text: "Report: the answer is 42." }],
      { tools: [probe] },
    );
    reference.manager = h.manager;
    const spawn = createSpawnTool(h.manager);
    const reply = await new ToolRegistry().register(spawn).execute({ id: "c1", name: "spawn", arguments: JSON.stringify({ task: "Find the answer to everything in the archive" }) }, toolContext());
    expect(reply.content).toBe("Subagent [Find the answer to everything] started (ID: task-1). I'll tell you when it is done.");

    const task = await ended(h, "task-1");
    expect(h.statuses.get("task-1")).toEqual(["pending", "running", "completed"]);
    expect(task).toMatchObject({
      status: "completed",
      progress: 100,
      result: "Report: the answer is 42.",
      sessionKey: SESSION,
      label: "Find the answer to everything",
      task: "Find the answer to everything in the archive",
      attempts: 1,
      startedAt: START,
      completedAt: START + 2000,
    });
    expect(task.toolCalls).toEqual([
      { name: "probe", success: true, durationMs: 1000, arguments: "{}", result: "progress 0" },
      { name: "probe", success: true, durationMs: 1000, arguments: "{}", result: "progress 5" },
    ]);
    expect(progressSeen).toEqual([0, 5]);
    expect(h.notices.map((notice) => [notice.type, notice.task.progress])).toEqual([
      ["started", 0],
      ["progress", 5],
      ["progress", 10],
      ["completed", 100],
    ]);
    expect(h.messages).toEqual([{ sessionKey: SESSION, content: "Subagent [Find the answer to everything] (ID: task-1) completed.\n\nResult:\nReport: the answer is 42." }]);

    // The subagent's own prompt, the task as the only user message, its own tools.
    const [request] = h.model.requests;
    expect(request!.messages[0]!.role).toBe("system");
    expect(request!.messages[0]!.content).toContain("You are a subagent");
    expect(request!.messages[0]!.content).toContain(safetySection);
    expect(request!.messages[0]!.content).toContain(workspace);
    expect(request!.messages.slice(1)).toEqual([{ role: "user", content: "Find the answer to everything in the archive" }]);
    expect(request!.tools!.map((tool) => tool.name)).toEqual(["probe"]);
  });

  it("keeps progress at 90 or below until the task has finished", async () => {
    const noop = defineTool({ name: "noop", description: "Does nothing.", parameters: z.object({}), execute: async () => "ok" });
    const steps: Script = Array.from({ length: 22 }, () => ({ toolCalls: [{ name: "noop", arguments: {} }] }));
    const h = await harness([...steps, { text: "done" }], { tools: [noop], maxIterations: 30 });
    await h.manager.create(SESSION, "many small steps");
    await ended(h, "task-1");
    const progress = h.notices.filter((notice) => notice.type === "progress").map((notice) => notice.task.progress);
    expect(progress).toEqual([...Array.from({ length: 18 }, (_unused, index) => (index + 1) * 5), 90, 90, 90, 90]);
    expect(h.notices.at(-1)).toMatchObject({ type: "completed", task: { progress: 100 } });
  });

  it("marks a task failed when its run fails and tells the chat once", async () => {
    const h = await harness([{ error: new ProviderError("the model is overloaded", { kind: "server" }) }]);
    const task = await h.manager.create(SESSION, "summarize the logs", "logs");
    const after = await ended(h, task.id);
    expect(after).toMatchObject({ status: "failed", error: "the model is overloaded", completedAt: START });
    expect(after.result).toBeUndefined();
    expect(h.statuses.get(task.id)).toEqual(["pending", "running", "failed"]);
    expect(h.notices.map((notice) => notice.type)).toEqual(["started", "failed"]);
    expect(h.messages).toEqual([{ sessionKey: SESSION, content: "Subagent [logs] (ID: task-1) failed: the model is overloaded" }]);
  });

  it("cancels a task while its tool runs: the signal reaches the tool, the task ends cancelled, the chat is told once", async () => {
    const waiting = waitingTool();
    const h = await harness([{ toolCalls: [{ name: "wait", arguments: {} }] }, { text: "never asked" }], { tools: [waiting.tool] });
    const task = await h.manager.create(SESSION, "run the long build");
    await waiting.running;

    const cancelled = await h.manager.cancel(task.id);
    expect(cancelled).toMatchObject({ id: task.id, status: "cancelled" });
    await vi.waitFor(() => expect(h.failures).toEqual([{ id: task.id, failure: { reason: "cancelled" } }]));
    expect(waiting.seen.reason).toBeInstanceOf(Error);
    expect(h.model.requests).toHaveLength(1); // the model was not asked again
    expect(await h.manager.get(task.id)).toMatchObject({ status: "cancelled", completedAt: START });
    expect(h.statuses.get(task.id)).toEqual(["pending", "running", "cancelled"]);
    expect(h.messages).toEqual([{ sessionKey: SESSION, content: "Subagent [run the long build] (ID: task-1) was cancelled." }]);
    expect(h.notices.map((notice) => notice.type)).toEqual(["started", "cancelled"]);

    // A finished task cannot be cancelled again: it is returned as it is, and nobody is told twice.
    expect(await h.manager.cancel(task.id)).toMatchObject({ status: "cancelled" });
    expect(await h.manager.cancel("unknown")).toBeUndefined();
    expect(h.messages).toHaveLength(1);
  });

  it("never runs a task cancelled before it started", async () => {
    const h = await harness([{ text: "should not run" }], { start: false });
    const task = await h.manager.create(SESSION, "later");
    expect(await h.manager.cancel(task.id)).toMatchObject({ status: "cancelled" });
    await h.manager.start({ concurrency: 1 });
    // Even a job that is delivered anyway (its queue-side cancel was lost) finds the task cancelled.
    await h.manager.execute({ id: task.id, name: "subagent", data: { taskId: task.id }, attempt: 1, signal: new AbortController().signal });
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(h.model.requests).toHaveLength(0);
    expect(h.statuses.get(task.id)).toEqual(["pending", "cancelled"]);
    expect(h.messages).toEqual([{ sessionKey: SESSION, content: "Subagent [later] (ID: task-1) was cancelled." }]);
  });

  it("refuses a spawn over the per-session limit with an error the model can read, and one over the total", async () => {
    const h = await harness(() => ({ hang: true }), { limits: { perSession: 3, total: 5 } });
    for (let index = 0; index < 3; index++) await h.manager.create(SESSION, `job ${index}`);
    await expect(h.manager.create(SESSION, "one too many")).rejects.toThrow(ToolError);
    const refused = await new ToolRegistry().register(createSpawnTool(h.manager)).execute({ id: "c1", name: "spawn", arguments: '{"task":"one too many"}' }, toolContext());
    expect(refused.success).toBe(false);
    expect(refused.content).toMatch(/^Error: this chat already has 3 subagents pending or running, the most it may have\. Next: /);

    // Other chats have their own allowance, up to the deployment's total.
    await h.manager.create("web:other", "elsewhere 1");
    await h.manager.create("web:other", "elsewhere 2");
    await expect(h.manager.create("web:third", "over the total")).rejects.toThrow(/5 subagents are pending or running already/);
    expect((await h.manager.stats()).total).toBe(5);

    // A finished task frees its slot.
    await h.manager.cancel("task-1");
    await expect(h.manager.create(SESSION, "fits again")).resolves.toMatchObject({ status: "pending" });
    await vi.waitFor(async () => expect(await h.manager.runningCount()).toBe(5));
    expect((await h.manager.running(SESSION)).map((task) => task.id).sort()).toEqual(["task-2", "task-3", "task-6"]);
  });

  it("refuses two concurrent spawns that would both take the last slot", async () => {
    const h = await harness(() => ({ hang: true }), { limits: { perSession: 1 } });
    const outcomes = await Promise.allSettled([h.manager.create(SESSION, "a"), h.manager.create(SESSION, "b")]);
    expect(outcomes.map((outcome) => outcome.status).sort()).toEqual(["fulfilled", "rejected"]);
  });

  it("cleans up finished tasks older than 24 hours, keeping recent and unfinished ones", async () => {
    const h = await harness([], { start: false });
    const base = { label: "l", task: "t", sessionKey: SESSION, progress: 0, toolCalls: [], attempts: 1 };
    await h.store.create({ ...base, id: "old-done", status: "completed", createdAt: START - 30 * HOUR, completedAt: START - 25 * HOUR });
    await h.store.create({ ...base, id: "old-failed", status: "failed", createdAt: START - 30 * HOUR, completedAt: START - 24 * HOUR - 1 });
    await h.store.create({ ...base, id: "recent-done", status: "completed", createdAt: START - 2 * HOUR, completedAt: START - HOUR });
    await h.store.create({ ...base, id: "old-running", status: "running", createdAt: START - 48 * HOUR });
    expect(await h.manager.cleanup()).toBe(2);
    expect((await h.manager.list()).map((task) => task.id)).toEqual(["recent-done", "old-running"]);
    expect(await h.manager.cleanup(30 * 60 * 1000)).toBe(1);
    expect((await h.manager.list()).map((task) => task.id)).toEqual(["old-running"]);
  });

  it("fails a task the queue reports lost, with the reason, and tells the chat once", async () => {
    const h = await harness([{ text: "unused" }], { start: false });
    const task = await h.manager.create(SESSION, "crunch numbers", "numbers");
    await h.store.update(task.id, { status: "running", attempts: 2 }, ["pending"]);
    const lost: JobFailure = { reason: "lost", message: "job stalled more than allowable limit" };
    await h.manager.handleFailed({ id: task.id, data: { taskId: task.id } }, lost);
    await h.manager.handleFailed({ id: task.id, data: { taskId: task.id } }, lost);
    expect(await h.manager.get(task.id)).toMatchObject({ status: "failed", error: expect.stringContaining("job stalled more than allowable limit") });
    expect(h.messages).toHaveLength(1);
    expect(h.messages[0]!.content).toMatch(/^Subagent \[numbers\] \(ID: task-1\) failed: its worker stopped before it finished/);
  });

  it("fails a running task when the in-process queue shuts down under it, never leaving it running", async () => {
    const waiting = waitingTool();
    const h = await harness([{ toolCalls: [{ name: "wait", arguments: {} }] }], { tools: [waiting.tool] });
    const task = await h.manager.create(SESSION, "long job");
    await waiting.running;
    await h.queue.close(0);
    expect(h.failures).toEqual([{ id: task.id, failure: { reason: "lost", message: expect.stringContaining("shut down") } }]);
    expect(await h.manager.get(task.id)).toMatchObject({ status: "failed", error: expect.stringContaining("shut down") });
    expect(h.messages).toEqual([{ sessionKey: SESSION, content: expect.stringMatching(/^Subagent \[long job\] \(ID: task-1\) failed: /) }]);
  });

  it("runs a recovered task again once, and fails it when its worker died twice", async () => {
    const h = await harness([{ text: "second time lucky" }], { start: false });
    const job = (taskId: string, attempt: number): Job<SubagentJobData> => ({ id: taskId, name: "subagent", data: { taskId }, attempt, signal: new AbortController().signal });
    const once = await h.manager.create(SESSION, "died once");
    const twice = await h.manager.create(SESSION, "died twice");
    await h.store.update(once.id, { status: "running", attempts: 1, progress: 35 }, ["pending"]);
    await h.store.update(twice.id, { status: "running", attempts: 2 }, ["pending"]);

    // A first attempt must not take over a task that is running elsewhere.
    await h.manager.execute(job(once.id, 1));
    expect(h.model.requests).toHaveLength(0);

    await h.manager.execute(job(once.id, 2));
    expect(await h.manager.get(once.id)).toMatchObject({ status: "completed", attempts: 2, result: "second time lucky", progress: 100 });
    await h.manager.execute(job(twice.id, 2));
    expect(await h.manager.get(twice.id)).toMatchObject({ status: "failed", error: "its worker died twice before it finished" });
    expect(h.model.requests).toHaveLength(1);
    expect(h.messages.map((message) => message.content)).toEqual([
      "Subagent [died once] (ID: task-1) completed.\n\nResult:\nsecond time lucky",
      "Subagent [died twice] (ID: task-2) failed: its worker died twice before it finished",
    ]);
  });

  it("queues again the tasks whose jobs were lost with their process (an embedded restart)", async () => {
    const h = await harness(() => ({ text: "finished after the restart" }), { start: false });
    const base = { label: "l", task: "t", sessionKey: SESSION, progress: 0, toolCalls: [], createdAt: START };
    await h.store.create({ ...base, id: "was-running", status: "running", attempts: 1, startedAt: START });
    await h.store.create({ ...base, id: "was-pending", status: "pending", attempts: 0 });
    await h.store.create({ ...base, id: "was-done", status: "completed", attempts: 1, completedAt: START });
    expect(await h.manager.recover()).toBe(2);
    expect(await h.manager.recover()).toBe(0); // the queue knows them now
    await h.manager.start({ concurrency: 2 });
    expect(await ended(h, "was-running")).toMatchObject({ status: "completed", attempts: 2 });
    expect(await ended(h, "was-pending")).toMatchObject({ status: "completed", attempts: 1 });
    expect(h.messages).toHaveLength(2);
  });

  it("retries posting the end message when the bus refuses it once", async () => {
    const messages: string[] = [];
    let refusals = 1;
    const h = await harness([{ text: "ok" }], {
      publishSystem: async (_sessionKey, content) => {
        if (refusals-- > 0) throw new Error("bus unavailable");
        messages.push(content);
      },
    });
    const task = await h.manager.create(SESSION, "quick");
    await ended(h, task.id);
    await vi.waitFor(() => expect(messages).toEqual(["Subagent [quick] (ID: task-1) completed.\n\nResult:\nok"]));
  });

  it("deletes a task, cancelling it first when it has not finished", async () => {
    const h = await harness([], { start: false });
    const task = await h.manager.create(SESSION, "to be deleted");
    expect(await h.manager.delete(task.id)).toBe(true);
    expect(await h.manager.get(task.id)).toBeUndefined();
    expect(h.messages.map((message) => message.content)).toEqual(["Subagent [to be deleted] (ID: task-1) was cancelled."]);
    expect(await h.manager.delete(task.id)).toBe(false);
  });

  it("lets notice listeners come and go, and survives one that throws", async () => {
    const h = await harness([{ text: "ok" }, { text: "ok" }]);
    const seen: string[] = [];
    const stop = h.manager.onNotify((notice) => seen.push(`${notice.type}:${notice.task.id}`));
    h.manager.onNotify(() => {
      throw new Error("listener bug");
    });
    await ended(h, (await h.manager.create(SESSION, "first")).id);
    stop();
    await ended(h, (await h.manager.create(SESSION, "second")).id);
    expect(seen).toEqual(["started:task-1", "completed:task-1"]);
    expect(h.messages).toHaveLength(2);
  });
});

describe("subagent runner", () => {
  it("returns the closing message as the report, and the whole text with the note at the iteration cap", async () => {
    const noop = defineTool({ name: "noop", description: "Does nothing.", parameters: z.object({}), execute: async () => "ok" });
    const tools = new ToolRegistry().register(noop);
    const task: SubagentTask = { id: "t", label: "l", task: "do it", sessionKey: "cli:local", status: "running", progress: 0, toolCalls: [], createdAt: START, attempts: 1 };
    const signal = new AbortController().signal;

    const finished = createSubagentRunner({ model: scriptedModel([{ text: "Checking.", toolCalls: [{ name: "noop", arguments: {} }] }, { text: "All good." }]), tools, workspace });
    expect(await finished(task, signal, () => undefined)).toBe("All good.");

    const capped = createSubagentRunner({ model: scriptedModel(() => ({ text: "again", toolCalls: [{ name: "noop", arguments: {} }] })), tools, workspace, maxIterations: 2 });
    const progress: number[] = [];
    const report = await capped(task, signal, (update) => void progress.push(update.progress));
    expect(report).toBe(`again\n\nagain\n\n${limitNote(2)}`);
    expect(progress).toEqual([5, 10]);
  });

  it("throws on a cancelled run", async () => {
    const controller = new AbortController();
    const runner = createSubagentRunner({ model: scriptedModel([{ hang: true }]), tools: new ToolRegistry(), workspace });
    const task: SubagentTask = { id: "t", label: "l", task: "do it", sessionKey: "cli:local", status: "running", progress: 0, toolCalls: [], createdAt: START, attempts: 1 };
    const run = runner(task, controller.signal, () => undefined);
    controller.abort();
    await expect(run).rejects.toMatchObject({ name: "CancelledError" });
  });
});

describe("subagent tools", () => {
  it("offers files, exec with a 300 s limit and web fetch; no spawn, message or memory", () => {
    const config = ConfigSchema.parse({});
    const tools = createSubagentTools(config, { findExecutable: () => undefined });
    expect(tools.names()).toEqual(["read_file", "list_dir", "write_file", "edit_file", "exec", "web_fetch"]);
    expect(tools.get("exec")!.description).toContain(`${SUBAGENT_EXEC_TIMEOUT_SECONDS} s`);

    const withSearch = createSubagentTools({ tools: { ...config.tools, braveApiKey: "key" } }, { findExecutable: () => undefined });
    expect(withSearch.names()).toContain("web_search");
    const withoutShell = createSubagentTools({ tools: { ...config.tools, exec: { ...config.tools.exec, enabled: false }, web: { ...config.tools.web, enabled: false } } });
    expect(withoutShell.names()).toEqual(["read_file", "list_dir", "write_file", "edit_file"]);
  });

  it("refuses a destructive command in the subagent's exec", async () => {
    const tools = createSubagentTools(ConfigSchema.parse({}), { findExecutable: () => undefined });
    const outcome = await tools.execute({ id: "c", name: "exec", arguments: JSON.stringify({ command: "rm -rf /" }) }, toolContext());
    expect(outcome.content).toMatch(/^Error: command refused/);
  });
});

describe("subagentEndMessage", () => {
  it("shortens a very long result and points to the whole one", () => {
    const task: SubagentTask = { id: "t1", label: "big", task: "x", sessionKey: SESSION, status: "completed", result: "y".repeat(20_000), progress: 100, toolCalls: [], createdAt: START, attempts: 1 };
    const message = subagentEndMessage(task);
    expect(message.length).toBeLessThan(8_300);
    expect(message).toContain("countbot tasks show t1");
  });
});
