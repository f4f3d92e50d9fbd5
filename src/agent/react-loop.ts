/**
 * One turn of the ReAct loop: stream the model, forward text, run the tool calls it asks for
 * (with retries), feed the results back, until it answers without tools, hits the iteration cap,
 * is cancelled or fails. Every tool call stays paired with a result, whatever happens.
 */
import { BudgetExhaustedError, ProviderError, errorMessage } from "../errors.js";
import type { ChatMessage, ChatModel, ReasoningBlock, ToolCallRequest, Usage } from "../providers/chat-model.js";
import type { ToolRegistry } from "../tools/registry.js";
import type { ToolCallRecord, ToolContext } from "../tools/tool.js";
import { sleep as abortableSleep } from "../sleep.js";
import { SpanStatusCode, inSpan } from "../tracing.js";

export type TurnEvent =
  | { type: "delta"; text: string }
  | { type: "reasoning"; text: string }
  | { type: "tool-start"; call: { id: string; name: string; arguments: string } }
  | { type: "tool-result"; record: ToolCallRecord }
  /** Something the chat should be told on the side (a budget nearly used up). */
  | { type: "notice"; text: string }
  | { type: "done"; result: TurnResult }
  | { type: "error"; error: Error };

/** Observes a turn as it happens; channels stream and notify through this. */
export type TurnListener = (event: TurnEvent) => void | Promise<void>;

export type StopReason = "completed" | "max-iterations" | "cancelled" | "error" | "budget-exhausted";

export interface TurnResult {
  /** What the user sees: every piece of assistant text of the turn, plus any closing note. */
  reply: string;
  stopReason: StopReason;
  iterations: number;
  toolCalls: ToolCallRecord[];
  usage: Usage;
  model: string;
  /** The turn's messages after the input: assistant messages with tool calls, tool results. */
  transcript: ChatMessage[];
  error?: Error;
}

export interface ReactLoopOptions {
  model: ChatModel;
  tools: ToolRegistry;
  /** System prompt, history and the new user message. */
  messages: ChatMessage[];
  maxIterations: number;
  /** Attempts per tool call (the first included). */
  maxRetries: number;
  retryDelayMs: number;
  temperature?: number;
  maxTokens?: number;
  toolContext: Omit<ToolContext, "signal">;
  signal?: AbortSignal;
  listener?: TurnListener;
  now?: () => number;
  sleep?: (ms: number, signal?: AbortSignal) => Promise<void>;
  /**
   * When the turn's first model call is refused because the prompt does not fit the model's
   * context window, before anything was streamed or run: throw that ProviderError (kind
   * "context-overflow") instead of answering with the failure, so the caller can shorten the
   * history and run the turn again as if nothing happened.
   */
  throwContextOverflowAtStart?: boolean;
}

export function limitNote(limit: number): string {
  return `[max tool calls reached: ${limit}]`;
}

