/**
 * The terminal as a channel: a ChannelAdapter ("cli") on the shared channel runtime, like every
 * other platform. Admission judges what is typed (`/stop` cancels at once, `/help` is answered at
 * the gateway, the rest goes onto the bus); the dispatcher delivers the replies.
 *
 * - Inbound: each line read is a PlatformEvent of one private chat (`-s`), from "local-user",
 *   always addressed to the bot; lines reach the sink one at a time, in order. `/exit` and `/quit`
 *   leave without reaching the gateway.
 * - Outbound (reply-screen.ts): on a terminal, replies are Markdown rendered block by block as they
 *   stream, and "thinking… Ns" shows while a reply is awaited; piped, each snapshot prints what it
 *   adds, as it is. A final ends the reply and the prompt comes back when nothing else is pending;
 *   tool calls show as one dim line each, and the model's reasoning (`agent.showReasoning`), dimmed,
 *   each line behind `┆`. The runtime must run the dispatcher with `showNotices` and
 *   `annotateSends` (SendOptions.outbound tells notices from replies and says which inbound
 *   messages a reply answers) and make each line's event id its inbound message's id:
 *   createCliRuntime does. Every chat is private (`capabilities.chatType`): drafts stream.
 * - Ctrl-C feeds `/stop` through the sink (admission cancels the running turn); at an idle prompt it
 *   clears what was typed, or says how to leave. A second Ctrl-C within 2 s exits. Piped input: at
 *   EOF, wait until every line sent was answered, then exit.
 *
 * Pending lines are tracked by id, not counted: the final that ends a turn lists the inbound ids it
 * answers (a burst coalesced into one turn is answered by one final listing all of it; messages the
 * agent sends mid-turn list none), and each line's inbound message has the line's event id. A line
 * is pending from the moment it goes to the sink until a final lists it, unless admission did not
 * publish it (the sink says: `/stop`, `/help`, ...). Counting finals against lines would wait
 * forever after a coalesced burst; counting answered ids would be thrown off by `system` messages
 * (background jobs) answered in the same session.
 */
import { randomUUID } from "node:crypto";
import readline from "node:readline";
import {
  type AdmissionPolicy,
  type ChannelAdapter,
  type ChannelCapabilities,
  type ChannelInstance,
  type EventSink,
  type PlatformEvent,
  type SendOptions,
  parseCommand,
} from "../../src/gateway/kit/index.js";
import { type ReplyIndicator, canAnimate, createSpinnerIndicator } from "./reply-indicator.js";
import { ReplyScreen } from "./reply-screen.js";
import { type TerminalMarkdown, createTerminalMarkdown } from "./terminal-markdown.js";

export const CLI_SENDER = "local-user";

export const cliCapabilities: ChannelCapabilities = {
  maxMessageLength: 100_000,
  streaming: "draft",
  // No throttling here (the agent already throttles drafts): a draft goes into the chat's lane as
  // soon as it arrives, so it can never land after a tool notice that followed it on the bus.
  draftIntervalMs: 0,
  minSendIntervalMs: 0,
  chatType: "private",
};

/** The one local user, always addressed; the rate limit only has to be valid, never to bite. */
export const cliPolicy: AdmissionPolicy = {
  allowFrom: [CLI_SENDER],
  groupPolicy: "all",
  pairing: false,
  rateLimit: { messages: 100_000, perMs: 1_000 },
};

export interface CliChannelOptions {
  input: NodeJS.ReadableStream;
  output: NodeJS.WritableStream & { isTTY?: boolean };
  chatId: string;
  /** Dim tool lines with ANSI escapes. Default: when the output is a terminal and NO_COLOR is unset. */
  color?: boolean;
  /** Render replies' Markdown. Default: on a terminal; `false`: the model's text as it is. */
  markdown?: TerminalMarkdown | false;
  /** What shows while a reply is awaited. Default: a spinner on a terminal that can draw one; `false`: none. */
  indicator?: ReplyIndicator | false;
  now?: () => number;
  /** Event ids (they are also the lines' message ids). Default random UUIDs. */
  newId?: () => string;
}

const EXIT_WINDOW_MS = 2_000;
const EXIT_HINT = "/exit: leave (or Ctrl-C twice)";

/** A line the gateway answers itself (no bus), by what it was. */
type GatewayAnswered = "help" | "stop" | "interrupt";

