/**
 * `countbot tasks`: the operator's view of subagent tasks.
 *
 *   countbot tasks list [--session KEY] [--status STATUS] [--limit N]   newest first
 *   countbot tasks show ID                                             one task in full
 *   countbot tasks cancel ID                                           stop a pending or running task
 *
 * `list` and `show` read the configured store (file store or Redis) and start no bus consumer.
 * `cancel` asks the running process through its HTTP API instead: only a running process can reach
 * the worker that runs the task.
 */
import { parseArgs } from "node:util";
import { z } from "zod";
import { createInfrastructure } from "../app/infrastructure.js";
import type { ResolvedConfig } from "../config/schema.js";
import { ConfigError } from "../errors.js";
import { type SubagentTask, TaskStatusSchema } from "../store/task-record.js";
import type { TaskStore } from "../store/store.js";
import { type ProcessApiAnswer, ProcessApiUnreachable, callProcessApi } from "./process-api.js";
import { type CliContext, loadCliConfig } from "./setup.js";

const usage = "usage: countbot tasks list [--session KEY] [--status STATUS] [--limit N] | show ID | cancel ID";

const DEFAULT_LIST_LIMIT = 50;
const LABEL_WIDTH = 40;

export interface TasksCommandOptions extends CliContext {
  /** How `cancel` reaches the API. Default: the global fetch. */
  fetch?: typeof fetch;
  /** How long `cancel` waits for the API to answer. Default 10 s. */
  timeoutMs?: number;
}

/** A failure the operator can act on: one line on stderr, exit 1. */
class TasksCommandError extends Error {
  override name = "TasksCommandError";
}

export async function runTasksCommand(args: string[], options: TasksCommandOptions = {}): Promise<number> {
  const [action, ...rest] = args;
  try {
    switch (action) {
      case "list": {
        const filter = parseListArguments(rest);
        return await withTaskStore(options, async (tasks) => listing(await tasks.list(filter), filter.limit));
      }
      case "show": {
        const id = singleId(rest);
        return await withTaskStore(options, async (tasks) => {
          const task = await tasks.get(id);
          if (!task) throw new TasksCommandError(`task ${id} not found; \`countbot tasks list\` shows the tasks`);
          return describeTask(task);
        });
      }
      case "cancel": {
        const id = singleId(rest);
        const { config } = loadCliConfig(options);
        process.stdout.write(`${await cancelThroughApi(config, id, options)}\n`);
        return 0;
      }
      default:
        throw new ConfigError(usage);
    }
  } catch (error) {
    if (!(error instanceof TasksCommandError)) throw error;
    process.stderr.write(`countbot: ${error.message}\n`);
    return 1;
  }
}

function parseListArguments(args: string[]): { sessionKey?: string; status?: SubagentTask["status"]; limit: number } {
  const { values, positionals } = parseArgs({
    args,
    allowPositionals: true,
    options: { session: { type: "string", short: "s" }, status: { type: "string" }, limit: { type: "string" } },
  });
  if (positionals.length > 0) throw new ConfigError(usage);
  let status: SubagentTask["status"] | undefined;
  if (values.status !== undefined) {
    const parsed = TaskStatusSchema.safeParse(values.status);
    if (!parsed.success) throw new ConfigError(`--status: expected one of ${TaskStatusSchema.options.join(", ")}, got "${values.status}"`);
    status = parsed.data;
  }
  let limit = DEFAULT_LIST_LIMIT;
  if (values.limit !== undefined) {
    limit = Number(values.limit);
    if (!/^\d+$/.test(values.limit) || limit < 1) throw new ConfigError(`--limit: expected a whole number above 0, got "${values.limit}"`);
  }
  return { sessionKey: values.session, status, limit };
}

function singleId(args: string[]): string {
  if (args.length !== 1 || args[0]!.startsWith("-")) throw new ConfigError(usage);
  return args[0]!;
}