export async function runReactLoop(options: ReactLoopOptions): Promise<TurnResult> {
  const now = options.now ?? Date.now;
  const sleep = options.sleep ?? abortableSleep;
  const signal = options.signal ?? new AbortController().signal;
  const emit = safeEmitter(options.listener);
  const messages = [...options.messages];
  const transcript: ChatMessage[] = [];
  const toolCalls: ToolCallRecord[] = [];
  const usage: Usage = { inputTokens: 0, outputTokens: 0 };
  let reply = "";
  let iterations = 0;
  let stopReason: StopReason | undefined;
  let failure: Error | undefined;

  const append = (message: ChatMessage) => {
    messages.push(message);
    transcript.push(message);
  };

  // Tools known only at run time (MCP servers') join here; the first turn may wait for them.
  await options.tools.load(signal);

  const addText = async (text: string, startsSegment: boolean) => {
    // Segments of different iterations are separated by a blank line, in the stream as in the reply.
    const piece = startsSegment && reply !== "" ? `\n\n${text}` : text;
    reply += piece;
    await emit({ type: "delta", text: piece });
  };

  while (stopReason === undefined) {
    if (signal.aborted) {
      stopReason = "cancelled";
      break;
    }
    if (iterations >= options.maxIterations) {
      stopReason = "max-iterations";
      break;
    }
    iterations += 1;

    const step: StepOutput = { text: "", reasoningText: "", reasoningBlocks: [], calls: [] };
    try {
      await streamStep(options, { messages, signal, usage, step, addText, emit });
    } catch (error) {
      const untouched = iterations === 1 && step.text === "" && step.reasoningText === "" && step.calls.length === 0;
      if (options.throwContextOverflowAtStart && untouched && error instanceof ProviderError && error.kind === "context-overflow") throw error;
      ({ stopReason, failure } = stopOnError(error, signal));
      // What was streamed stays part of the reply; calls whose arguments never completed are dropped.
      if (step.text !== "") append({ role: "assistant", content: step.text });
      break;
    }
    const { text, reasoningText, reasoningBlocks, calls } = step;

    const reasoning = reasoningBlocks.length > 0 ? reasoningBlocks : reasoningText ? [{ text: reasoningText }] : undefined;
    append({ role: "assistant", content: text, ...(calls.length > 0 ? { toolCalls: calls } : {}), ...(reasoning ? { reasoning } : {}) });
    if (calls.length === 0) {
      stopReason = "completed";
      break;
    }

    for (const call of calls) {
      if (signal.aborted) {
        append(skippedResult(call, "the turn was cancelled before this call ran"));
        stopReason = "cancelled";
        continue;
      }
      if (toolCalls.length >= options.maxIterations) {
        append(skippedResult(call, `the limit of ${options.maxIterations} tool calls per turn was reached`));
        stopReason = "max-iterations";
        continue;
      }
      const record = await tracedToolCall(call, options, signal, now, sleep, emit);
      toolCalls.push(record);
      append({ role: "tool", toolCallId: call.id, name: call.name, content: record.result });
    }
  }

  const note = closingNote(stopReason, failure, iterations, options.maxIterations);
  if (note !== undefined) await addText(note, true);
  else if (reply.trim() === "") reply = "(no reply)";

  const result: TurnResult = { reply, stopReason, iterations, toolCalls, usage, model: options.model.id, transcript };
  if (failure) result.error = failure;
  if (failure) await emit({ type: "error", error: failure });
  await emit({ type: "done", result });
  return result;
}

/** What one model call streamed: its text, its reasoning, the tool calls it asked for. */
interface StepOutput {
  text: string;
  reasoningText: string;
  reasoningBlocks: ReasoningBlock[];
  calls: ToolCallRequest[];
}

/** The turn's state one model call reads and adds to. */
interface StepState {
  messages: ChatMessage[];
  signal: AbortSignal;
  /** The turn's usage, which the call's is added to. */
  usage: Usage;
  /** Filled as parts arrive, so a call that fails midway leaves what it had streamed. */
  step: StepOutput;
  addText(text: string, startsSegment: boolean): Promise<void>;
  emit: TurnListener;
}

/** Streams one model call, forwarding its text and reasoning as they arrive. Throws what the call threw. */
async function streamStep(options: ReactLoopOptions, state: StepState): Promise<void> {
  const { step, signal } = state;
  const stream = options.model.stream({
    messages: state.messages,
    tools: options.tools.definitions(),
    temperature: options.temperature,
    maxTokens: options.maxTokens,
    signal,
  });
  for await (const part of stream) {
    switch (part.type) {
      case "text-delta":
        await state.addText(part.text, step.text === "");
        step.text += part.text;
        break;
      case "reasoning-delta":
        step.reasoningText += part.text;
        await state.emit({ type: "reasoning", text: part.text });
        break;
      case "reasoning-block":
        step.reasoningBlocks.push(part.block);
        break;
      case "tool-call":
        step.calls.push(part.call);
        break;
      case "finish":
        addUsage(state.usage, part.usage);
        break;
    }
  }
}

