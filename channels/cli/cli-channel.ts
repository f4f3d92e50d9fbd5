/**
 * The terminal as a channel: a ChannelAdapter ("cli") on the shared channel runtime, like every
 * other platform. Admission judges what is typed (`/stop` cancels at once, `/help` is answered at
 * the gateway, the rest goes onto the bus); the dispatcher delivers the replies.
 *
 * - Inbound: each line read is a PlatformEvent of one private chat (`-s`), from "local-user",
 *   always addressed to the bot; lines reach the sink one at a time, in order. `/exit` and `/quit`
 *   leave without reaching the gateway.
 * - Outbound: drafts stream onto the screen (each snapshot prints what it adds to what is shown);
 *   a final ends the reply and the prompt comes back when nothing else is pending; tool calls show
 *   as one dim line each. The runtime must run the dispatcher with `showNotices` and
 *   `annotateSends` (SendOptions.outbound tells notices from replies and says which inbound
 *   messages a reply answers) and make each line's event id its inbound message's id:
 *   createCliRuntime does. Every chat is private (`capabilities.chatType`): drafts stream.
 * - Ctrl-C feeds `/stop` through the sink (admission cancels the running turn); a second Ctrl-C
 *   within 2 s, or one while nothing is pending, exits. Piped input: at EOF, wait until every line
 *   sent was answered, then exit.
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
  draftIdOf,
  parseCommand,
} from "../../src/gateway/kit/index.js";

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
  now?: () => number;
  /** Event ids (they are also the lines' message ids). Default random UUIDs. */
  newId?: () => string;
}

const EXIT_WINDOW_MS = 2_000;
const EXIT_HINT = "/exit: leave (or Ctrl-C twice)";

/** A line the gateway answers itself (no bus), by what it was. */
type GatewayAnswered = "help" | "stop" | "interrupt";

