/**
 * The SubagentManager: the main agent hands a task to a background worker of its own. It creates tasks, runs them as jobs on a JobQueue, cancels,
 * lists and cleans them up, and tells the origin chat how each one ended.
 *
 * Every status change is a compare-and-set on the TaskStore, so whichever of "finished", "failed",
 * "cancelled" and "its worker was lost" comes first wins, and only the winner posts the one
 * `system` message into the origin session (the main agent turns it into a reply in that chat).
 * A task is never left "running": the handler ends it, or the queue's onFailed (`handleFailed`)
 * does when the handler could not (its process died too often, the queue shut down, a cancel
 * reached the queue directly).
 */
import { randomUUID } from "node:crypto";
import type { Logger } from "pino";
import { z } from "zod";
import { ToolError, errorMessage } from "../../errors.js";
import { sleep } from "../../sleep.js";
import type { TaskStore } from "../../store/store.js";
import type { Job, JobFailure, JobQueue, ProcessOptions } from "../job-queue.js";
import { FINISHED_STATUSES, type SubagentTask, type TaskStats, type TaskStatus, type TaskToolCall } from "./task.js";

/** The BullMQ queue name of subagent jobs. */
export const SUBAGENT_QUEUE = "subagents";
/** The job name of a subagent run. */
export const SUBAGENT_JOB = "subagent";

export const SubagentJobDataSchema = z.object({
  taskId: z.string().min(1),
  /** Re-queued by `recover` after its process went away: it may find its task still "running". */
  recovered: z.boolean().optional(),
});
export type SubagentJobData = z.infer<typeof SubagentJobDataSchema>;

export type SubagentNoticeType = "started" | "progress" | "completed" | "failed" | "cancelled";
export interface SubagentNotice {
  type: SubagentNoticeType;
  task: SubagentTask;
}
export type SubagentNotify = (notice: SubagentNotice) => void;

/** What a run reports after each tool call: the new progress (0-90) and the call. */
export interface TaskProgress {
  progress: number;
  toolCall?: TaskToolCall;
}

/**
 * Runs one task to its result text. Throws on failure; throws once `signal` fired (cancel or
 * shutdown). See ./runner.ts.
 */
export type RunSubagentTask = (task: SubagentTask, signal: AbortSignal, onProgress: (update: TaskProgress) => void | Promise<void>) => Promise<string>;

export interface SubagentLimits {
  /** Pending and running tasks one session may have; the next spawn is refused. */
  perSession: number;
  /** Pending and running tasks of the whole deployment; unset: no limit beyond the queue's concurrency. */
  total?: number;
}

export interface SubagentManagerOptions {
  store: TaskStore;
  queue: JobQueue<SubagentJobData>;
  runTask: RunSubagentTask;
  /** Posts a `system` message whose chatId is the session key, so the origin chat hears of it. */
  /** `profile`: the task's agent profile, so the chat's answer to its end comes from the same one. */
  publishSystem: (sessionKey: string, content: string, profile?: string) => Promise<void>;
  /** Told of every start, progress step and end (WebSocket notices); must not throw. */
  notify?: SubagentNotify;
  limits: SubagentLimits;
  /** Clock in ms since epoch; injected so tests are deterministic. */
  now?: () => number;
  /** Task ids; the job id is the task id, so no `:` and not an integer. Default: random UUIDs. */
  newId?: () => string;
  logger?: Logger;
  /** Waits between attempts to post the end message; injectable for tests. Default 1 s, then 5 s. */
  publishRetryDelaysMs?: number[];
}

