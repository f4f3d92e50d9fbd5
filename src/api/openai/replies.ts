/**
 * Matches the agent's replies on the `openai` channel to the HTTP requests waiting for them.
 *
 * A request's message goes onto the bus as its own turn (`metadata.ownTurn`: never coalesced with
 * the session's other messages), so its reply is the final whose `metadata.answers` names the
 * message's id, and its drafts stream under the reply id `<id>:0`. Matching is by those ids, never
 * by "the next reply of the chat": two requests of one session each get their own answer, in the
 * bus's order.
 *
 * Several gateways consume the channel's replies between them, and the one that took a reply may
 * not hold the request: what it cannot match it fans out to the others over the bus (`broadcast`),
 * and the one that holds the request takes it.
 *
 * A request whose client went away is forgotten at once, and its turn cancelled as soon as it is
 * seen running (a draft, a tool notice): a turn nobody waits for should not go on calling tools.
 */
import { randomUUID } from "node:crypto";
import type { Logger } from "pino";
import type { OutboundMessage } from "../../bus/message.js";
import type { MessageBus, OutboundEvent, Subscription } from "../../bus/message-bus.js";
import { type TokenCounts, tokenCountsOf } from "./wire.js";

/** The bus channel of the OpenAI-compatible endpoint: sessions are `openai:<key>:<session>`. */
export const OPENAI_CHANNEL = "openai";

/** A turn's answer. */
export interface Reply {
  content: string;
  usage?: TokenCounts;
}

export interface WaitOptions {
  /** Aborts the wait (the client went away, the request timed out); the promise rejects with its reason. */
  signal: AbortSignal;
  /** New text of the reply as the drafts show it, in order (what was not passed on before). */
  onText?: (delta: string) => void;
}

export interface ExpectedReply {
  reply: Promise<Reply>;
  /** Stops waiting without cancelling the turn (its message never reached the bus). */
  forget(): void;
}

export interface OpenAiRepliesOptions {
  bus: Pick<MessageBus, "consumeOutbound" | "broadcast" | "onBroadcast" | "requestCancel">;
  logger: Logger;
  /** Abandoned requests (their turns cancelled once seen running) remembered at most this long. Default 15 min. */
  abandonedTtlMs?: number;
  now?: () => number;
}

/** Set when the turn should be cancelled once it is seen running (the client left). */
export class ClientGoneError extends Error {
  override name = "ClientGoneError";
}

interface Pending {
  sessionKey: string;
  /** What the drafts showed so far. */
  shown: string;
  running: boolean;
  onText?: (delta: string) => void;
  resolve(reply: Reply): void;
  reject(error: unknown): void;
}

/** A request nobody waits for any more, whose turn is cancelled once it shows up. */
interface Abandoned {
  sessionKey: string;
  until: number;
}

/** What one gateway tells the others about a reply it could not match. */
type FannedOut =
  | { kind: "draft"; replyId: string; text: string }
  | { kind: "final"; answers: string[]; content: string; usage?: TokenCounts }
  | { kind: "running"; turnId: string };

const MAX_ABANDONED = 10_000;

export class OpenAiReplies {
  private readonly pending = new Map<string, Pending>();
  private readonly abandoned = new Map<string, Abandoned>();
  private readonly logger: Logger;
  private readonly now: () => number;
  /** Names this gateway in fan-out messages, so it ignores its own. */
  private readonly instance = randomUUID();
  private subscriptions: Subscription[] = [];

  constructor(private readonly options: OpenAiRepliesOptions) {
    this.logger = options.logger.child({ channel: OPENAI_CHANNEL });
    this.now = options.now ?? Date.now;
  }

  async start(): Promise<void> {
    if (this.subscriptions.length > 0) return;
    const { bus } = this.options;
    this.subscriptions.push(await bus.onBroadcast(OPENAI_CHANNEL, (payload) => this.fromOtherGateway(payload)));
    this.subscriptions.push(await bus.consumeOutbound(OPENAI_CHANNEL, async (event) => this.handle(event)));
  }

  /** Stops taking replies; requests still waiting fail with `reason`. */
  async stop(reason: Error): Promise<void> {
    for (const subscription of this.subscriptions.splice(0)) await subscription.close();
    const waiting = [...this.pending.values()];
    this.pending.clear();
    for (const entry of waiting) entry.reject(reason);
  }

  /** Requests waiting here (for tests and metrics). */
  get waiting(): number {
    return this.pending.size;
  }

  /** Waits for the reply to the message `id` of session `sessionKey`. Call it before publishing the message. */
  expect(id: string, sessionKey: string, options: WaitOptions): ExpectedReply {
    const { signal } = options;
    let settle!: Pick<Pending, "resolve" | "reject">;
    const reply = new Promise<Reply>((resolve, reject) => (settle = { resolve, reject }));
    const entry: Pending = { sessionKey, shown: "", running: false, onText: options.onText, ...settle };
    const release = () => {
      signal.removeEventListener("abort", onAbort);
      if (this.pending.get(id) === entry) this.pending.delete(id);
    };
    const onAbort = () => {
      if (this.pending.get(id) !== entry) return;
      this.pending.delete(id);
      if (signal.reason instanceof ClientGoneError) this.abandon(id, entry);
      entry.reject(signal.reason);
    };
    if (signal.aborted) {
      entry.reject(signal.reason);
      return { reply, forget: () => undefined };
    }
    this.pending.set(id, entry);
    signal.addEventListener("abort", onAbort, { once: true });
    reply.then(release, release);
    return { reply, forget: release };
  }

