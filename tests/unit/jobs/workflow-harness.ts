/**
 * A workflow engine on the in-process queue and the file store, with a fake model per agent that
 * answers by what the node was asked (its system prompt and input) and can hold a call until the
 * test lets it go: how the tests see which nodes run at the same time without measuring time.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { TeamDefinitionSchema, type TeamAgent } from "../../../src/config/team.js";
import { createInProcessQueue } from "../../../src/jobs/in-process-queue.js";
import type { JobFailure, JobQueue } from "../../../src/jobs/job-queue.js";
import { type WorkflowEngine, type WorkflowJobData, type WorkflowNotice, createWorkflowEngine } from "../../../src/jobs/workflows/engine.js";
import { createTeamAgentRunner } from "../../../src/jobs/workflows/runner.js";
import type { ChatModel, ChatRequest, StreamPart } from "../../../src/providers/chat-model.js";
import { createFileRunStore } from "../../../src/store/file-workflow-runs.js";
import type { WorkflowRunStore } from "../../../src/store/store.js";
import type { TeamRecord, WorkflowRun } from "../../../src/store/team-record.js";
import { ToolRegistry } from "../../../src/tools/registry.js";
import type { Tool } from "../../../src/tools/tool.js";

export interface ModelCall {
  /** The model id the agent resolved to. */
  model: string;
  /** The agent (or `_synthesis`) whose prompt this is, read from the system prompt. */
  role: string;
  system: string;
  input: string;
  temperature?: number;
  /** Tool results seen so far in this node's loop. */
  toolResults: number;
  signal?: AbortSignal;
}

export type Answer = { text: string } | { tool: string; arguments?: Record<string, unknown> } | { error: Error } | { hang: true };
export type Respond = (call: ModelCall) => Answer | Promise<Answer>;

export interface WorkflowHarness {
  engine: WorkflowEngine;
  runs: WorkflowRunStore;
  queue: JobQueue<WorkflowJobData>;
  calls: ModelCall[];
  /** Calls in flight now, and the most there ever were. */
  active: { now: number; max: number };
  messages: Array<{ sessionKey: string; content: string; id: string }>;
  notices: WorkflowNotice[];
  failures: Array<{ id: string; failure: JobFailure }>;
  /** Resolves once the run has ended (and its end message was posted, when it has a session). */
  ended(runId: string): Promise<WorkflowRun>;
  close(): Promise<void>;
}

export interface HarnessOptions {
  respond: Respond;
  tools?: Tool[];
  perRun?: number;
  perSession?: number;
  concurrency?: number;
  /** Share the runs of an earlier harness (a restart over the same data). */
  directory?: string;
  /** Don't start processing jobs. */
  idle?: boolean;
}

let ids = 0;

export function team(definition: Omit<Partial<TeamRecord>, "agents"> & { agents: Array<Partial<TeamAgent> & { id: string }> }): TeamRecord {
  const parsed = TeamDefinitionSchema.parse({
    name: "Team",
    mode: "graph",
    ...definition,
    agents: definition.agents.map((agent) => ({ role: agent.id, ...agent })),
  });
  return { id: definition.id ?? `team-${++ids}`, createdAt: 1, updatedAt: 1, ...parsed };
}

/** Gates: `hold(key)` returns a promise that `release(key)` resolves; `waitFor(key)` resolves when a call has reached the gate. */
export function gates() {
  const waiting = new Map<string, { reached: () => void; reachedPromise: Promise<void>; release: () => void; released: Promise<void> }>();
  const entry = (key: string) => {
    let found = waiting.get(key);
    if (!found) {
      let reached!: () => void;
      let release!: () => void;
      const reachedPromise = new Promise<void>((resolve) => (reached = resolve));
      const released = new Promise<void>((resolve) => (release = resolve));
      found = { reached, reachedPromise, release, released };
      waiting.set(key, found);
    }
    return found;
  };
  return {
    async hold(key: string): Promise<void> {
      const gate = entry(key);
      gate.reached();
      await gate.released;
    },
    release: (key: string) => entry(key).release(),
    reached: (key: string) => entry(key).reachedPromise,
  };
}