export interface SubagentManager {
  /** Creates a pending task and queues it. ToolError when the session or the deployment is at its limit. */
  /** `person`: whose budget the task counts against (`channel:senderId`), when a person asked for it. */
  /** `profile`: the agent profile it runs as (its workspace, tools and models), that of the chat that spawned it. */
  create(sessionKey: string, task: string, label?: string, person?: string, profile?: string): Promise<SubagentTask>;
  /** The queue's job handler: runs the task and records how it ended. */
  execute(job: Job<SubagentJobData>): Promise<void>;
  /** The queue's onFailed: ends the task the handler could not (lost, error, cancelled). */
  handleFailed(job: { id: string; data: SubagentJobData }, failure: JobFailure): Promise<void>;
  /** Starts running subagent jobs in this process. */
  start(options: ProcessOptions): Promise<void>;
  /**
   * Queues again every pending or running task whose job the queue does not know (a crash between
   * create and queueing, or an embedded process that died with tasks running). Returns how many.
   */
  recover(): Promise<number>;
  /** Cancels a pending or running task wherever it runs. The task as it is afterwards; undefined when unknown. */
  cancel(id: string): Promise<SubagentTask | undefined>;
  get(id: string): Promise<SubagentTask | undefined>;
  list(filter?: { status?: TaskStatus; sessionKey?: string; limit?: number }): Promise<SubagentTask[]>;
  /** Running tasks, newest first (of one session when given). */
  running(sessionKey?: string): Promise<SubagentTask[]>;
  runningCount(): Promise<number>;
  /** Deletes a task, cancelling it first when it has not finished. */
  delete(id: string): Promise<boolean>;
  stats(): Promise<TaskStats>;
  /** Deletes finished tasks that ended more than `maxAgeMs` ago (24 h by default); returns how many. */
  cleanup(maxAgeMs?: number): Promise<number>;
  /** Adds a notice listener; returns its removal. */
  onNotify(callback: SubagentNotify): () => void;
}

const DAY_MS = 24 * 60 * 60 * 1000;
const LABEL_LENGTH = 30;
/** A task run this often (the first run included) whose process went away is failed, not run again. */
const MAX_RUNS = 2;
/** Tool calls kept on a task. */
const MAX_TOOL_CALLS = 100;
/** Progress stays below this until the task has finished. */
const MAX_RUNNING_PROGRESS = 90;
/** The longest result quoted in the end message; the whole result stays on the task. */
const MAX_MESSAGE_RESULT = 8_000;
const UNFINISHED: TaskStatus[] = ["pending", "running"];

/** The label a task gets without one: its first 30 characters, whitespace collapsed. */
export function defaultLabel(task: string): string {
  return [...task.replace(/\s+/g, " ").trim()].slice(0, LABEL_LENGTH).join("").trimEnd();
}

/** The `system` message that tells the origin session how a task ended. */
export function subagentEndMessage(task: SubagentTask): string {
  const head = `Subagent [${task.label}] (ID: ${task.id})`;
  if (task.status === "completed") {
    const result = task.result ?? "";
    const quoted =
      result.length <= MAX_MESSAGE_RESULT
        ? result
        : `${result.slice(0, MAX_MESSAGE_RESULT)}\n\n[result shortened: ${result.length} characters in all; \`countbot tasks show ${task.id}\` has the whole text]`;
    return `${head} completed.\n\nResult:\n${quoted}`;
  }
  if (task.status === "failed") return `${head} failed: ${task.error ?? "unknown error"}`;
  if (task.status === "cancelled") return `${head} was cancelled.`;
  throw new Error(`task ${task.id} has not ended (${task.status})`);
}

/** What the manager's parts share: its options, its clock, its notices and the one way a task ends. */
interface ManagerContext {
  options: SubagentManagerOptions;
  now: () => number;
  emit(type: SubagentNoticeType, task: SubagentTask): void;
  /**
   * Ends a task if its status is still one of `from`: the compare-and-set decides which ending
   * wins, and only the winner notifies and posts the message. Undefined when another ending won.
   */
  end(id: string, patch: Partial<SubagentTask>, from: TaskStatus[], beforeAnnounce?: () => Promise<void>): Promise<SubagentTask | undefined>;
}

/**
 * How tasks end and are told: the notice listeners (one that throws is logged, not fatal), and the
 * end message posted to the origin chat with retries (`publishRetryDelaysMs`) after an ending wins.
 */
function createEndings(options: SubagentManagerOptions, now: () => number, listeners: ReadonlySet<SubagentNotify>): Pick<ManagerContext, "emit" | "end"> {
  const { store, logger } = options;
  const retryDelays = options.publishRetryDelaysMs ?? [1_000, 5_000];

  function emit(type: SubagentNoticeType, task: SubagentTask): void {
    for (const listener of listeners) {
      try {
        listener({ type, task });
      } catch (error) {
        logger?.warn({ err: error, taskId: task.id }, "a subagent notice listener threw");
      }
    }
  }

  async function announce(task: SubagentTask): Promise<void> {
    const content = subagentEndMessage(task);
    for (let attempt = 0; ; attempt++) {
      try {
        await options.publishSystem(task.sessionKey, content, task.profile);
        return;
      } catch (error) {
        const delay = retryDelays[attempt];
        if (delay === undefined) {
          logger?.error({ err: error, taskId: task.id, sessionKey: task.sessionKey }, "could not tell the chat how a subagent ended");
          return;
        }
        await sleep(delay);
      }
    }
  }

  async function end(id: string, patch: Partial<SubagentTask>, from: TaskStatus[], beforeAnnounce?: () => Promise<void>): Promise<SubagentTask | undefined> {
    const ended = await store.update(id, { ...patch, completedAt: now() }, from);
    if (!ended) return undefined;
    logger?.info({ taskId: id, jobId: id, sessionKey: ended.sessionKey, status: ended.status, error: ended.error }, "subagent ended");
    await beforeAnnounce?.();
    emit(ended.status as SubagentNoticeType, ended);
    await announce(ended);
    return ended;
  }

  return { emit, end };
}

