/**
 * The agent of one process: runs a turn for a session (history, overflow summary, context,
 * ReAct loop, history write) and the session commands. Transport-free: the TurnConsumer feeds it
 * from the bus, `countbot agent -m` calls it directly.
 */
import type { Logger } from "pino";
import { type Media, sessionKeyOf } from "../bus/message.js";
import type { AgentConfig } from "../config/schema.js";
import { ProviderError, ToolError } from "../errors.js";
import type { ChatModel } from "../providers/chat-model.js";
import type { Fence, HistoryEntry, SessionSnapshot, Store } from "../store/store.js";
import { type AuditLog, auditEntryOf } from "../tools/audit-log.js";
import type { ToolRegistry } from "../tools/registry.js";
import type { ToolHistory } from "../tools/tool-history.js";
import type { ContextBuilder } from "./context-builder.js";
import type { MemoryStore } from "../memory/memory.js";
import { leavesNoTrace } from "./cancellation.js";
import type { GroupSetting, Speaker } from "../prompt/speakers.js";
import { compactHistory } from "./summarizer.js";
import { type TurnListener, type TurnResult, runReactLoop } from "./react-loop.js";
import type { BudgetGuard } from "../budget/guard.js";

export interface AgentDependencies {
  settings: Pick<AgentConfig, "maxIterations" | "maxRetries" | "retryDelay" | "temperature" | "maxTokens" | "maxHistory">;
  model: ChatModel;
  tools: ToolRegistry;
  store: Store;
  memory: MemoryStore;
  context: ContextBuilder;
  workspace: string;
  restrictToWorkspace: boolean;
  logger: Logger;
  /** Every tool call is recorded here (JSONL, rotated, redacted). */
  audit?: AuditLog;
  /** What each session's tools were asked and answered (queryable through the API), per session. */
  toolHistory?: ToolHistory;
  /** Counts every model call of a turn against its person's, chat's, channel's and the deployment's budgets. */
  budgets?: BudgetGuard;
  now?: () => number;
  sleep?: (ms: number, signal?: AbortSignal) => Promise<void>;
}

export interface TurnInput {
  sessionKey: string;
  /** Where the reply goes (the origin chat for `system` messages). */
  channel: string;
  chatId: string;
  content: string;
  media?: Media[];
  /** The people speaking in this turn: their person memory is shown, and the memory tool may write it. */
  speakers?: Speaker[];
  /** The multi-person chat the turn comes from (the system prompt's group section); absent in private chats. */
  group?: GroupSetting;
  /** Every message of the turn is a background event: the history keeps it as an `event`, not as something a user said. */
  background?: boolean;
  /** Inbound ids this turn answers; recorded in the history so a re-run can be recognized. */
  messageIds: string[];
  signal?: AbortSignal;
  listener?: TurnListener;
  /** Throws when this process may no longer write for the session (lost lease); asked before an unfenced history write. */
  assertOwnership?: () => Promise<void>;
  /** The session as loaded at the start of the turn (the caller read it already); default: loaded here. */
  snapshot?: SessionSnapshot;
  /** The lease token, for stores that check it atomically with the history write. */
  fence?: Fence;
  /**
   * Takes the entries the turn adds to the history instead of the store: the caller saves them with
   * the turn's ack, in one step (a bus with `historyOnAck`). Not called when the turn leaves no trace.
   */
  keepHistory?: (entries: HistoryEntry[]) => void;
  /** Sends a message into the chat mid-turn (the `message` tool). */
  send?: (content: string, media?: Media[]) => Promise<void>;
  /**
   * The chat this one was opened from (a Discord thread's channel, with `threads.inheritParent`):
   * a session with no history yet starts from that chat's last entries, kept in its own history.
   */
  parentChatId?: string;
  /** `channel:senderId` of the person whose message started the turn (their budget counts it); none for background events. */
  person?: string;
}

/** How many times a turn refused for its size folds more history into memory and runs again. */
const MAX_CONTEXT_SHRINKS = 2;
/** How much of its parent chat's history a new thread starts from. */
const INHERITED_ENTRIES = 10;
/** Of a message the model could not take even with no history, the characters the history keeps. */
const OVERFLOWED_MESSAGE_KEPT = 2_000;

export class Agent {
  private readonly now: () => number;

  constructor(private readonly dependencies: AgentDependencies) {
    this.now = dependencies.now ?? Date.now;
  }

  /**
   * When the first of these inbound ids were answered before (the turn finished but its ack was
   * lost in a crash), the reply saved then and how many of the ids it answered: that part must
   * not run again. A batch can be longer than the answered one because more messages arrived.
   */
  async previousAnswer(sessionKey: string, messageIds: string[], snapshot?: SessionSnapshot): Promise<{ reply: string; count: number; usage?: HistoryEntry["usage"] } | undefined> {
    if (messageIds.length === 0) return undefined;
    const { history } = snapshot ?? (await this.dependencies.store.sessions.load(sessionKey));
    for (let index = history.length - 1; index >= 0; index -= 1) {
      const entry = history[index]!;
      if (entry.role !== "assistant" && isPrefix(entry.messageIds, messageIds)) {
        const answer = history[index + 1];
        if (answer?.role !== "assistant") return undefined;
        return { reply: answer.content, count: entry.messageIds!.length, ...(answer.usage ? { usage: answer.usage } : {}) };
      }
    }
    return undefined;
  }

