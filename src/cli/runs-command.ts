/**
 * `countbot runs`: the operator's view of agent-team runs.
 *
 *   countbot runs list [--team NAME|ID] [--chat KEY] [--status STATUS] [--limit N]   newest first
 *   countbot runs show ID                                                          one run, node by node
 *   countbot runs cancel ID                                                        stop a running run
 *
 * `list` and `show` read the configured store; `cancel` asks the running process through its HTTP
 * API, which reaches whichever workers run the run's nodes (as `countbot tasks cancel` does).
 */
import { parseArgs } from "node:util";
import { z } from "zod";
import { createInfrastructure } from "../app/infrastructure.js";
import type { ResolvedConfig } from "../config/schema.js";
import { ConfigError } from "../errors.js";
import { type TeamCatalog, createTeamCatalog } from "../jobs/workflows/team-catalog.js";
import type { WorkflowRunStore } from "../store/store.js";
import { type RunFilter, RunStatusSchema, type WorkflowRun } from "../store/team-record.js";
import { type CliContext, loadCliConfig } from "./setup.js";
import { type ProcessApiAnswer, ProcessApiUnreachable, callProcessApi } from "./process-api.js";

const usage = "usage: countbot runs list [--team NAME|ID] [--chat KEY] [--status STATUS] [--limit N] | show ID | cancel ID";
const DEFAULT_LIST_LIMIT = 50;

class RunsCommandError extends Error {
  override name = "RunsCommandError";
}

export interface RunsCommandOptions extends CliContext {
  fetch?: typeof fetch;
  timeoutMs?: number;
}

export async function runRunsCommand(args: string[], options: RunsCommandOptions = {}): Promise<number> {
  const [action, ...rest] = args;
  try {
    switch (action) {
      case "list": {
        const { values, positionals } = parseArgs({
          args: rest,
          allowPositionals: true,
          options: { team: { type: "string" }, chat: { type: "string" }, status: { type: "string" }, limit: { type: "string" } },
        });
        if (positionals.length > 0) throw new ConfigError(usage);
        const filter: RunFilter = { sessionKey: values.chat, limit: DEFAULT_LIST_LIMIT };
        if (values.status !== undefined) {
          const parsed = RunStatusSchema.safeParse(values.status);
          if (!parsed.success) throw new ConfigError(`--status: expected one of ${RunStatusSchema.options.join(", ")}, got "${values.status}"`);
          filter.status = parsed.data;
        }
        if (values.limit !== undefined) {
          if (!/^\d+$/.test(values.limit) || Number(values.limit) < 1) throw new ConfigError(`--limit: expected a whole number above 0, got "${values.limit}"`);
          filter.limit = Number(values.limit);
        }
        return await withStore(options, async ({ runs, catalog }) => {
          if (values.team !== undefined) {
            const team = (await catalog.get(values.team)) ?? (await catalog.findByName(values.team));
            if (!team) throw new RunsCommandError(`--team: no team has the name or id "${values.team}"`);
            filter.teamId = team.id;
          }
          return listing(await runs.list(filter), filter.limit!);
        });
      }
      case "show": {
        const id = single(rest);
        return await withStore(options, async ({ runs }) => {
          const run = await runs.get(id);
          if (!run) throw new RunsCommandError(`workflow run ${id} not found; \`countbot runs list\` shows the runs`);
          return describeRun(run);
        });
      }
      case "cancel": {
        const id = single(rest);
        const { config } = loadCliConfig(options);
        process.stdout.write(`${await cancelThroughApi(config, id, options)}\n`);
        return 0;
      }
      default:
        throw new ConfigError(usage);
    }
  } catch (error) {
    if (!(error instanceof RunsCommandError)) throw error;
    process.stderr.write(`countbot: ${error.message}\n`);
    return 1;
  }
}

function single(args: string[]): string {
  if (args.length !== 1 || args[0]!.startsWith("-")) throw new ConfigError(usage);
  return args[0]!;
}

async function withStore(context: CliContext, read: (parts: { runs: WorkflowRunStore; catalog: TeamCatalog }) => Promise<string>): Promise<number> {
  const { config, logger } = loadCliConfig(context);
  const infrastructure = await createInfrastructure(config, logger);
  try {
    const catalog = createTeamCatalog({ store: infrastructure.store.teams, teams: config.teams });
    process.stdout.write(`${await read({ runs: infrastructure.store.runs, catalog })}\n`);
    return 0;
  } finally {
    await infrastructure.close();
  }
}

