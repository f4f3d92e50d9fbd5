/**
 * What the workflow engine asks of whoever runs a team's agents: one node in, its output out. The
 * engine (which a gateway loads to start, list and cancel runs) holds only this contract; the
 * runner that answers it with a ReAct loop (./runner.ts, agent code) is built by workers alone.
 */
import type { TeamAgent } from "../../config/team.js";
import type { NodeState, WorkflowRun } from "../../store/team-record.js";
import type { TaskToolCall } from "../../store/task-record.js";

export interface TeamAgentRequest {
  run: WorkflowRun;
  node: NodeState;
  /** Undefined for the council's synthesis, which is no member. */
  agent: TeamAgent | undefined;
  system: string;
  input: string;
  /** Fires on cancel, shutdown or the node's timeout. */
  signal: AbortSignal;
  onToolCall(call: TaskToolCall): void | Promise<void>;
  /** The text the agent has written so far in this model call, as it streams. */
  onText?(text: string): void;
}

export interface TeamAgentResult {
  output: string;
  /** `provider/model` that answered. */
  model: string;
  /** Tokens the node's model calls took. */
  usage?: { inputTokens: number; outputTokens: number };
}

/** Runs one node to its output. Throws on failure; throws once `signal` fired. */
export type RunTeamAgent = (request: TeamAgentRequest) => Promise<TeamAgentResult>;
