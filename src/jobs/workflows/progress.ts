/**
 * A team run's progress as `notice` messages to the chat that started it. Each carries, besides
 * its line of text, the whole run as it stands (`metadata.workflow.run`: every agent's state and
 * times, the trigger it threads to), so a chat platform can keep one status message per run and
 * edit it in place from any notice, in any order, without knowing the run (src/gateway/team-status.ts).
 *
 * - node changes and tool calls: a lasting notice with its line (the web page lists them);
 * - streamed text (`node-chunk`): transient, for pages that show it as it comes; no run snapshot;
 * - the run starting and ending: transient, so chats that list notices keep their lines as they
 *   were; they are what puts the status message up at once and settles it at the end.
 */
import type { OutboundMessage } from "../../bus/message.js";
import type { NodeState, WorkflowRun } from "../../store/team-record.js";
import { type WorkflowNotice, noticeText } from "./messages.js";
import { describeNode } from "./plan.js";

/** One agent's part of a run, as the status message shows it. */
export interface AgentProgress {
  id: string;
  /** `Role (id)`. */
  label: string;
  status: NodeState["status"];
  startedAt?: number;
  completedAt?: number;
}

/** The run as it stands, on every notice but streamed text. */
export interface RunProgress {
  id: string;
  team: string;
  status: WorkflowRun["status"];
  createdAt: number;
  completedAt?: number;
  /** The trigger message: the status message threads to it. */
  replyTo?: string;
  agents: AgentProgress[];
}

const RUN_LINES: Partial<Record<WorkflowNotice["type"], string>> = {
  "run-started": "started",
  "run-completed": "completed",
  "run-failed": "failed",
  "run-cancelled": "was cancelled",
};

export function runProgressOf(run: WorkflowRun): RunProgress {
  return {
    id: run.id,
    team: run.teamName,
    status: run.status,
    createdAt: run.createdAt,
    ...(run.completedAt === undefined ? {} : { completedAt: run.completedAt }),
    ...(run.replyTo ? { replyTo: run.replyTo } : {}),
    agents: run.nodes.map((node) => ({
      id: node.id,
      label: describeNode(run.team, node),
      status: node.status,
      ...(node.startedAt === undefined ? {} : { startedAt: node.startedAt }),
      ...(node.completedAt === undefined ? {} : { completedAt: node.completedAt }),
    })),
  };
}

/** The notice for the chat that started the run; undefined when it has none (started through the API) or the notice says nothing. */
export function progressNotice(notice: WorkflowNotice): OutboundMessage | undefined {
  const { run, node } = notice;
  const separator = run.sessionKey.indexOf(":");
  if (separator <= 0) return undefined;
  const runLine = RUN_LINES[notice.type];
  const text = runLine ? `Team [${run.teamName}] ${runLine}` : noticeText(notice);
  if (text === undefined || (!node && !runLine)) return undefined;
  const streamed = notice.type === "node-chunk";
  return {
    id: node
      ? `workflow-${run.id}-${node.id}-${notice.type}-${node.attempts}-${node.toolCalls.length}${notice.text === undefined ? "" : `-${notice.text.length}`}`
      : `workflow-${run.id}-${notice.type}`,
    channel: run.sessionKey.slice(0, separator),
    chatId: run.sessionKey.slice(separator + 1),
    content: text,
    kind: "notice",
    media: [],
    metadata: {
      workflow: {
        runId: run.id,
        team: run.teamName,
        event: notice.type,
        ...(node ? { nodeId: node.id, status: node.status } : { status: run.status }),
        ...(notice.toolCall ? { tool: notice.toolCall.name } : {}),
        ...(notice.text === undefined ? {} : { text: notice.text }),
        ...(streamed ? {} : { run: runProgressOf(run) }),
      },
      // Streamed text and the run's start and end are for pages that show progress live, not for every chat that shows notices.
      ...(streamed || runLine ? { transient: true } : {}),
    },
  };
}