function listing(runs: WorkflowRun[], limit: number): string {
  if (runs.length === 0) return "no runs";
  const header = ["ID", "STATUS", "TEAM", "NODES", "CREATED", "CHAT", "GOAL"];
  const rows = runs.map((run) => [
    run.id,
    run.status,
    run.teamName,
    `${run.nodes.filter((node) => node.status === "completed").length}/${run.nodes.length}`,
    isoTime(run.createdAt),
    run.sessionKey || "-",
    shorten(run.goal, 40),
  ]);
  const widths = header.map((title, column) => Math.max(title.length, ...rows.map((row) => row[column]!.length)));
  const lines = [header, ...rows].map((row) => row.map((cell, column) => cell.padEnd(widths[column]!)).join("  ").trimEnd());
  if (runs.length === limit) lines.push(`(the newest ${limit}; --limit N shows more)`);
  return lines.join("\n");
}

function describeRun(run: WorkflowRun): string {
  const lines = [
    `id          ${run.id}`,
    `team        ${run.teamName} (${run.mode}, ${run.teamId})`,
    `status      ${run.status}`,
    `chat        ${run.sessionKey || "-"}`,
    `created     ${isoTime(run.createdAt)}`,
    `completed   ${run.completedAt === undefined ? "-" : `${isoTime(run.completedAt)} (${run.completedAt - run.createdAt} ms)`}`,
    "goal:",
    indent(run.goal),
    `nodes (${run.nodes.length}):`,
  ];
  for (const node of run.nodes) {
    const timing = node.startedAt !== undefined && node.completedAt !== undefined ? `, ${node.completedAt - node.startedAt} ms` : "";
    lines.push(`  ${node.id}  ${node.status}  ${node.toolCalls.length} tool call${node.toolCalls.length === 1 ? "" : "s"}, ${node.attempts} run${node.attempts === 1 ? "" : "s"}${timing}${node.model ? `, ${node.model}` : ""}`);
    if (node.error) lines.push(`    error: ${node.error}`);
    if (node.output) lines.push(indent(node.output, "    "));
  }
  if (run.result !== undefined) lines.push("result:", indent(run.result));
  if (run.error !== undefined) lines.push("problems:", indent(run.error));
  return lines.join("\n");
}

const CancelAnswerSchema = z.object({ status: RunStatusSchema.optional(), teamName: z.string().optional() });
const ErrorAnswerSchema = z.object({ error: z.string() });

async function cancelThroughApi(config: ResolvedConfig, id: string, options: RunsCommandOptions): Promise<string> {
  let answer: ProcessApiAnswer;
  try {
    answer = await callProcessApi(config, { method: "POST", path: `/api/workflow-runs/${encodeURIComponent(id)}/cancel` }, options);
  } catch (error) {
    if (error instanceof ProcessApiUnreachable) throw new RunsCommandError(error.message);
    throw error;
  }
  const { url, status, body } = answer;
  if (status >= 200 && status < 300) {
    const parsed = CancelAnswerSchema.safeParse(body);
    const team = parsed.success && parsed.data.teamName ? ` (${parsed.data.teamName})` : "";
    return `cancelled run ${id}${team}`;
  }
  if (status === 401 || status === 403) throw new RunsCommandError(`the API at ${url} refused the token (${status}): set api.token or COUNTBOT_API_TOKEN to the running process's token`);
  const error = ErrorAnswerSchema.safeParse(body);
  if (error.success && (status === 404 || status === 409)) throw new RunsCommandError(error.data.error);
  throw new RunsCommandError(`the API at ${url} answered ${status}${error.success ? `: ${error.data.error}` : ""}`);
}

function isoTime(ms: number): string {
  return new Date(ms).toISOString().replace(/\.\d{3}Z$/, "Z");
}

function shorten(text: string, width: number): string {
  const line = text.replace(/\s+/g, " ").trim();
  return line.length <= width ? line : `${line.slice(0, width - 1)}…`;
}

function indent(text: string, prefix = "  "): string {
  return text
    .split("\n")
    .map((line) => `${prefix}${line}`)
    .join("\n");
}