/** Pending and running tasks of one session. */
async function unfinishedCount(store: TaskStore, sessionKey: string): Promise<number> {
  const counts = await Promise.all(UNFINISHED.map((status) => store.list({ status, sessionKey })));
  return counts.reduce((sum, tasks) => sum + tasks.length, 0);
}

/**
 * Creates a pending task and queues its job, within the session's and the deployment's limits (a
 * ToolError the model reads when one is reached). A task that cannot be queued is failed at once.
 */
async function createTask(context: ManagerContext, newId: () => string, request: { sessionKey: string; text: string; label?: string; person?: string; profile?: string }): Promise<SubagentTask> {
  const { options, now } = context;
  const { store, queue, logger } = options;
  const { sessionKey, text, label, person, profile } = request;
  const { perSession, total } = options.limits;
  if ((await unfinishedCount(store, sessionKey)) >= perSession) {
    throw new ToolError(
      `this chat already has ${perSession} subagent${perSession === 1 ? "" : "s"} pending or running, the most it may have`,
      "Wait until one of them finishes (you will be told), or do this work yourself in this turn.",
    );
  }
  if (total !== undefined) {
    const stats = await store.stats();
    if (stats.pending + stats.running >= total) {
      throw new ToolError(`${total} subagents are pending or running already, the most this deployment allows`, "Try again later, or do this work yourself in this turn.");
    }
  }
  const task: SubagentTask = {
    id: newId(),
    label: label?.trim() || defaultLabel(text),
    task: text,
    sessionKey,
    ...(person ? { person } : {}),
    ...(profile ? { profile } : {}),
    status: "pending",
    progress: 0,
    toolCalls: [],
    createdAt: now(),
    attempts: 0,
  };
  await store.create(task);
  try {
    await queue.add(SUBAGENT_JOB, { taskId: task.id }, { jobId: task.id });
  } catch (error) {
    // The caller hears of it from this throw; the task must not wait for a job that never comes.
    await store.update(task.id, { status: "failed", error: `it could not be queued: ${errorMessage(error)}`, completedAt: now() }, ["pending"]).catch(() => undefined);
    throw error;
  }
  logger?.info({ taskId: task.id, jobId: task.id, sessionKey, label: task.label }, "subagent queued");
  return task;
}

/**
 * The queue's job handler: runs the task, recording its progress and tool calls, and ends it. A
 * task whose worker died MAX_RUNS times is failed instead of run again; a shutdown rethrows, so the
 * queue runs it elsewhere.
 */
async function executeTask(context: ManagerContext, job: Job<SubagentJobData>): Promise<void> {
  const { options, now, emit, end } = context;
  const { store, logger } = options;
  const { taskId, recovered } = SubagentJobDataSchema.parse(job.data);
  const current = await store.get(taskId);
  // Deleted, cancelled before it started, or ended by an earlier run: nothing to do.
  if (!current || FINISHED_STATUSES.has(current.status)) return;
  const resumable = job.attempt > 1 || recovered === true;
  if (current.status === "running" && resumable && current.attempts >= MAX_RUNS) {
    const times = current.attempts === 2 ? "twice" : `${current.attempts} times`;
    await end(taskId, { status: "failed", error: `its worker died ${times} before it finished` }, ["running"]);
    return;
  }
  const started = await store.update(
    taskId,
    { status: "running", startedAt: now(), attempts: current.attempts + 1, progress: 0, toolCalls: [] },
    resumable ? UNFINISHED : ["pending"],
  );
  if (!started) return; // cancelled (or started by another run) meanwhile
  const log = logger?.child({ taskId, jobId: job.id, sessionKey: started.sessionKey });
  log?.info({ attempt: started.attempts }, "subagent started");
  emit("started", started);

  let progress = 0;
  const toolCalls: TaskToolCall[] = [];
  const onProgress = async (update: TaskProgress) => {
    if (update.toolCall) toolCalls.push(update.toolCall);
    progress = Math.max(progress, Math.min(MAX_RUNNING_PROGRESS, Math.round(update.progress)));
    try {
      const updated = await store.update(taskId, { progress, toolCalls: toolCalls.slice(-MAX_TOOL_CALLS) }, ["running"]);
      if (updated) emit("progress", updated);
    } catch (error) {
      log?.warn({ err: error }, "could not record subagent progress");
    }
  };

  let result: string;
  try {
    result = await options.runTask(started, job.signal, onProgress);
  } catch (error) {
    if (job.signal.aborted) {
      const after = await store.get(taskId);
      // cancel() ended it and told the chat already.
      if (!after || FINISHED_STATUSES.has(after.status)) return;
      // A shutdown: the queue runs it again elsewhere or reports it lost to handleFailed.
      throw error;
    }
    log?.warn({ err: error }, "subagent failed");
    await end(taskId, { status: "failed", error: errorMessage(error) }, ["running"]);
    return;
  }
  await end(taskId, { status: "completed", result, progress: 100 }, ["running"]);
}