export class CliChannel implements ChannelAdapter {
  readonly name = "cli";
  readonly capabilities = cliCapabilities;
  private sink: EventSink | undefined;
  private lines: readline.Interface | undefined;
  /** Lines handed to the sink one at a time, in order (EOF queues behind them). */
  private queue: Promise<void> = Promise.resolve();
  /** Ids of the lines on the bus (or on their way there) that no final has answered yet. */
  private readonly unanswered = new Set<string>();
  /** Lines the gateway answers itself, by platform message id, until their answer is shown. */
  private readonly gatewayAnswered = new Map<string, GatewayAnswered>();
  private readonly screen: ReplyScreen;
  /** When the oldest line still unanswered was sent. */
  private waitingSince: number | undefined;
  private sentCount = 0;
  private lastInterrupt = Number.NEGATIVE_INFINITY;
  private inputEnded = false;
  private ended = false;
  private finished!: () => void;
  /** Resolves when the user left (or stop() was called). */
  readonly done: Promise<void> = new Promise((resolve) => (this.finished = resolve));

  constructor(private readonly options: CliChannelOptions) {
    const terminal = Boolean(options.output.isTTY);
    const color = options.color ?? (terminal && !process.env.NO_COLOR);
    const markdown = options.markdown ?? (terminal ? createTerminalMarkdown({ width: (options.output as { columns?: number }).columns, color }) : false);
    const indicator = options.indicator ?? (canAnimate(options.output) ? createSpinnerIndicator({ stream: options.output, now: options.now, color }) : false);
    this.screen = new ReplyScreen({ output: options.output, color, markdown: markdown || undefined, indicator: indicator || undefined });
  }

  get sessionKey(): string {
    return `${this.name}:${this.options.chatId}`;
  }

  /** Lines sent that no reply has answered yet. */
  get pending(): number {
    return this.unanswered.size;
  }

  private now(): number {
    return (this.options.now ?? Date.now)();
  }

  async start(sink: EventSink): Promise<void> {
    if (this.ended || this.lines) return;
    this.sink = sink;
    const interactive = Boolean(this.options.output.isTTY);
    this.lines = readline.createInterface({ input: this.options.input, output: interactive ? this.options.output : undefined, terminal: interactive });
    this.lines.setPrompt("you › ");
    this.lines.on("line", (line) => this.enqueue(() => this.onLine(line)));
    this.lines.on("SIGINT", () => void this.interrupt());
    this.lines.on("close", () => this.enqueue(async () => this.onInputClosed()));
    this.prompt();
  }

  async stop(): Promise<void> {
    await this.exit();
  }

  /**
   * Ctrl-C: stop the running turn; at an idle prompt, clear what was typed or say how to leave;
   * pressed twice within 2 s, exit (as the banner says).
   */
  async interrupt(): Promise<void> {
    const now = this.now();
    const twice = now - this.lastInterrupt < EXIT_WINDOW_MS;
    this.lastInterrupt = now;
    if (twice || !this.sink) return this.exit();
    if (this.pending > 0) {
      // Straight to the sink, not behind queued lines: admission cancels the turn at once.
      await this.feed("/stop", "interrupt");
      return;
    }
    if (this.lines && this.lines.line !== "") {
      // A half-typed line is dropped, as a shell does; that does not count towards leaving.
      this.lastInterrupt = Number.NEGATIVE_INFINITY;
      this.lines.write(null, { ctrl: true, name: "e" });
      this.lines.write(null, { ctrl: true, name: "u" });
      return;
    }
    // Below the prompt's line, as a shell would.
    if (this.options.output.isTTY) this.options.output.write("\n");
    this.screen.interject(this.screen.dim("(Press Ctrl-C again to exit, or type /exit.)"));
    this.prompt();
  }

  /** Leaves: stops reading and resolves `done`. What is still pending is dropped. */
  async exit(): Promise<void> {
    if (this.ended) return;
    this.ended = true;
    this.screen.close();
    this.lines?.close();
    this.finished();
  }

  async send(chatId: string, text: string, options: SendOptions): Promise<{ platformMessageId: string }> {
    const platformMessageId = `cli-out-${++this.sentCount}`;
    if (chatId !== this.options.chatId || this.ended) return { platformMessageId };
    const part = options.outbound;
    if (!part) {
      this.showGatewayReply(text, options.replyTo);
    } else if (part.kind === "notice" && part.metadata.reasoning === true) {
      this.screen.interject(text.split("\n").map((line) => this.screen.dim(`  ┆ ${line}`)).join("\n"));
    } else if (part.kind === "notice") {
      this.screen.interject(this.screen.dim(`  ↳ ${text}`));
    } else {
      if (part.chunk === part.chunks - 1) {
        for (const id of part.answers) this.unanswered.delete(id);
        this.updateWaiting();
      }
      this.screen.showFinal(text, part.messageId, part.chunk, part.chunks);
      if (part.chunk === part.chunks - 1) this.afterReply();
    }
    return { platformMessageId };
  }