/** The reply being streamed onto the screen. */
interface Stream {
  /** `draft:<draftId>` (draft streaming) or `message:<platformMessageId>` (edit streaming). */
  key: string;
  /** The newest snapshot shown. */
  printed: string;
  /** Something else was printed since: go on from the start of a line. */
  interrupted: boolean;
}

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
  private stream: Stream | undefined;
  private midLine = false;
  private sentCount = 0;
  private lastInterrupt = Number.NEGATIVE_INFINITY;
  private inputEnded = false;
  private ended = false;
  private finished!: () => void;
  /** Resolves when the user left (or stop() was called). */
  readonly done: Promise<void> = new Promise((resolve) => (this.finished = resolve));

  constructor(private readonly options: CliChannelOptions) {}

  get sessionKey(): string {
    return `${this.name}:${this.options.chatId}`;
  }

  /** Lines sent that no reply has answered yet. */
  get pending(): number {
    return this.unanswered.size;
  }

  private get color(): boolean {
    return this.options.color ?? (Boolean(this.options.output.isTTY) && !process.env.NO_COLOR);
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

  /** Ctrl-C: stop the running turn; when nothing is pending, or pressed twice quickly, exit. */
  async interrupt(): Promise<void> {
    const now = this.now();
    const twice = now - this.lastInterrupt < EXIT_WINDOW_MS;
    this.lastInterrupt = now;
    if (this.pending === 0 || twice || !this.sink) return this.exit();
    // Straight to the sink, not behind queued lines: admission cancels the turn at once.
    await this.feed("/stop", "interrupt");
  }

  /** Leaves: stops reading and resolves `done`. What is still pending is dropped. */
  async exit(): Promise<void> {
    if (this.ended) return;
    this.ended = true;
    if (this.midLine) this.write("\n");
    this.midLine = false;
    this.lines?.close();
    this.finished();
  }

  async send(chatId: string, text: string, options: SendOptions): Promise<{ platformMessageId: string }> {
    const platformMessageId = `cli-out-${++this.sentCount}`;
    if (chatId !== this.options.chatId || this.ended) return { platformMessageId };
    const part = options.outbound;
    if (!part) {
      this.showGatewayReply(text, options.replyTo);
    } else if (part.kind === "notice") {
      this.interject(this.dim(`  ↳ ${text}`));
    } else {
      this.showFinal(text, part.messageId, part.chunk, part.chunks);
      if (part.chunk === part.chunks - 1) {
        for (const id of part.answers) this.unanswered.delete(id);
        this.afterReply();
      }
    }
    return { platformMessageId };
  }

  async edit(chatId: string, platformMessageId: string, text: string, options: SendOptions): Promise<void> {
    if (chatId !== this.options.chatId || this.ended) return;
    if (options.outbound) {
      await this.send(chatId, text, options);
      return;
    }
    this.streamTo(`message:${platformMessageId}`, text);
  }

  async draft(chatId: string, draftId: number, text: string): Promise<void> {
    if (chatId !== this.options.chatId || this.ended) return;
    this.streamTo(`draft:${draftId}`, text);
  }

  /** A terminal shows no "typing…". */
  async typing(_chatId: string): Promise<void> {}

  private enqueue(task: () => Promise<void>): void {
    this.queue = this.queue.then(task).catch((error: unknown) => this.interject(`(could not send that: ${error instanceof Error ? error.message : String(error)})`));
  }

  private async onLine(line: string): Promise<void> {
    if (this.ended) return;
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
    }
  }

  private onInputClosed(): void {
    // Piped input ended (or Ctrl-D): finish answering what was sent, then leave.
    this.inputEnded = true;
    this.exitWhenDone();
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
    if (answered === "interrupt") this.interject(this.dim(`(${text} Press Ctrl-C again to exit.)`));
    else if (answered === "stop") this.interject(this.dim(`(${text})`));
    else if (answered === "help") this.interject(`${text}\n${EXIT_HINT}`);
    else this.interject(`${this.header()}${text}`);
  }

  /** A chunk of a final: the end of the reply streamed under its id, or a message of its own. */
  private showFinal(text: string, messageId: string, chunk: number, chunks: number): void {
    const key = `draft:${draftIdOf(messageId)}`;
    if (this.stream?.key === key || (chunk === 0 && this.stream === undefined)) {
      if (chunk === 0) this.streamTo(key, text);
      else this.continueLine(text);
      if (chunk === chunks - 1) this.endStream();
      return;
    }
    // Not the reply on screen (a message the agent sent mid-turn): its own block.
    this.interject(chunk === 0 ? `${this.header()}${text}` : text);
  }

  /** Prints what a reply's newest snapshot adds to what is on screen. */
  private streamTo(key: string, text: string): void {
    if (this.stream?.key !== key) {
      if (this.midLine) this.write("\n");
      this.write(this.header());
      this.midLine = true;
      this.stream = { key, printed: "", interrupted: false };
    }
    const stream = this.stream;
    let addition: string;
    if (text.startsWith(stream.printed)) addition = text.slice(stream.printed.length);
    else if (stream.printed.startsWith(text)) addition = "";
    else addition = `\n${text}`;
    if (stream.interrupted && addition !== "") {
      // Below a notice: go on at the start of a line, without the blank line between segments.
      addition = addition.replace(/^\n+/, "");
      stream.interrupted = false;
    }
    this.write(addition);
    if (addition !== "") this.midLine = !addition.endsWith("\n");
    stream.printed = text;
  }

  private continueLine(text: string): void {
    if (this.midLine) this.write("\n");
    this.write(text);
    this.midLine = !text.endsWith("\n");
  }

  private endStream(): void {
    if (this.midLine) this.write("\n");
    this.midLine = false;
    this.stream = undefined;
  }

  /** A line of its own, between the lines of a streaming reply if one is on screen. */
  private interject(text: string): void {
    if (this.ended) return;
    if (this.midLine) this.write("\n");
    this.write(`${text}\n`);
    this.midLine = false;
    if (this.stream) this.stream.interrupted = true;
  }

  private header(): string {
    return this.color ? "\x1b[1mbot ›\x1b[22m " : "bot › ";
  }

  private prompt(): void {
    if (this.ended) return;
    if (this.options.output.isTTY) this.lines?.prompt();
  }

  private dim(text: string): string {
    return this.color ? `\x1b[2m${text}\x1b[22m` : text;
  }

  private write(text: string): void {
    if (text !== "") this.options.output.write(text);
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