export function createSubagentManager(options: SubagentManagerOptions): SubagentManager {
  const { store, queue, logger } = options;
  const now = options.now ?? Date.now;
  const newId = options.newId ?? randomUUID;
  const listeners = new Set<SubagentNotify>();
  if (options.notify) listeners.add(options.notify);
  // Creates run one at a time in this process, so two spawns cannot both take the last free slot.
  let creating: Promise<unknown> = Promise.resolve();

  const { emit, end } = createEndings(options, now, listeners);
  const context: ManagerContext = { options, now, emit, end };

  const manager: SubagentManager = {
    create(sessionKey, task, label, person, profile) {
      const text = task.trim();
      if (sessionKey === "") return Promise.reject(new Error("a subagent needs the session key it reports to"));
      if (text === "") return Promise.reject(new ToolError("the task is empty", "Describe the work for the subagent in `task`."));
      const created = creating.then(() => createTask(context, newId, { sessionKey, text, label, person, profile }));
      creating = created.catch(() => undefined);
      return created;
    },

    execute: (job) => executeTask(context, job),

    async handleFailed(job, failure) {
      const parsed = SubagentJobDataSchema.safeParse(job.data);
      if (!parsed.success) return;
      const { taskId } = parsed.data;
      if (failure.reason === "cancelled") {
        await end(taskId, { status: "cancelled" }, UNFINISHED);
      } else if (failure.reason === "lost") {
        await end(taskId, { status: "failed", error: `its worker stopped before it finished and it could not be run again (${failure.message})` }, UNFINISHED);
      } else {
        await end(taskId, { status: "failed", error: failure.message }, UNFINISHED);
      }
    },

    start(processOptions) {
      return queue.process((job) => manager.execute(job), processOptions);
    },

    async recover() {
      let queued = 0;
      for (const status of UNFINISHED) {
        for (const task of await store.list({ status })) {
          if (await queue.add(SUBAGENT_JOB, { taskId: task.id, recovered: true }, { jobId: task.id })) {
            logger?.warn({ taskId: task.id, jobId: task.id, sessionKey: task.sessionKey, status }, "subagent queued again: its job was gone");
            queued += 1;
          }
        }
      }
      return queued;
    },

    async cancel(id) {
      const cancelled = await end(id, { status: "cancelled" }, UNFINISHED, async () => {
        // Before the chat hears of it: the running tool and model stream stop now, wherever they run.
        await queue.cancel(id).catch((error: unknown) => logger?.warn({ err: error, taskId: id, jobId: id }, "could not cancel the subagent's job"));
      });
      return cancelled ?? (await store.get(id));
    },

    get: (id) => store.get(id),
    list: (filter) => store.list(filter),
    running: (sessionKey) => store.list({ status: "running", sessionKey }),
    runningCount: async () => (await store.stats()).running,

    async delete(id) {
      const task = await store.get(id);
      if (!task) return false;
      if (!FINISHED_STATUSES.has(task.status)) await manager.cancel(id);
      return store.delete(id);
    },

    stats: () => store.stats(),
    cleanup: (maxAgeMs = DAY_MS) => store.cleanup(now() - maxAgeMs),

    onNotify(callback) {
      listeners.add(callback);
      return () => void listeners.delete(callback);
    },
  };
  return manager;
}