async function withTaskStore(context: CliContext, read: (tasks: TaskStore) => Promise<string>): Promise<number> {
  const { config, logger } = loadCliConfig(context);
  const infrastructure = await createInfrastructure(config, logger);
  try {
    process.stdout.write(`${await read(infrastructure.store.tasks)}\n`);
    return 0;
  } finally {
    await infrastructure.close();
  }
}

function listing(tasks: SubagentTask[], limit: number): string {
  if (tasks.length === 0) return "no tasks";
  const header = ["ID", "STATUS", "PROGRESS", "CREATED", "SESSION", "LABEL"];
  const rows = tasks.map((task) => [task.id, task.status, `${task.progress}%`, isoTime(task.createdAt), task.sessionKey, shorten(task.label, LABEL_WIDTH)]);
  const widths = header.map((title, column) => Math.max(title.length, ...rows.map((row) => row[column]!.length)));
  const lines = [header, ...rows].map((row) => row.map((cell, column) => cell.padEnd(widths[column]!)).join("  ").trimEnd());
  if (tasks.length === limit) lines.push(`(the newest ${limit}; --limit N shows more)`);
  return lines.join("\n");
}

function describeTask(task: SubagentTask): string {
  const lines = [
    `id          ${task.id}`,
    `label       ${task.label}`,
    `status      ${task.status} (${task.progress}%)`,
    `session     ${task.sessionKey}`,
    `created     ${isoTime(task.createdAt)}`,
    `started     ${task.startedAt === undefined ? "-" : isoTime(task.startedAt)}`,
    `completed   ${task.completedAt === undefined ? "-" : isoTime(task.completedAt)}`,
    `attempts    ${task.attempts}`,
    "task:",
    indent(task.task),
  ];
  if (task.result !== undefined) lines.push("result:", indent(task.result));
  if (task.error !== undefined) lines.push("error:", indent(task.error));
  lines.push(`tool calls (${task.toolCalls.length}):`);
  for (const call of task.toolCalls) lines.push(`  ${call.name}  ${call.success ? "ok" : "failed"}  ${call.durationMs} ms  ${shorten(call.arguments, 80)}`);
  return lines.join("\n");
}

/** The bits of the API's answers `cancel` reads; anything else in them is ignored. */
const CancelAnswerSchema = z.object({ label: z.string().optional(), status: TaskStatusSchema.optional() });
const ErrorAnswerSchema = z.object({ error: z.string() });

async function cancelThroughApi(config: ResolvedConfig, id: string, options: TasksCommandOptions): Promise<string> {
  let answer: ProcessApiAnswer;
  try {
    answer = await callProcessApi(config, { method: "POST", path: `/api/tasks/${encodeURIComponent(id)}/cancel` }, options);
  } catch (error) {
    if (error instanceof ProcessApiUnreachable) throw new TasksCommandError(error.message);
    throw error;
  }
  const { url, status: code, body } = answer;
  if (code >= 200 && code < 300) {
    const parsed = CancelAnswerSchema.safeParse(body);
    const label = parsed.success && parsed.data.label ? ` (${parsed.data.label})` : "";
    const status = parsed.success ? parsed.data.status : undefined;
    return status === undefined || status === "cancelled" ? `cancelled task ${id}${label}` : `cancel requested for task ${id}${label}; it is still ${status}`;
  }
  if (code === 401 || code === 403) {
    throw new TasksCommandError(`the API at ${url} refused the token (${code}): set api.token or COUNTBOT_API_TOKEN to the running process's token`);
  }
  const error = ErrorAnswerSchema.safeParse(body);
  if (error.success && (code === 404 || code === 409)) throw new TasksCommandError(error.data.error);
  throw new TasksCommandError(`the API at ${url} answered ${code}${error.success ? `: ${error.data.error}` : ""}`);
}

function isoTime(ms: number): string {
  return new Date(ms).toISOString().replace(/\.\d{3}Z$/, "Z");
}

function shorten(text: string, width: number): string {
  const line = text.replace(/\s+/g, " ").trim();
  return line.length <= width ? line : `${line.slice(0, width - 1)}…`;
}

function indent(text: string): string {
  return text
    .split("\n")
    .map((line) => `  ${line}`)
    .join("\n");
}
