/**
 * The loops a worker runs background jobs with, one set per agent profile: subagents and team
 * agents run in the workspace, on the tools and models, of the profile that started them.
 */
import { guardForAgent } from "../budget/guard.js";
import { DEFAULT_PROFILE } from "../config/agents.js";
import type { Logger } from "pino";
import type { ResolvedConfig } from "../config/schema.js";
import { createSubagentRunner } from "../jobs/subagents/runner.js";
import { createSubagentTools } from "../jobs/subagents/tools.js";
import { createTeamModels } from "../jobs/workflows/models.js";
import { createTeamAgentRunner } from "../jobs/workflows/runner.js";
import type { ChatModel } from "../providers/chat-model.js";
import { type AuditLog, auditEntryOf } from "../tools/audit-log.js";
import type { McpServers } from "../tools/mcp/mcp-servers.js";
import { type RuntimeOverrides, mcpSources } from "./agent.js";
import type { ProcessBudgets } from "./budgets.js";

/** What the job runners share with the worker that builds them. */
export interface JobRunnerParts {
  model: ChatModel;
  /** Absolute, realpath'd workspace root. */
  workspace: string;
  budgets: ProcessBudgets;
  mcp: McpServers;
  /** The worker's audit log, known only once its runtime exists (after the runners). */
  auditRef: { log?: AuditLog };
  overrides: RuntimeOverrides;
  /** The agent profile the jobs run as (absent: `default`). */
  profile?: string;
}

/**
 * The loops a worker runs jobs with: a subagent's (on the subagents' tool subset) and a team
 * agent's (the same subset, on the team's models). Both count against the worker's budgets and
 * write their tool calls to the main agent's audit log.
 */
export function createJobRunners(config: ResolvedConfig, logger: Logger, parts: JobRunnerParts) {
  const { model, workspace, budgets, mcp, auditRef, overrides } = parts;
  // Their calls count against the budget of the profile that started them too.
  const guard = guardForAgent(budgets.guard, parts.profile ?? DEFAULT_PROFILE);
  const runTask = createSubagentRunner({
    model,
    tools: createSubagentTools(config, { metrics: overrides.metrics, sources: mcpSources(mcp, "subagents") }),
    workspace,
    restrictToWorkspace: config.tools.restrictToWorkspace,
    maxRetries: config.agent.maxRetries,
    retryDelayMs: config.agent.retryDelay * 1000,
    temperature: config.agent.temperature,
    maxTokens: config.agent.maxTokens,
    budgets: guard,
    // Subagents' tool calls go to the same audit log as the main agent's (known once it exists below).
    listener: (task) => async (event) => {
      if (event.type === "tool-result") void auditRef.log?.record(auditEntryOf(event.record, { sessionKey: task.sessionKey, channel: "subagent", chatId: task.id }));
    },
  });
  // Team agents get the subagents' tool subset, and their own models (agent, team, then agent.model).
  const teamTools = createSubagentTools(config, { sources: mcpSources(mcp, "teams") });
  const runTeamAgent = createTeamAgentRunner({
    resolveModel: overrides.model ? () => overrides.model! : createTeamModels(config, { logger }),
    tools: teamTools,
    workspace,
    restrictToWorkspace: config.tools.restrictToWorkspace,
    maxRetries: config.agent.maxRetries,
    retryDelayMs: config.agent.retryDelay * 1000,
    defaults: { temperature: config.agent.temperature, maxTokens: config.agent.maxTokens },
    budgets: guard,
    listener: (run, node) => async (event) => {
      if (event.type === "tool-result") void auditRef.log?.record(auditEntryOf(event.record, { sessionKey: run.sessionKey, channel: "workflow", chatId: `${run.id}.${node.id}` }));
    },
  });
  return { runTask, runTeamAgent, teamTools };
}

export type JobRunners = ReturnType<typeof createJobRunners>;