export async function workflowHarness(options: HarnessOptions): Promise<WorkflowHarness> {
  const directory = options.directory ?? (await mkdtemp(path.join(tmpdir(), "countbot-workflows-")));
  const runs = createFileRunStore({ directory });
  const calls: ModelCall[] = [];
  const active = { now: 0, max: 0 };
  const messages: WorkflowHarness["messages"] = [];
  const notices: WorkflowNotice[] = [];
  const failures: WorkflowHarness["failures"] = [];
  const endWaiters = new Map<string, Array<(run: WorkflowRun) => void>>();

  const modelFor = (id: string): ChatModel => ({
    id,
    async *stream(request: Omit<ChatRequest, "model">): AsyncIterable<StreamPart> {
      const system = String(request.messages[0]?.content ?? "");
      const input = String(request.messages[1]?.content ?? "");
      const role = /^# Council synthesis/.test(system) ? "_synthesis" : (/^You are (.+?), one agent/m.exec(system)?.[1] ?? "?");
      const call: ModelCall = { model: id, role, system, input, temperature: request.temperature, toolResults: request.messages.filter((message) => message.role === "tool").length, signal: request.signal };
      calls.push(call);
      active.now += 1;
      active.max = Math.max(active.max, active.now);
      try {
        const answer = await options.respond(call);
        if ("error" in answer) throw answer.error;
        if ("hang" in answer) {
          await new Promise<void>((_resolve, reject) => {
            const fail = () => reject(request.signal?.reason ?? new Error("aborted"));
            if (request.signal?.aborted) fail();
            request.signal?.addEventListener("abort", fail, { once: true });
          });
        }
        if ("text" in answer) yield { type: "text-delta", text: answer.text };
        if ("tool" in answer) yield { type: "tool-call", call: { id: `call-${calls.length}`, name: answer.tool, arguments: JSON.stringify(answer.arguments ?? {}) } };
        yield { type: "finish", reason: "tool" in answer ? "tool-calls" : "stop", usage: { inputTokens: 1, outputTokens: 1 }, model: id };
      } finally {
        active.now -= 1;
      }
    },
  });

  const tools = new ToolRegistry();
  for (const tool of options.tools ?? []) tools.register(tool);
  const runAgent = createTeamAgentRunner({
    resolveModel: (owner, agent) => modelFor(agent?.model ?? owner.modelConfig?.model ?? "default/model"),
    tools,
    workspace: directory,
    retryDelayMs: 0,
    defaults: { temperature: 0.7, maxTokens: 100 },
  });
  const queue = createInProcessQueue<WorkflowJobData>({
    name: "workflows",
    events: {
      onFailed: async (job, failure) => {
        failures.push({ id: job.id, failure });
        await engine.handleFailed(job, failure);
      },
    },
  });
  let runIds = 0;
  const engine = createWorkflowEngine({
    runs,
    queue,
    runAgent,
    publishSystem: async (sessionKey, content, id) => {
      messages.push({ sessionKey, content, id });
    },
    notify: (notice) => {
      notices.push(structuredClone(notice));
      if (notice.type === "run-completed" || notice.type === "run-failed" || notice.type === "run-cancelled") {
        // Resolved after the end message is posted: announce runs right after the notice.
        setImmediate(() => {
          for (const resolve of endWaiters.get(notice.run.id) ?? []) resolve(notice.run);
          endWaiters.delete(notice.run.id);
        });
      }
    },
    limits: { perRun: options.perRun ?? 8, perSession: options.perSession ?? 3 },
    promptContext: () => ({ workspace: directory, toolNames: tools.names() }),
    newId: () => `run-${++runIds}`,
    publishRetryDelaysMs: [0],
  });
  if (!options.idle) await engine.process({ concurrency: options.concurrency ?? 16 });

  return {
    engine,
    runs,
    queue,
    calls,
    active,
    messages,
    notices,
    failures,
    ended(runId) {
      return new Promise((resolve) => {
        // Listen first, then look: an end between the two is not missed.
        endWaiters.set(runId, [...(endWaiters.get(runId) ?? []), resolve]);
        void runs.get(runId).then((run) => {
          if (run && ["completed", "failed", "cancelled"].includes(run.status)) resolve(run);
        });
      });
    },
    async close() {
      await engine.close(0);
      await runs.close();
      if (!options.directory) await rm(directory, { recursive: true, force: true });
    },
  };
}
