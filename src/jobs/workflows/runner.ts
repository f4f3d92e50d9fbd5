/**
 * Runs one node of a team: its own ReAct loop (the main agent's `runReactLoop`) with the prompt
 * from ./prompts.ts, the subagents' tool subset, and the model, temperature and iteration cap the
 * agent and its team ask for. No history: the prompt carries everything the node builds on.
 */
import { type TurnListener, runReactLoop } from "../../agent/react-loop.js";
import { SYSTEM_CHANNEL, replyTarget } from "../../bus/message.js";
import type { TeamAgent } from "../../config/team.js";
import { CancelledError, ProviderError } from "../../errors.js";
import type { ChatModel } from "../../providers/chat-model.js";
import type { BudgetGuard } from "../../budget/guard.js";
import { channelOfChat } from "../../budget/policy.js";
import type { NodeState, TeamRecord, WorkflowRun } from "../../store/team-record.js";
import type { ToolRegistry } from "../../tools/registry.js";
import { taskToolCall } from "../subagents/runner.js";
import { inSpan } from "../../tracing.js";
import type { RunTeamAgent } from "./team-agent.js";

export type { RunTeamAgent, TeamAgentRequest, TeamAgentResult } from "./team-agent.js";

/** The model an agent of a team runs on: its own, else the team's, else the deployment's. */
export type ResolveTeamModel = (team: TeamRecord, agent: TeamAgent | undefined) => ChatModel;

export interface TeamAgentRunnerOptions {
  resolveModel: ResolveTeamModel;
  /** The subagents' tool subset (no spawn, no message, no memory, no workflow_run). */
  tools: ToolRegistry;
  /** Absolute, realpath'd workspace root. */
  workspace: string;
  restrictToWorkspace?: boolean;
  maxRetries?: number;
  retryDelayMs?: number;
  /** Used when neither the agent nor its team sets them (`agent.temperature`, `agent.maxTokens`). */
  defaults: { temperature?: number; maxTokens?: number };
  now?: () => number;
  sleep?: (ms: number, signal?: AbortSignal) => Promise<void>;
  /** Sees every event of every node (audit log). */
  listener?: (run: WorkflowRun, node: NodeState) => TurnListener;
  /** Counts each node's model calls against its run's, chat's, person's, channel's and the deployment's budgets. */
  budgets?: BudgetGuard;
}

/** The settings a node runs with: the agent's own, else its team's, else the defaults. */
export function agentSettings(team: TeamRecord, agent: TeamAgent | undefined, defaults: TeamAgentRunnerOptions["defaults"]) {
  return {
    maxIterations: agent?.maxIterations ?? team.maxIterations,
    temperature: agent?.temperature ?? team.modelConfig?.temperature ?? defaults.temperature,
    maxTokens: team.modelConfig?.maxTokens ?? defaults.maxTokens,
  };
}

export function createTeamAgentRunner(options: TeamAgentRunnerOptions): RunTeamAgent {
  return async (request) => {
    const { run, node, agent, signal } = request;
    if (signal.aborted) throw new CancelledError(`node ${node.id} of run ${run.id} was cancelled before it started`);
    const resolved = options.resolveModel(run.team, agent);
    const scope = {
      teamRun: { id: run.id, team: run.teamName },
      ...(run.sessionKey ? { chat: run.sessionKey, channel: channelOfChat(run.sessionKey) } : { channel: "workflow" }),
      ...(run.person ? { person: run.person } : {}),
    };
    const model = options.budgets ? options.budgets.bind(resolved, scope) : resolved;
    const settings = agentSettings(run.team, agent, options.defaults);
    const observer = options.listener?.(run, node);
    let written = "";
    const listener: TurnListener = async (event) => {
      if (event.type === "delta") {
        written += event.text;
        request.onText?.(written);
      } else if (event.type === "tool-start") written = "";
      if (event.type === "tool-result") await request.onToolCall(taskToolCall(event.record));
      await observer?.(event);
    };
    // Tools see the origin chat, as the main agent's tools would (logs, audit records).
    const origin = run.sessionKey ? replyTarget({ channel: SYSTEM_CHANNEL, chatId: run.sessionKey }) : { channel: "workflow", chatId: run.id };
    const attributes = { "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": agent?.id ?? "synthesis", "countbot.agent_role": agent?.role ?? "synthesis", "countbot.team": run.teamName, "countbot.team_run": run.id, "countbot.node": node.id };
    const result = await inSpan(`invoke_agent ${agent?.id ?? "synthesis"}`, { attributes }, () => runReactLoop({
      model,
      tools: options.tools,
      messages: [
        { role: "system", content: request.system },
        { role: "user", content: request.input },
      ],
      maxIterations: settings.maxIterations,
      maxRetries: options.maxRetries ?? 3,
      retryDelayMs: options.retryDelayMs ?? 1_000,
      temperature: settings.temperature,
      maxTokens: settings.maxTokens,
      toolContext: {
        sessionKey: run.sessionKey || `workflow:${run.id}`,
        channel: origin.channel,
        chatId: origin.chatId,
        workspace: options.workspace,
        restrictToWorkspace: options.restrictToWorkspace ?? true,
      },
      signal,
      listener,
      now: options.now,
      sleep: options.sleep,
    }));
    if (result.stopReason === "cancelled") throw new CancelledError(`node ${node.id} of run ${run.id} was cancelled`);
    if (result.stopReason === "error" || result.stopReason === "budget-exhausted") throw result.error ?? new ProviderError("the model request failed", { kind: "unknown" });
    if (result.stopReason === "completed") {
      // The contribution is the closing message; text before tool calls was narration along the way.
      const last = result.transcript.at(-1);
      const report = last?.role === "assistant" ? last.content.trim() : "";
      if (report !== "") return { output: report, model: result.model, usage: tokens(result.usage) };
    }
    return { output: result.reply.trim(), model: result.model, usage: tokens(result.usage) };
  };
}

/** The counts a node keeps of its usage. */
function tokens(usage: { inputTokens: number; outputTokens: number }): { inputTokens: number; outputTokens: number } {
  return { inputTokens: usage.inputTokens, outputTokens: usage.outputTokens };
}
