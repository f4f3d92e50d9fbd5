/**
 * The model `team:<name>`: the request's message is the goal of a run of that team, and the run's
 * result is the answer. The run is started as the agent-teams API starts one (no origin chat:
 * nothing is posted into a session when it ends) and its nodes run as jobs on whichever workers
 * are free; this side watches the run's record until it ends. A client that goes away cancels
 * the run.
 */
import { ToolError, errorMessage } from "../../errors.js";
import type { WorkflowEngine } from "../../jobs/workflows/engine.js";
import type { TeamCatalog } from "../../jobs/workflows/team-catalog.js";
import { sleep } from "../../sleep.js";
import { FINISHED_RUN_STATUSES, type WorkflowRun } from "../../store/team-record.js";
import type { Reply } from "./replies.js";
import { OpenAiError, type TokenCounts } from "./wire.js";

export const TEAM_MODEL_PREFIX = "team:";

export interface TeamRunnerOptions {
  teams: Pick<TeamCatalog, "enabled">;
  workflows: Pick<WorkflowEngine, "start" | "get" | "cancel">;
  /** How often the run's record is read while it runs. Default 500 ms. */
  pollIntervalMs?: number;
}

/** The team name of a `team:<name>` model; undefined for every other model (the agent). */
export function teamNameOf(model: string): string | undefined {
  return model.startsWith(TEAM_MODEL_PREFIX) ? model.slice(TEAM_MODEL_PREFIX.length).trim() : undefined;
}

/** Runs `team:<name>` requests to their result. */
export class TeamRunner {
  constructor(private readonly options: TeamRunnerOptions) {}

  /** The enabled teams, as model names (`team:<name>`). */
  async modelNames(): Promise<string[]> {
    return (await this.options.teams.enabled()).map((team) => `${TEAM_MODEL_PREFIX}${team.name}`);
  }

  /** Starts the named team on `goal`. OpenAiError (404, 409) when it cannot. */
  async start(name: string, goal: string): Promise<WorkflowRun> {
    const key = name.toLocaleLowerCase();
    const team = (await this.options.teams.enabled()).find((candidate) => candidate.name.toLocaleLowerCase() === key);
    if (!team) {
      throw new OpenAiError(`model: no enabled team is called "${name}" (GET /v1/models lists the models)`, 404, { param: "model", code: "model_not_found" });
    }
    try {
      return await this.options.workflows.start({ team, goal, sessionKey: "", origin: "openai" });
    } catch (error) {
      if (error instanceof ToolError) throw new OpenAiError(`could not start team "${team.name}": ${errorMessage(error)}`, 409, { code: "team_unavailable" });
      throw error;
    }
  }

  /** The run's result once it ended, with the tokens its agents used. Aborting cancels the run. */
  async result(started: WorkflowRun, signal: AbortSignal): Promise<Reply> {
    const { workflows } = this.options;
    const runId = started.id;
    let run: WorkflowRun | undefined = started;
    try {
      while (run && !FINISHED_RUN_STATUSES.has(run.status)) {
        await sleep(this.options.pollIntervalMs ?? 500, signal);
        run = await workflows.get(runId);
      }
    } catch (error) {
      // Nobody will read the result: the run has no chat to report to.
      if (signal.aborted) await workflows.cancel(runId).catch(() => undefined);
      throw error;
    }
    if (!run) throw new OpenAiError(`team run ${runId} disappeared before it ended`, 500, { type: "server_error", code: "team_run_lost" });
    if (run.status !== "completed") {
      const why = run.status === "cancelled" ? "was cancelled" : `failed: ${run.error ?? "unknown error"}`;
      throw new OpenAiError(`team "${run.teamName}" (run ${runId}) ${why}`, 502, { type: "server_error", code: `team_run_${run.status}` });
    }
    return { content: run.result ?? "", usage: usageOfRun(run) };
  }
}

/** The tokens every agent of the run used, summed. */
function usageOfRun(run: WorkflowRun): TokenCounts {
  let inputTokens = 0;
  let outputTokens = 0;
  for (const node of run.nodes) {
    inputTokens += node.usage?.inputTokens ?? 0;
    outputTokens += node.usage?.outputTokens ?? 0;
  }
  return { inputTokens, outputTokens };
}
