/**
 * The terminal as a channel: lines typed become inbound messages on the bus; drafts stream onto
 * the screen as they grow, tool calls show as one dim line each, finals end the reply.
 * `/stop` and Ctrl-C cancel the running turn; a second Ctrl-C (or one while idle) exits.
 */
import { randomUUID } from "node:crypto";
import readline from "node:readline";
import { helpText } from "../../src/agent/commands.js";
import type { InboundMessage } from "../../src/bus/message.js";
import type { MessageBus, OutboundEvent, Subscription } from "../../src/bus/types.js";

export interface CliChannelOptions {
  bus: MessageBus;
  input: NodeJS.ReadableStream;
  output: NodeJS.WritableStream & { isTTY?: boolean };
  chatId: string;
  /** Dim tool lines with ANSI escapes. Default: when the output is a terminal and NO_COLOR is unset. */
  color?: boolean;
  now?: () => number;
  newId?: () => string;
}

const EXIT_WINDOW_MS = 2_000;

export class CliChannel {
  readonly channel = "cli";
  private subscription: Subscription | undefined;
  private lines: readline.Interface | undefined;
  /** Inbound ids sent and not yet answered by a final. */
  private readonly pending = new Set<string>();
  private replyId: string | undefined;
  private printed = "";
  private midLine = false;
  private lastInterrupt = Number.NEGATIVE_INFINITY;
  private ended = false;
  private finished!: () => void;
  readonly done: Promise<void> = new Promise((resolve) => (this.finished = resolve));

  constructor(private readonly options: CliChannelOptions) {}

  get sessionKey(): string {
    return `${this.channel}:${this.options.chatId}`;
  }

  private get color(): boolean {
    return this.options.color ?? (Boolean(this.options.output.isTTY) && !process.env.NO_COLOR);
  }

  async start(): Promise<void> {
    this.subscription = await this.options.bus.consumeOutbound(this.channel, (event) => this.render(event));
    const interactive = Boolean(this.options.output.isTTY);
    this.lines = readline.createInterface({ input: this.options.input, output: interactive ? this.options.output : undefined, terminal: interactive });
    this.lines.setPrompt("you › ");
    this.lines.on("line", (line) => void this.onLine(line));
    this.lines.on("SIGINT", () => void this.interrupt());
    this.lines.on("close", () => void this.onInputClosed());
    this.prompt();
  }

  /** Ctrl-C: stop the running turn; when idle or pressed twice quickly, exit. */
  async interrupt(): Promise<void> {
    const now = (this.options.now ?? Date.now)();
    const twice = now - this.lastInterrupt < EXIT_WINDOW_MS;
    this.lastInterrupt = now;
    if (this.pending.size === 0 || twice) {
      await this.exit();
      return;
    }
    this.writeLine(this.dim("(stopping… press Ctrl-C again to exit)"));
    await this.options.bus.requestCancel(this.sessionKey);
  }

  async exit(): Promise<void> {
    if (this.ended) return;
    this.ended = true;
    this.lines?.close();
    await this.subscription?.close();
    this.finished();
  }

  private async onLine(line: string): Promise<void> {
    const text = line.trim();
    if (text === "") return this.prompt();
    const command = text.toLowerCase();
    if (command === "/exit" || command === "/quit") return this.exit();
    if (command === "/help") {
      this.writeLine(`${helpText}\n/exit: leave (or Ctrl-C twice)`);
      return this.prompt();
    }
    if (command === "/stop") {
      // Acted on at once: queued behind the running turn it could not stop it.
      await this.options.bus.requestCancel(this.sessionKey);
      return;
    }
    const message: InboundMessage = {
      id: (this.options.newId ?? randomUUID)(),
      channel: this.channel,
      chatId: this.options.chatId,
      senderId: "local-user",
      content: text,
      media: [],
      mentions: [],
      receivedAt: (this.options.now ?? Date.now)(),
      metadata: {},
    };
    this.pending.add(message.id);
    await this.options.bus.publishInbound(message);
  }

  private async onInputClosed(): Promise<void> {
    // Piped input ended: finish answering what was sent, then leave.
    while (this.pending.size > 0 && !this.ended) await new Promise((resolve) => setTimeout(resolve, 20));
    await this.exit();
  }

  private async render(event: OutboundEvent): Promise<void> {
    if (event.type === "draft") {
      if (event.draft.chatId !== this.options.chatId) return;
      this.streamTo(event.draft.replyId, event.draft.text);
      return;
    }
    const message = event.message;
    if (message.chatId !== this.options.chatId) return;
    if (message.kind === "notice") {
      if (this.midLine) this.write("\n");
      this.writeLine(this.dim(`  ↳ ${message.content}`));
      return;
    }
    if (message.kind === "draft") return;
    this.streamTo(message.id, message.content);
    this.write("\n");
    this.midLine = false;
    this.replyId = undefined;
    this.printed = "";
    const answered = Array.isArray(message.metadata.answers) ? message.metadata.answers : [];
    for (const id of answered) this.pending.delete(String(id));
    if (this.pending.size === 0) this.prompt();
  }

  /** Prints what a reply's newest text adds to what is already on screen. */
  private streamTo(replyId: string, text: string): void {
    if (replyId !== this.replyId) {
      this.replyId = replyId;
      this.printed = "";
      if (this.midLine) this.write("\n");
      this.write(this.color ? "\x1b[1mbot ›\x1b[22m " : "bot › ");
    }
    const addition = text.startsWith(this.printed) ? text.slice(this.printed.length) : `\n${text}`;
    if (addition !== "") {
      this.write(addition);
      this.midLine = !addition.endsWith("\n");
    }
    this.printed = text;
  }

  private prompt(): void {
    if (this.ended) return;
    if (this.options.output.isTTY) this.lines?.prompt();
  }

  private dim(text: string): string {
    return this.color ? `\x1b[2m${text}\x1b[22m` : text;
  }

  private write(text: string): void {
    this.options.output.write(text);
  }

  private writeLine(text: string): void {
    this.write(`${text}\n`);
    this.midLine = false;
  }
}
