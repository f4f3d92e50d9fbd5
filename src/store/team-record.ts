/**
 * What the store keeps of agent teams and their runs: a team created through the API (its
 * definition, src/config/team.ts, plus an id and timestamps), and a workflow run with the state of
 * each of its nodes (status, input, output, tool calls, timing, error). The jobs that run teams
 * (src/jobs/workflows) use these records from here.
 */
import { z } from "zod";
import { TEAM_MODES, TeamNameSchema, checkTeam, teamShape } from "../config/team.js";
import { TaskToolCallSchema } from "./task-record.js";

export const TeamRecordSchema = z
  .strictObject({
    id: z.string().min(1).max(128),
    name: TeamNameSchema,
    ...teamShape,
    createdAt: z.number(),
    updatedAt: z.number(),
  })
  .superRefine(checkTeam);
export type TeamRecord = z.infer<typeof TeamRecordSchema>;

/** A create or replace the store refused: the id or the name (compared without case) belongs to another team. */
export class TeamConflictError extends Error {
  override name = "TeamConflictError";
  constructor(
    message: string,
    readonly field: "id" | "name",
  ) {
    super(message);
  }
}

export const RunStatusSchema = z.enum(["pending", "running", "completed", "failed", "cancelled"]);

/**
 * What started a run: `@Team` in a chat (`mention`), the agent's workflow_run tool (`tool`), the
 * HTTP API, the web console's form included (`api`), the OpenAI-compatible endpoint (`openai`).
 */
export const RunOriginSchema = z.enum(["mention", "tool", "api", "openai"]);
export type RunOrigin = z.infer<typeof RunOriginSchema>;
export type RunStatus = z.infer<typeof RunStatusSchema>;
export const FINISHED_RUN_STATUSES: ReadonlySet<RunStatus> = new Set(["completed", "failed", "cancelled"]);
/** When a finished run counts as ended for `cleanup`: its completion, or its creation if that was never stamped. */
export const runEndedAt = (run: { createdAt: number; completedAt?: number | undefined }): number => run.completedAt ?? run.createdAt;

/**
 * pending → queued (its job is on the queue) → running → completed | failed | cancelled; or, without
 * running: skipped (its condition did not hold), upstream-failed (a node it needs failed), cancelled.
 */
export const NodeStatusSchema = z.enum(["pending", "queued", "running", "completed", "failed", "skipped", "upstream-failed", "cancelled"]);
export type NodeStatus = z.infer<typeof NodeStatusSchema>;
export const SETTLED_NODE_STATUSES: ReadonlySet<NodeStatus> = new Set(["completed", "failed", "skipped", "upstream-failed", "cancelled"]);
/** Statuses that hold a slot of the run's concurrency. */
export const ACTIVE_NODE_STATUSES: ReadonlySet<NodeStatus> = new Set(["queued", "running"]);

export const NodeStateSchema = z.strictObject({
  /** The agent's id; council review nodes are `<id>.review`, the synthesis `_synthesis`. */
  id: z.string().min(1),
  agentId: z.string().min(1),
  kind: z.enum(["agent", "review", "synthesis"]),
  status: NodeStatusSchema,
  /** The prompt the agent was given. */
  input: z.string().optional(),
  output: z.string().optional(),
  error: z.string().optional(),
  toolCalls: z.array(TaskToolCallSchema),
  /** `provider/model` that answered. */
  model: z.string().optional(),
  /** Tokens its model calls took, as the provider reported them (nodes that finished). */
  usage: z.strictObject({ inputTokens: z.number(), outputTokens: z.number() }).optional(),
  queuedAt: z.number().optional(),
  startedAt: z.number().optional(),
  completedAt: z.number().optional(),
  /** Runs so far: 2 means its worker died and it ran again. */
  attempts: z.number().int().min(0),
});
export type NodeState = z.infer<typeof NodeStateSchema>;

export const WorkflowRunSchema = z.strictObject({
  id: z.string().min(1).max(128),
  teamId: z.string().min(1),
  teamName: z.string().min(1),
  mode: z.enum(TEAM_MODES),
  goal: z.string(),
  /** The session (`channel:chat_id`) that started it; progress and the result go there. Empty when started through the API. */
  sessionKey: z.string(),
  /** Absent on runs stored before it was recorded. */
  origin: RunOriginSchema.optional(),
  /** The platform message that started it (a chat's trigger): its status message and its result are threaded to it. */
  replyTo: z.string().optional(),
  /** `channel:senderId` of the person who started it: its model calls count against their budget. */
  person: z.string().optional(),
  /** The agent profile (src/config/agents.ts) of the chat that started it: it runs in that profile's workspace, on its tools. Absent: `default`. */
  profile: z.string().optional(),
  status: RunStatusSchema,
  /** The team as it was when the run started: later edits do not reach a running run. */
  team: TeamRecordSchema,
  /** In the team's order (council: round one, then reviews, then the synthesis). */
  nodes: z.array(NodeStateSchema).min(1),
  result: z.string().optional(),
  error: z.string().optional(),
  createdAt: z.number(),
  startedAt: z.number().optional(),
  completedAt: z.number().optional(),
});
export type WorkflowRun = z.infer<typeof WorkflowRunSchema>;

/** What `updateRun` may change. */
export const RunPatchSchema = WorkflowRunSchema.pick({ status: true, result: true, error: true, startedAt: true, completedAt: true }).partial().strict();
export type RunPatch = z.infer<typeof RunPatchSchema>;
/** What `updateNode` may change. */
export const NodePatchSchema = NodeStateSchema.omit({ id: true, agentId: true, kind: true }).partial().strict();
export type NodePatch = z.infer<typeof NodePatchSchema>;

export interface RunFilter {
  teamId?: string;
  sessionKey?: string;
  status?: RunStatus;
  limit?: number;
}

export interface NodeUpdateOptions {
  /** Apply only when the node's status is one of these. */
  from?: readonly NodeStatus[];
  /** Apply only when the run's status is one of these. */
  runFrom?: readonly RunStatus[];
  /** Apply only when fewer than this many other nodes of the run are queued or running (the per-run cap, checked in the same step). */
  maxActive?: number;
}

/** The record checked, with its undefined fields dropped (undefined means "not set" in both stores). */
export function validRecord<Schema extends z.ZodType>(schema: Schema, value: unknown, what: string): z.output<Schema> {
  const defined = dropUndefined(value);
  const parsed = schema.safeParse(defined);
  if (!parsed.success) throw new Error(`invalid ${what}: ${z.prettifyError(parsed.error)}`);
  return parsed.data;
}

function dropUndefined(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(dropUndefined);
  if (typeof value === "object" && value !== null) return Object.fromEntries(Object.entries(value).filter(([, item]) => item !== undefined).map(([key, item]) => [key, dropUndefined(item)]));
  return value;
}

/** Newest first; ties by id, descending (the order of a Redis ZREVRANGE). */
export function newestRunFirst(left: Pick<WorkflowRun, "id" | "createdAt">, right: Pick<WorkflowRun, "id" | "createdAt">): number {
  return right.createdAt - left.createdAt || (left.id < right.id ? 1 : left.id > right.id ? -1 : 0);
}

export function matchesRunFilter(run: Pick<WorkflowRun, "teamId" | "sessionKey" | "status">, filter: RunFilter): boolean {
  return (
    (filter.teamId === undefined || run.teamId === filter.teamId) &&
    (filter.sessionKey === undefined || run.sessionKey === filter.sessionKey) &&
    (filter.status === undefined || run.status === filter.status)
  );
}
