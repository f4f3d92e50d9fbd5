/**
 * The tasks API, in the JSON shape the Python CountBot's front end reads (snake_case, times as ISO
 * strings or null):
 *
 *   GET    /api/tasks?session_id=&status=&limit=   newest first, without tool calls
 *   GET    /api/tasks/stats                        { total, pending, running, completed, failed, cancelled }
 *   GET    /api/tasks/:id                          one task with its tool calls
 *   POST   /api/tasks/:id/cancel                   409 when it has finished already
 *   DELETE /api/tasks/:id                          409 while it is pending or running
 *
 * Register it inside the scope that checks the bearer token: tasks carry what users asked for.
 */
import type { FastifyInstance } from "fastify";
import { z } from "zod";
import { FINISHED_STATUSES, type SubagentTask, type TaskStats, TaskStatusSchema } from "../store/task-record.js";
import type { TaskStore } from "../store/store.js";
import { RequestError, parseRequest } from "../gateway/http-request.js";

export interface TaskRoutesOptions {
  tasks: Pick<TaskStore, "get" | "list" | "delete" | "stats">;
  /**
   * Cancels a task wherever it runs (another worker, say) and returns it as it is afterwards, or
   * undefined when it does not exist. Called only for a task that was pending or running.
   */
  cancel: (id: string) => Promise<SubagentTask | undefined>;
}

/** Lists return this many tasks unless `limit` says otherwise. */
export const DEFAULT_TASK_LIST_LIMIT = 100;
const MAX_TASK_LIST_LIMIT = 1_000;

// A web form sends `status=` for "any status": an empty filter is no filter.
const emptyAsMissing = (value: unknown) => (value === "" ? undefined : value);

const TaskListQuerySchema = z.strictObject({
  session_id: z.preprocess(emptyAsMissing, z.string().max(256).optional()),
  status: z.preprocess(emptyAsMissing, TaskStatusSchema.optional()),
  limit: z.preprocess(
    emptyAsMissing,
    z
      .string()
      .regex(/^\d+$/, "a whole number")
      .transform(Number)
      .pipe(z.number().int().min(1).max(MAX_TASK_LIST_LIMIT))
      .default(DEFAULT_TASK_LIST_LIMIT),
  ),
});

const TaskParamsSchema = z.object({
  id: z
    .string()
    .min(1)
    .max(128)
    .regex(/^[\w.:-]+$/, "letters, digits, _ . : and - only"),
});

const TaskToolCallJsonSchema = z.object({
  name: z.string(),
  success: z.boolean(),
  duration_ms: z.number(),
  arguments: z.string(),
  result: z.string(),
});

/** One task in a list. */
export const TaskSummaryJsonSchema = z.object({
  task_id: z.string(),
  label: z.string(),
  /** What the subagent was asked to do. */
  message: z.string(),
  session_id: z.string(),
  status: TaskStatusSchema,
  progress: z.number(),
  result: z.string().nullable(),
  error: z.string().nullable(),
  created_at: z.string(),
  started_at: z.string().nullable(),
  completed_at: z.string().nullable(),
});
export type TaskSummaryJson = z.infer<typeof TaskSummaryJsonSchema>;

/** One task on its own: the summary plus its tool calls and how many runs it took. */
export const TaskDetailJsonSchema = TaskSummaryJsonSchema.extend({
  attempts: z.number(),
  tool_calls: z.array(TaskToolCallJsonSchema),
});
export type TaskDetailJson = z.infer<typeof TaskDetailJsonSchema>;

/** What 409 answers carry: why, and the status that stood in the way. */
export const TaskConflictJsonSchema = z.object({ error: z.string(), task_id: z.string(), status: TaskStatusSchema });

export function toTaskSummaryJson(task: SubagentTask): TaskSummaryJson {
  return {
    task_id: task.id,
    label: task.label,
    message: task.task,
    session_id: task.sessionKey,
    status: task.status,
    progress: task.progress,
    result: task.result ?? null,
    error: task.error ?? null,
    created_at: isoTime(task.createdAt),
    started_at: task.startedAt === undefined ? null : isoTime(task.startedAt),
    completed_at: task.completedAt === undefined ? null : isoTime(task.completedAt),
  };
}

export function toTaskDetailJson(task: SubagentTask): TaskDetailJson {
  return {
    ...toTaskSummaryJson(task),
    attempts: task.attempts,
    tool_calls: task.toolCalls.map((call) => ({
      name: call.name,
      success: call.success,
      duration_ms: call.durationMs,
      arguments: call.arguments,
      result: call.result,
    })),
  };
}

export function registerTaskRoutes(scope: FastifyInstance, options: TaskRoutesOptions): void {
  const { tasks, cancel } = options;

  async function find(params: unknown): Promise<SubagentTask> {
    const { id } = parseRequest(TaskParamsSchema, params, "params");
    const task = await tasks.get(id);
    if (!task) throw new RequestError(`task ${id} not found`, 404);
    return task;
  }

  scope.get("/api/tasks", async (request) => {
    const query = parseRequest(TaskListQuerySchema, request.query, "query");
    const found = await tasks.list({ sessionKey: query.session_id, status: query.status, limit: query.limit });
    return found.map(toTaskSummaryJson);
  });

  // Before `/:id`, so "stats" is never taken for a task id.
  scope.get("/api/tasks/stats", async (): Promise<TaskStats> => {
    const stats = await tasks.stats();
    return {
      total: stats.total,
      pending: stats.pending,
      running: stats.running,
      completed: stats.completed,
      failed: stats.failed,
      cancelled: stats.cancelled,
    };
  });

  scope.get("/api/tasks/:id", async (request) => toTaskDetailJson(await find(request.params)));

  scope.post("/api/tasks/:id/cancel", async (request, reply) => {
    const task = await find(request.params);
    if (FINISHED_STATUSES.has(task.status)) return reply.code(409).send(conflict(task, `task ${task.id} has already ${task.status === "cancelled" ? "been cancelled" : task.status}`));
    const after = await cancel(task.id);
    if (!after) throw new RequestError(`task ${task.id} not found`, 404);
    // It may have finished on its own between the look-up and the cancel.
    if (FINISHED_STATUSES.has(after.status) && after.status !== "cancelled") return reply.code(409).send(conflict(after, `task ${after.id} ${after.status} before it could be cancelled`));
    request.log.info({ taskId: after.id, sessionKey: after.sessionKey, status: after.status }, "task cancelled through the API");
    return toTaskDetailJson(after);
  });

  scope.delete("/api/tasks/:id", async (request, reply) => {
    const task = await find(request.params);
    if (!FINISHED_STATUSES.has(task.status)) return reply.code(409).send(conflict(task, `task ${task.id} is still ${task.status}: cancel it first`));
    if (!(await tasks.delete(task.id))) throw new RequestError(`task ${task.id} not found`, 404);
    request.log.info({ taskId: task.id, sessionKey: task.sessionKey }, "task deleted through the API");
    return { task_id: task.id, deleted: true };
  });
}

function conflict(task: SubagentTask, error: string): z.infer<typeof TaskConflictJsonSchema> {
  return { error, task_id: task.id, status: task.status };
}

function isoTime(ms: number): string {
  return new Date(ms).toISOString();
}
