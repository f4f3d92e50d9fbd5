/**
 * Runs one subagent task: its own ReAct loop (the main agent's `runReactLoop`) with its own system
 * prompt, its own tool subset (./tools.ts) and its own iteration cap, the task as the only user
 * message, no history. Progress goes up by 5 with each tool call, at most to 90; the manager sets
 * 100 when the task has finished.
 */
import { safetySection } from "../../prompt/sections.js";
import { type TurnListener, runReactLoop } from "../../agent/react-loop.js";
import { SYSTEM_CHANNEL, replyTarget } from "../../bus/message.js";
import { CancelledError, ProviderError } from "../../errors.js";
import type { ChatModel } from "../../providers/chat-model.js";
import type { BudgetGuard } from "../../budget/guard.js";
import type { ToolRegistry } from "../../tools/registry.js";
import type { ToolCallRecord } from "../../tools/tool.js";
import type { RunSubagentTask } from "./manager.js";
import type { SubagentTask, TaskToolCall } from "./task.js";

export interface SubagentRunnerOptions {
  model: ChatModel;
  /** The subagent's tools: createSubagentTools (no spawn, no message, no memory). */
  tools: ToolRegistry;
  /** Absolute, realpath'd workspace root. */
  workspace: string;
  /** File tools refuse paths outside the workspace. Default true. */
  restrictToWorkspace?: boolean;
  /** Model calls per run, also the cap on tool calls. Default 15. */
  maxIterations?: number;
  /** Attempts per tool call. Default 3. */
  maxRetries?: number;
  /** Default 1000. */
  retryDelayMs?: number;
  temperature?: number;
  maxTokens?: number;
  /** Skills for the prompt (e.g. formatSkillsForPrompt's text); none when unset. */
  skills?: string;
  /** Clock in ms since epoch; injected so tests are deterministic. */
  now?: () => number;
  sleep?: (ms: number, signal?: AbortSignal) => Promise<void>;
  /** Sees every event of every run (audit log, tool history). */
  listener?: (task: SubagentTask) => TurnListener;
  /** Counts the task's model calls against its chat's, its person's, its channel's and the deployment's budgets. */
  budgets?: BudgetGuard;
}

const PROGRESS_STEP = 5;
const MAX_RUNNING_PROGRESS = 90;
/** Arguments and results of a tool call are kept on the task up to this length. */
const MAX_RECORDED_CHARS = 2_000;

/** The subagent's system prompt: a focused background worker that reports its result. The clock comes last, after everything a prompt cache can reuse. */
export function subagentPrompt(context: { workspace: string; now: Date; toolNames: string[]; skills?: string }): string {
  const sections = [
    `# Subagent
You are a subagent: a background worker that the main agent started for one task. Nobody reads along while you work.
- Do the task in the user message with your tools, completely, and nothing else: no side tasks, no chatting, no greetings, no offers of more help.
- You cannot ask questions. When something is unclear, make a reasonable choice and say which in your report.
- Your last message is your report: what you did, what you found or produced (with file paths), and anything left undone. The main agent passes it on to the user, so make it complete and to the point.
- You cannot message users or start other subagents; the main agent relays your report.`,
    `# Using tools
- When a tool returns "Error: ...", read the hint after "Next:" and adjust; do not repeat the same failing call.
- Prefer reading before writing; keep changes inside the workspace.
- Shell commands may run for up to a few minutes; destructive ones are refused.`,
    safetySection,
  ];
  if (context.skills?.trim()) sections.push(`# Available skills\nRead a skill's SKILL.md with read_file before using it.\n${context.skills.trim()}`);
  sections.push(`# Environment
Your workspace (the root of every relative file path) is ${context.workspace}.
Your tools: ${context.toolNames.length > 0 ? context.toolNames.join(", ") : "none"}.
Current time: ${context.now.toISOString()}.`);
  return sections.join("\n\n");
}

/** A tool call as the task keeps it: arguments and result shortened. */
export function taskToolCall(record: ToolCallRecord): TaskToolCall {
  const argumentsText = typeof record.arguments === "string" ? record.arguments : JSON.stringify(record.arguments) ?? "";
  return {
    name: record.name,
    success: record.success,
    durationMs: record.durationMs,
    arguments: shorten(argumentsText),
    result: shorten(record.result),
  };
}

function shorten(text: string): string {
  return text.length <= MAX_RECORDED_CHARS ? text : `${text.slice(0, MAX_RECORDED_CHARS)}… [${text.length} characters]`;
}

export function createSubagentRunner(options: SubagentRunnerOptions): RunSubagentTask {
  const now = options.now ?? Date.now;
  const maxIterations = options.maxIterations ?? 15;

  return async (task, signal, onProgress) => {
    if (signal.aborted) throw new CancelledError(`subagent ${task.id} was cancelled before it started`);
    let progress = 0;
    const observer = options.listener?.(task);
    const listener: TurnListener = async (event) => {
      if (event.type === "tool-result") {
        progress = Math.min(MAX_RUNNING_PROGRESS, progress + PROGRESS_STEP);
        await onProgress({ progress, toolCall: taskToolCall(event.record) });
      }
      await observer?.(event);
    };
    await options.tools.load(signal);
    const system = subagentPrompt({ workspace: options.workspace, now: new Date(now()), toolNames: options.tools.names(), skills: options.skills });
    // Tools see the origin chat, as the main agent's tools would (for logs and audit records).
    const origin = replyTarget({ channel: SYSTEM_CHANNEL, chatId: task.sessionKey });

    const scope = { chat: task.sessionKey, channel: origin.channel, ...(task.person ? { person: task.person } : {}) };
    const result = await runReactLoop({
      model: options.budgets ? options.budgets.bind(options.model, scope) : options.model,
      tools: options.tools,
      messages: [
        { role: "system", content: system },
        { role: "user", content: task.task },
      ],
      maxIterations,
      maxRetries: options.maxRetries ?? 3,
      retryDelayMs: options.retryDelayMs ?? 1_000,
      temperature: options.temperature,
      maxTokens: options.maxTokens,
      toolContext: {
        sessionKey: task.sessionKey,
        channel: origin.channel,
        chatId: origin.chatId,
        workspace: options.workspace,
        restrictToWorkspace: options.restrictToWorkspace ?? true,
      },
      signal,
      listener,
      now,
      sleep: options.sleep,
    });

    if (result.stopReason === "cancelled") throw new CancelledError(`subagent ${task.id} was cancelled`);
    if (result.stopReason === "error" || result.stopReason === "budget-exhausted") {
      throw result.error ?? new ProviderError("the model request failed", { kind: "unknown" });
    }
    if (result.stopReason === "completed") {
      // The report is the closing message; text before tool calls was narration along the way.
      const last = result.transcript.at(-1);
      const report = last?.role === "assistant" ? last.content.trim() : "";
      if (report !== "") return report;
    }
    // At the iteration cap the whole text, with the limit note, tells what was done and that it stopped.
    return result.reply.trim();
  };
}
