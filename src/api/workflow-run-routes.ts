/**
 * The workflow-runs API:
 *
 *   GET  /api/workflow-runs?team=&chat=&status=&limit=   newest first; `team` is a team's id or
 *                                                        name, `chat` a session key (`telegram:42`)
 *   POST /api/workflow-runs                              start one: `{ team, goal, chat? }` (`team` an
 *                                                        id or name; `chat` a session key that hears
 *                                                        the progress and the result); 201 with the run
 *   GET  /api/workflow-runs/:id                          one run with every node (status, input,
 *                                                        output, tool calls, times, error)
 *   POST /api/workflow-runs/:id/cancel                   409 when it has ended already
 *
 * The team a run carries is shown without its model settings. Register it inside the scope that
 * checks the bearer token.
 */
import type { FastifyInstance } from "fastify";
import { z } from "zod";
import { ToolError } from "../errors.js";
import { RequestError, parseRequest } from "../gateway/http-request.js";
import type { WorkflowEngine } from "../jobs/workflows/engine.js";
import type { TeamCatalog } from "../jobs/workflows/team-catalog.js";
import { FINISHED_RUN_STATUSES, type NodeState, RunStatusSchema, type WorkflowRun } from "../store/team-record.js";

export interface WorkflowRunRoutesOptions {
  workflows: Pick<WorkflowEngine, "get" | "list" | "cancel" | "start">;
  teams: Pick<TeamCatalog, "get" | "findByName">;
}

const DEFAULT_LIMIT = 100;
const emptyAsMissing = (value: unknown) => (value === "" ? undefined : value);

const RunListQuerySchema = z.strictObject({
  team: z.preprocess(emptyAsMissing, z.string().max(128).optional()),
  chat: z.preprocess(emptyAsMissing, z.string().max(256).optional()),
  status: z.preprocess(emptyAsMissing, RunStatusSchema.optional()),
  limit: z.preprocess(
    emptyAsMissing,
    z
      .string()
      .regex(/^\d+$/, "a whole number")
      .transform(Number)
      .pipe(z.number().int().min(1).max(1_000))
      .default(DEFAULT_LIMIT),
  ),
});

const StartRunBodySchema = z.strictObject({
  team: z.string().trim().min(1).max(128),
  goal: z
    .string()
    .max(20_000)
    .refine((goal) => goal.trim() !== "", "expected a goal, not only spaces"),
  chat: z.preprocess(
    emptyAsMissing,
    z
      .string()
      .max(256)
      .regex(/^[\w.-]+:[\w:.@-]+$/, "a session key `channel:chat_id`, e.g. web:my-chat")
      .optional(),
  ),
});

const RunParamsSchema = z.object({
  id: z
    .string()
    .min(1)
    .max(128)
    .regex(/^[\w.-]+$/, "letters, digits, _ . and - only"),
});

const iso = (ms: number | undefined) => (ms === undefined ? null : new Date(ms).toISOString());

function nodeJson(run: WorkflowRun, node: NodeState, detail: boolean) {
  const agent = run.team.agents.find((candidate) => candidate.id === node.agentId);
  return {
    id: node.id,
    agentId: node.agentId,
    kind: node.kind,
    role: node.kind === "synthesis" ? "synthesis" : (agent?.role ?? node.agentId),
    status: node.status,
    ...(detail ? { input: node.input ?? null, output: node.output ?? null, toolCalls: node.toolCalls } : {}),
    error: node.error ?? null,
    model: node.model ?? null,
    attempts: node.attempts,
    queuedAt: iso(node.queuedAt),
    startedAt: iso(node.startedAt),
    completedAt: iso(node.completedAt),
  };
}

/** A run as the API shows it; `detail` adds the nodes' input, output and tool calls, and the team. */
export function runJson(run: WorkflowRun, detail: boolean) {
  const { modelConfig: _secret, ...team } = run.team;
  return {
    id: run.id,
    teamId: run.teamId,
    teamName: run.teamName,
    mode: run.mode,
    goal: run.goal,
    chat: run.sessionKey || null,
    origin: run.origin ?? null,
    status: run.status,
    result: run.result ?? null,
    error: run.error ?? null,
    createdAt: iso(run.createdAt),
    startedAt: iso(run.startedAt),
    completedAt: iso(run.completedAt),
    durationMs: run.completedAt === undefined ? null : run.completedAt - run.createdAt,
    toolCalls: run.nodes.reduce((sum, node) => sum + node.toolCalls.length, 0),
    nodes: run.nodes.map((node) => nodeJson(run, node, detail)),
    ...(detail ? { team } : {}),
  };
}

export function registerWorkflowRunRoutes(scope: FastifyInstance, options: WorkflowRunRoutesOptions): void {
  const { workflows, teams } = options;

  async function find(params: unknown): Promise<WorkflowRun> {
    const { id } = parseRequest(RunParamsSchema, params, "params");
    const run = await workflows.get(id);
    if (!run) throw new RequestError(`workflow run ${id} not found`, 404);
    return run;
  }

  scope.get("/api/workflow-runs", async (request) => {
    const query = parseRequest(RunListQuerySchema, request.query, "query");
    let teamId: string | undefined;
    if (query.team !== undefined) {
      const team = (await teams.get(query.team)) ?? (await teams.findByName(query.team));
      if (!team) throw new RequestError(`team: no team has the id or name "${query.team}"`, 404);
      teamId = team.id;
    }
    const runs = await workflows.list({ teamId, sessionKey: query.chat, status: query.status, limit: query.limit });
    return runs.map((run) => runJson(run, false));
  });

  scope.post("/api/workflow-runs", async (request, reply) => {
    const body = parseRequest(StartRunBodySchema, request.body, "body");
    const team = (await teams.get(body.team)) ?? (await teams.findByName(body.team));
    if (!team) throw new RequestError(`team: no team has the id or name "${body.team}"`, 404);
    let run: WorkflowRun;
    try {
      run = await workflows.start({ team, goal: body.goal.trim(), sessionKey: body.chat ?? "", origin: "api" });
    } catch (error) {
      // A disabled team, or a chat with too many runs: said for the model, and as true for a person.
      if (error instanceof ToolError) throw new RequestError(error.hint ? `${error.message}. ${error.hint}` : error.message, 409);
      throw error;
    }
    request.log.info({ runId: run.id, team: team.name, sessionKey: run.sessionKey }, "workflow run started through the API");
    return reply.code(201).send(runJson(run, true));
  });

  scope.get("/api/workflow-runs/:id", async (request) => runJson(await find(request.params), true));

  scope.post("/api/workflow-runs/:id/cancel", async (request, reply) => {
    const run = await find(request.params);
    if (FINISHED_RUN_STATUSES.has(run.status)) {
      return reply.code(409).send({ error: `workflow run ${run.id} has already ${run.status === "cancelled" ? "been cancelled" : run.status}`, id: run.id, status: run.status });
    }
    const after = await workflows.cancel(run.id);
    if (!after) throw new RequestError(`workflow run ${run.id} not found`, 404);
    if (after.status !== "cancelled") return reply.code(409).send({ error: `workflow run ${after.id} ${after.status} before it could be cancelled`, id: after.id, status: after.status });
    request.log.info({ runId: after.id, sessionKey: after.sessionKey }, "workflow run cancelled through the API");
    return runJson(after, true);
  });
}