  /** The session as stored now: what a turn starts from (pass it to `previousAnswer` and `respond`, one read for both). */
  loadSession(sessionKey: string): Promise<SessionSnapshot> {
    return this.dependencies.store.sessions.load(sessionKey);
  }

  async respond(input: TurnInput): Promise<TurnResult> {
    const { settings, store, logger } = this.dependencies;
    const log = logger.child({ session: input.sessionKey });
    const snapshot = input.snapshot ?? (await store.sessions.load(input.sessionKey));
    const model = this.turnModel(input);
    const compact = (history: HistoryEntry[], maxHistory: number) =>
      compactHistory({
        model,
        sessions: store.sessions,
        remember: (summary) => this.remember(input.sessionKey, summary),
        sessionKey: input.sessionKey,
        history,
        maxHistory,
        fence: input.fence,
        signal: input.signal,
        onWarning: (message) => log.warn(message),
      });
    // A new thread starts from its parent chat's recent talk, which then stays in its own history.
    let inherited = snapshot.history.length === 0 && input.parentChatId ? await this.parentTail(input.channel, input.parentChatId, Math.min(INHERITED_ENTRIES, settings.maxHistory)) : [];
    let history = inherited.length > 0 ? inherited : await compact(snapshot.history, settings.maxHistory);

    let result: TurnResult;
    for (let shrinks = 0; ; shrinks += 1) {
      try {
        result = await this.runLoop(input, model, history, shrinks < MAX_CONTEXT_SHRINKS && history.length > 0);
        break;
      } catch (error) {
        if (!(error instanceof ProviderError && error.kind === "context-overflow")) throw error;
        // The prompt does not fit the model's window and nothing was said or done yet: fold more of
        // the history into memory (a quarter kept, then none) and run the turn again. A chat whose
        // history outgrew the window is never stuck failing every turn.
        log.warn({ entries: history.length, shrinks: shrinks + 1 }, "the prompt does not fit the model's context window: summarizing more of the history");
        // What a new thread took from its parent is only borrowed: dropped, not summarized.
        if (inherited.length > 0) [inherited, history] = [[], []];
        else history = await compact(history, shrinks === 0 ? Math.floor(history.length / 2) : 0);
      }
    }

    // Cut short by a shutdown or a lost lease: leave no trace, the turn runs again elsewhere.
    if (leavesNoTrace(input.signal)) return result;
    // Refused before anything was said or done: the model never saw it, so the history does not keep it.
    if (result.stopReason === "budget-exhausted" && result.iterations === 1 && result.transcript.length === 0) {
      log.info({ person: input.person }, "turn refused: a budget is used up");
      return result;
    }
    // A fenced write checks the lease itself, in the same step: asking first would only cost a round trip.
    if (!input.fence) await input.assertOwnership?.();
    const at = this.now();
    const entries: HistoryEntry[] = [
      {
        role: input.background ? "event" : "user",
        content: keptUserTurn(input, result),
        at,
        messageIds: input.messageIds,
        ...(input.speakers && input.speakers.length > 0 ? { speakers: input.speakers.map((speaker) => speaker.id) } : {}),
      },
      { role: "assistant", content: result.reply, at, model: result.model, usage: { ...result.usage } },
    ];
    if (input.keepHistory) input.keepHistory([...inherited, ...entries]);
    else await store.sessions.append(input.sessionKey, [...inherited, ...entries], input.fence);
    log.info(
      {
        stopReason: result.stopReason,
        iterations: result.iterations,
        toolCalls: result.toolCalls.length,
        inputTokens: result.usage.inputTokens,
        outputTokens: result.usage.outputTokens,
        model: result.model,
      },
      "turn finished",
    );
    return result;
  }

  /** The last entries of a parent chat's history, from a user message on, without their message ids (they answer nothing here). */
  private async parentTail(channel: string, parentChatId: string, entries: number): Promise<HistoryEntry[]> {
    const { history } = await this.dependencies.store.sessions.load(sessionKeyOf({ channel, chatId: parentChatId }));
    const tail = history.slice(-entries);
    const start = tail.findIndex((entry) => entry.role !== "assistant");
    return start === -1 ? [] : tail.slice(start).map(({ messageIds: _ids, ...entry }) => entry);
  }

  /** The model as this turn calls it: counted against the turn's budgets, warnings told to the chat. */
  private turnModel(input: TurnInput): ChatModel {
    const { budgets, model } = this.dependencies;
    if (!budgets) return model;
    return budgets.bind(model, { person: input.person, chat: input.sessionKey, channel: input.channel }, {
      onWarning: (text) => input.listener?.({ type: "notice", text }),
    });
  }