  async edit(chatId: string, platformMessageId: string, text: string, options: SendOptions): Promise<void> {
    if (chatId !== this.options.chatId || this.ended) return;
    if (options.outbound) {
      await this.send(chatId, text, options);
      return;
    }
    this.screen.streamTo(`message:${platformMessageId}`, text);
  }

  async draft(chatId: string, draftId: number, text: string): Promise<void> {
    if (chatId !== this.options.chatId || this.ended) return;
    this.screen.streamTo(`draft:${draftId}`, text);
  }

  /** A terminal shows no "typing…". */
  async typing(_chatId: string): Promise<void> {}

  private enqueue(task: () => Promise<void>): void {
    this.queue = this.queue.then(task).catch((error: unknown) => this.screen.interject(`(could not send that: ${error instanceof Error ? error.message : String(error)})`));
  }

  private async onLine(line: string): Promise<void> {
    if (this.ended) return;
    // A line sent between two Ctrl-Cs: they are not one double press.
    this.lastInterrupt = Number.NEGATIVE_INFINITY;
    const text = line.trim();
    if (text === "") return this.prompt();
    const lower = text.toLowerCase();
    if (lower === "/exit" || lower === "/quit") return this.exit();
    const command = parseCommand(text);
    await this.feed(text, command === "stop" || command === "help" ? command : undefined);
    if (this.pending === 0) this.prompt();
  }

  /** One line to the gateway, as a PlatformEvent of this chat. */
  private async feed(text: string, answeredHere?: GatewayAnswered): Promise<void> {
    if (!this.sink) return;
    const id = (this.options.newId ?? randomUUID)();
    const event: PlatformEvent = {
      eventId: id,
      chatId: this.options.chatId,
      chatType: "private",
      senderId: CLI_SENDER,
      senderIsBot: false,
      text,
      mentionsBot: true,
      repliesToBot: false,
      platformMessageId: id,
      media: [],
      receivedAt: this.now(),
    };
    if (answeredHere) this.gatewayAnswered.set(id, answeredHere);
    // Pending before it is published: its reply cannot come before it counts.
    this.unanswered.add(id);
    try {
      const outcome = await this.sink(event);
      if (outcome !== "published") this.unanswered.delete(id);
    } catch (error) {
      this.unanswered.delete(id);
      throw error;
    } finally {
      this.gatewayAnswered.delete(id); // its answer (if any) was sent while admission handled it
      this.updateWaiting();
    }
  }

  private onInputClosed(): void {
    // Piped input ended (or Ctrl-D): finish answering what was sent, then leave.
    this.inputEnded = true;
    this.exitWhenDone();
  }

  /** The indicator counts from the oldest line still unanswered. */
  private updateWaiting(): void {
    if (this.unanswered.size === 0) this.waitingSince = undefined;
    else this.waitingSince ??= this.now();
    this.screen.setWaiting(this.waitingSince);
  }

  private afterReply(): void {
    this.exitWhenDone();
    if (this.pending === 0) this.prompt();
  }

  private exitWhenDone(): void {
    if (this.inputEnded && this.pending === 0) void this.exit();
  }

  /** The gateway's own answer to a line (`/help`, `/stop`, a pairing code, a rate-limit notice). */
  private showGatewayReply(text: string, replyTo: string | undefined): void {
    const answered = replyTo === undefined ? undefined : this.gatewayAnswered.get(replyTo);
    if (answered === "interrupt") this.screen.interject(this.screen.dim(`(${text} Press Ctrl-C again to exit.)`));
    else if (answered === "stop") this.screen.interject(this.screen.dim(`(${text})`));
    else if (answered === "help") this.screen.showPlain(`${text}\n${EXIT_HINT}`, false);
    else this.screen.showPlain(text, true);
  }

  private prompt(): void {
    if (this.ended) return;
    if (this.options.output.isTTY) this.lines?.prompt();
  }
}

/**
 * The CLI channel as the shared runtime takes it: the local user's policy, tool notices and
 * annotated sends, every chat private (draft streaming). A line's event id is its inbound
 * message's id, so a reply's `answers` name the lines it answers.
 */
export function cliChannelInstance(channel: CliChannel): ChannelInstance {
  return { adapter: channel, policy: cliPolicy, inboundIdOf: (event) => event.eventId, showNotices: true, annotateSends: true };
}