  private handle(event: OutboundEvent): void {
    if (event.type === "draft") return this.onDraft(event.draft.replyId, event.draft.text, true);
    const { message } = event;
    if (message.kind === "draft") return this.onDraft(message.id, message.content, true);
    const answers = answersOf(message);
    if (message.kind === "final" && answers.length > 0) return this.onFinal(answers, message.content, tokenCountsOf(message.metadata.usage), true);
    // A tool notice or a message sent mid-turn: the turn is running.
    this.onRunning(turnIdOf(message.id), true);
  }

  private onDraft(replyId: string, text: string, fanOut: boolean): void {
    const turnId = turnIdOf(replyId);
    const entry = this.pending.get(turnId);
    if (!entry) {
      if (this.onRunning(turnId, false) || !fanOut) return;
      return void this.fanOut({ kind: "draft", replyId, text });
    }
    entry.running = true;
    // Drafts are snapshots of a growing text; one that does not extend what was shown came late.
    if (text.length <= entry.shown.length || !text.startsWith(entry.shown)) return;
    const delta = text.slice(entry.shown.length);
    entry.shown = text;
    entry.onText?.(delta);
  }

  private onFinal(answers: string[], content: string, usage: TokenCounts | undefined, fanOut: boolean): void {
    let matched = false;
    for (const id of answers) {
      const entry = this.pending.get(id);
      if (entry) {
        matched = true;
        this.pending.delete(id);
        entry.resolve({ content, ...(usage ? { usage } : {}) });
      } else if (this.abandoned.delete(id)) matched = true; // its client left: nobody to tell
    }
    if (!matched && fanOut) void this.fanOut({ kind: "final", answers, content, ...(usage ? { usage } : {}) });
  }

  /** Notes that a turn runs; true when this gateway knew the turn (waiting or abandoned). */
  private onRunning(turnId: string, fanOut: boolean): boolean {
    const entry = this.pending.get(turnId);
    if (entry) {
      entry.running = true;
      return true;
    }
    const abandoned = this.abandoned.get(turnId);
    if (abandoned) {
      this.abandoned.delete(turnId);
      this.cancel(turnId, abandoned.sessionKey);
      return true;
    }
    if (fanOut) void this.fanOut({ kind: "running", turnId });
    return false;
  }

  /** The client left: cancel the turn now if it runs, else once it shows up. */
  private abandon(id: string, entry: Pending): void {
    if (entry.running) return this.cancel(id, entry.sessionKey);
    const time = this.now();
    for (const [key, old] of this.abandoned) if (old.until <= time || this.abandoned.size >= MAX_ABANDONED) this.abandoned.delete(key);
    this.abandoned.set(id, { sessionKey: entry.sessionKey, until: time + (this.options.abandonedTtlMs ?? 15 * 60_000) });
  }

  private cancel(id: string, sessionKey: string): void {
    this.logger.info({ sessionKey, message: id }, "the client went away: cancelling its turn");
    this.options.bus.requestCancel(sessionKey).catch((error: unknown) => this.logger.warn({ err: error, sessionKey }, "could not cancel an abandoned turn"));
  }

  private async fanOut(event: FannedOut): Promise<void> {
    try {
      await this.options.bus.broadcast(OPENAI_CHANNEL, JSON.stringify({ from: this.instance, event }));
    } catch (error) {
      this.logger.warn({ err: error }, "could not fan a reply out to the other gateways");
    }
  }

  private fromOtherGateway(payload: string): void {
    let parsed: { from: string; event: FannedOut };
    try {
      parsed = JSON.parse(payload) as typeof parsed;
    } catch {
      return;
    }
    if (parsed.from === this.instance) return;
    const { event } = parsed;
    if (event.kind === "draft") this.onDraft(event.replyId, event.text, false);
    else if (event.kind === "final") this.onFinal(event.answers, event.content, tokenCountsOf(event.usage), false);
    else this.onRunning(event.turnId, false);
  }
}

/** The inbound ids a final answers (its `metadata.answers`). */
function answersOf(message: OutboundMessage): string[] {
  const answers = message.metadata.answers;
  return Array.isArray(answers) ? answers.filter((id): id is string => typeof id === "string") : [];
}

/** The inbound id a turn's outbound ids (`<id>:<seq>`) derive from. */
function turnIdOf(outboundId: string): string {
  const separator = outboundId.lastIndexOf(":");
  return separator === -1 ? outboundId : outboundId.slice(0, separator);
}