  /** One run of the ReAct loop over `history` and the turn's input. */
  private async runLoop(input: TurnInput, model: ChatModel, history: HistoryEntry[], throwContextOverflowAtStart: boolean): Promise<TurnResult> {
    const { settings } = this.dependencies;
    const messages = await this.dependencies.context.buildMessages({
      sessionKey: input.sessionKey,
      channel: input.channel,
      history,
      content: input.content,
      media: input.media,
      ...(input.group ? { group: input.group } : {}),
      speakers: input.speakers ?? [],
    });
    return runReactLoop({
      model,
      tools: this.dependencies.tools,
      messages,
      maxIterations: settings.maxIterations,
      maxRetries: settings.maxRetries,
      retryDelayMs: settings.retryDelay * 1000,
      temperature: settings.temperature,
      maxTokens: settings.maxTokens,
      toolContext: {
        sessionKey: input.sessionKey,
        channel: input.channel,
        chatId: input.chatId,
        workspace: this.dependencies.workspace,
        restrictToWorkspace: this.dependencies.restrictToWorkspace,
        send: input.send,
        speakers: (input.speakers ?? []).map((speaker) => speaker.id),
        ...(input.person ? { person: input.person } : {}),
      },
      signal: input.signal,
      listener: this.recordingListener(input),
      now: this.now,
      sleep: this.dependencies.sleep,
      throwContextOverflowAtStart,
    });
  }

  /** Passes turn events on, recording each finished tool call in the audit log and tool history. */
  private recordingListener(input: TurnInput): TurnListener {
    const { audit, toolHistory, logger } = this.dependencies;
    return async (event) => {
      if (event.type === "tool-result") {
        void audit?.record(auditEntryOf(event.record, input));
        void toolHistory
          ?.add({
            sessionKey: input.sessionKey,
            tool: event.record.name,
            arguments: event.record.arguments,
            userMessage: input.content,
            result: event.record.result,
            durationMs: event.record.durationMs,
            success: event.record.success,
          })
          .catch((error: unknown) => logger.warn({ err: error, session: input.sessionKey }, "tool history write failed"));
      }
      await input.listener?.(event);
    };
  }

  /**
   * Appends an overflow summary to memory. When the memory is full, it is moved aside (still
   * readable by the operator) and a fresh one starts with a pointer to it, so summaries never stop.
   */
  private async remember(sessionKey: string, summary: string): Promise<void> {
    const { memory } = this.dependencies;
    try {
      await memory.append(sessionKey, summary);
    } catch (error) {
      if (!(error instanceof ToolError)) throw error;
      await memory.archive(sessionKey);
      await memory.append(sessionKey, summary);
    }
  }

  /** `/new`: archive the history and start over. */
  async resetSession(sessionKey: string, fence?: Fence): Promise<void> {
    await this.dependencies.store.sessions.reset(sessionKey, fence);
  }

  /** `/usage`: the person's and the chat's spend against their budgets. */
  async usage(sessionKey: string, person: string | undefined): Promise<string> {
    const { budgets } = this.dependencies;
    if (!budgets) return "Usage is not counted here.";
    return budgets.describe({ chat: sessionKey, ...(person ? { person } : {}) });
  }

  async status(sessionKey: string): Promise<string> {
    const { meta, history } = await this.dependencies.store.sessions.load(sessionKey);
    const lastAssistant = [...history].reverse().find((entry) => entry.role === "assistant");
    return [
      `Session ${sessionKey} (generation ${meta.generation})`,
      `Messages in context: ${history.length} of ${this.dependencies.settings.maxHistory}`,
      `Model: ${this.dependencies.model.id}`,
      lastAssistant?.usage ? `Last turn: ${lastAssistant.usage.inputTokens} tokens in, ${lastAssistant.usage.outputTokens} out` : "No turns yet.",
    ].join("\n");
  }
}

/** Whether `prefix` is a non-empty prefix of `ids`. */
function isPrefix(prefix: string[] | undefined, ids: string[]): boolean {
  return prefix !== undefined && prefix.length > 0 && prefix.length <= ids.length && prefix.every((id, index) => id === ids[index]);
}

/**
 * What the history keeps of the user side of a turn; of a message the model could not take even
 * with no history, only the start: whole, it would overflow every later turn.
 */
function keptUserTurn(input: TurnInput, result: TurnResult): string {
  const said = describeUserTurn(input);
  const overflowed = result.error instanceof ProviderError && result.error.kind === "context-overflow";
  if (!overflowed || said.length <= OVERFLOWED_MESSAGE_KEPT) return said;
  return `${said.slice(0, OVERFLOWED_MESSAGE_KEPT)}\n[… ${said.length - OVERFLOWED_MESSAGE_KEPT} more characters, too long for the model's context window, not kept]`;
}

/** The user side of a turn as the history keeps it: the text plus a mention of attachments. */
function describeUserTurn(input: TurnInput): string {
  const attachments = (input.media ?? []).map((item) => `[attached ${item.kind}: ${item.name ?? item.path}]`);
  return [input.content, ...attachments].filter((line) => line !== "").join("\n");
}