/** How a failed model call ends the turn: cancelled, refused by a budget, or failed. */
function stopOnError(error: unknown, signal: AbortSignal): { stopReason: StopReason; failure?: Error } {
  if (signal.aborted || (error instanceof ProviderError && error.kind === "aborted")) return { stopReason: "cancelled" };
  // No model call was made: the budget's reply closes the turn (after whatever was said before it).
  if (error instanceof BudgetExhaustedError) return { stopReason: "budget-exhausted", failure: error };
  return { stopReason: "error", failure: error instanceof Error ? error : new Error(String(error)) };
}

/** The note the chat is shown at the end of a turn that did not complete; none for one that did. */
function closingNote(stopReason: StopReason, failure: Error | undefined, iterations: number, maxIterations: number): string | undefined {
  switch (stopReason) {
    case "max-iterations":
      return limitNote(maxIterations);
    case "cancelled":
      return "[stopped]";
    case "error":
      return failureText(failure, iterations);
    case "budget-exhausted":
      return (failure as BudgetExhaustedError).reply;
    case "completed":
      return undefined;
  }
}

/** One tool call inside its `execute_tool` span, which records whether it succeeded and after how many attempts. */
function tracedToolCall(...args: Parameters<typeof runToolCall>): Promise<ToolCallRecord> {
  const [call] = args;
  return inSpan(`execute_tool ${call.name}`, { attributes: { "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": call.name, "gen_ai.tool.call.id": call.id } }, async (span) => {
    const ran = await runToolCall(...args);
    span.setAttributes({ "countbot.tool.success": ran.success, "countbot.tool.attempts": ran.attempts });
    if (!ran.success) span.setStatus({ code: SpanStatusCode.ERROR });
    return ran;
  });
}

async function runToolCall(
  call: ToolCallRequest,
  options: ReactLoopOptions,
  signal: AbortSignal,
  now: () => number,
  sleep: (ms: number, signal?: AbortSignal) => Promise<void>,
  emit: (event: TurnEvent) => Promise<void>,
): Promise<ToolCallRecord> {
  await emit({ type: "tool-start", call });
  const startedAt = now();
  const context: ToolContext = { ...options.toolContext, signal };
  let attempts = 0;
  let outcome = await options.tools.execute(call, context);
  attempts += 1;
  while (outcome.retryable && attempts < options.maxRetries && !signal.aborted) {
    try {
      await sleep(options.retryDelayMs, signal);
    } catch {
      break;
    }
    outcome = await options.tools.execute(call, context);
    attempts += 1;
  }
  const record: ToolCallRecord = {
    id: call.id,
    name: call.name,
    arguments: outcome.arguments,
    result: outcome.content,
    success: outcome.success,
    durationMs: now() - startedAt,
    attempts,
    startedAt,
  };
  await emit({ type: "tool-result", record });
  return record;
}

/** What the user reads when the model failed the turn. */
function failureText(failure: Error | undefined, iterations: number): string {
  if (failure instanceof ProviderError && failure.kind === "context-overflow") {
    const what = iterations > 1 ? "this turn's tool results made the conversation" : "your message is";
    return `Sorry, ${what} too long for the model's context window, even with the earlier conversation summarized. Please send something shorter, or split it. (${errorMessage(failure)})`;
  }
  return `Sorry, the model request failed: ${errorMessage(failure)}`;
}

function skippedResult(call: ToolCallRequest, reason: string): ChatMessage {
  return { role: "tool", toolCallId: call.id, name: call.name, content: `Error: ${reason}. Next: do not call more tools in this turn.` };
}

/** Adds one model call's usage to the turn's; the optional counts appear once some call reported them. */
function addUsage(total: Usage, call: Usage): void {
  total.inputTokens += call.inputTokens;
  total.outputTokens += call.outputTokens;
  for (const key of ["cachedInputTokens", "cacheWriteInputTokens", "reasoningTokens"] as const) {
    const value = call[key];
    if (value !== undefined) total[key] = (total[key] ?? 0) + value;
  }
}

/** A listener that throws must not break the turn. */
function safeEmitter(listener: TurnListener | undefined): (event: TurnEvent) => Promise<void> {
  return async (event) => {
    if (!listener) return;
    try {
      await listener(event);
    } catch {
      // Observers are best effort by design.
    }
  };
}
