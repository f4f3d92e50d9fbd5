/**
 * What the terminal chat prints: replies as they stream, tool lines between them, the gateway's
 * own answers, and the "thinking… Ns" indicator while a reply is awaited.
 *
 * - Piped output (no `markdown`): a reply's snapshots print what each adds to what is shown, the
 *   model's Markdown as it is (a file or a script reads Markdown well).
 * - A terminal (`markdown`): rendered, block by block as each is complete (terminal-markdown.ts).
 * - The indicator shows whenever a reply is awaited and the cursor is at the start of a line; it is
 *   hidden before anything is printed, so it yields to streamed text and tool lines, and comes back
 *   while the turn goes on ("thinking" before the reply's first words, "writing" after).
 */
import { draftIdOf } from "../../src/gateway/kit/index.js";
import { MarkdownBlocks, type TerminalMarkdown } from "./terminal-markdown.js";
import type { ReplyIndicator } from "./reply-indicator.js";

export interface ReplyScreenOptions {
  output: NodeJS.WritableStream;
  /** Bold header and dim lines with ANSI escapes. */
  color: boolean;
  /** Render the model's Markdown (a terminal); absent: print it as it is. */
  markdown?: TerminalMarkdown;
  indicator?: ReplyIndicator;
}

/** The reply being streamed onto the screen. */
interface Stream {
  /** `draft:<draftId>` (draft streaming) or `message:<platformMessageId>` (edit streaming). */
  key: string;
  /** The newest snapshot shown. */
  printed: string;
  /** Something else was printed since: go on from the start of a line. */
  interrupted: boolean;
  /** Rendered mode: which blocks are on screen. */
  blocks?: MarkdownBlocks;
  /** Rendered mode: the header was printed. */
  started: boolean;
}

export class ReplyScreen {
  private stream: Stream | undefined;
  private midLine = false;
  private waitingSince: number | undefined;
  private closed = false;

  constructor(private readonly options: ReplyScreenOptions) {}

  /** A reply is awaited since `since` (undefined: none is). */
  setWaiting(since: number | undefined): void {
    this.waitingSince = since;
    this.refreshIndicator();
  }

  /** A line of its own, between the lines of a streaming reply if one is on screen. */
  interject(text: string): void {
    if (this.closed) return;
    if (this.midLine) this.write("\n");
    this.write(`${text}\n`);
    this.midLine = false;
    if (this.stream) this.stream.interrupted = true;
    this.refreshIndicator();
  }

  /** A reply's newest snapshot (a draft, or an edited message). */
  streamTo(key: string, text: string): void {
    if (this.closed) return;
    if (this.options.markdown) this.streamRendered(key, text, false);
    else this.streamRaw(key, text);
    this.refreshIndicator();
  }

  /** A chunk of a final: the end of the reply streamed under its id, or a message of its own. */
  showFinal(text: string, messageId: string, chunk: number, chunks: number): void {
    if (this.closed) return;
    const key = `draft:${draftIdOf(messageId)}`;
    if (this.stream?.key === key || (chunk === 0 && this.stream === undefined)) {
      if (chunk === 0 && this.options.markdown) this.streamRendered(key, text, true);
      else if (chunk === 0) this.streamRaw(key, text);
      else this.continueLine(this.rendered(text));
      if (chunk === chunks - 1) this.endStream();
    } else {
      // Not the reply on screen (a message the agent sent mid-turn): its own block.
      this.interject(chunk === 0 ? this.withHeader(this.rendered(text)) : this.rendered(text).replace(/\n$/, ""));
    }
    this.refreshIndicator();
  }

  /** The gateway's own answer, plain: a header unless it answers a command typed here. */
  showPlain(text: string, header: boolean): void {
    this.interject(header ? `${this.header()}${text}` : text);
  }

  /** Ends the line on screen and removes the indicator: nothing is printed after. */
  close(): void {
    if (this.closed) return;
    this.options.indicator?.hide();
    if (this.midLine) this.write("\n");
    this.midLine = false;
    this.closed = true;
  }

  dim(text: string): string {
    return this.options.color ? `\x1b[2m${text}\x1b[22m` : text;
  }

  private header(): string {
    return this.options.color ? "\x1b[1mbot ›\x1b[22m " : "bot › ";
  }

  /** The header before rendered text; on a line of its own when the text starts indented (a list, code). */
  private withHeader(rendered: string): string {
    return `${this.header()}${/^\s/.test(rendered) ? "\n" : ""}${rendered.replace(/\n$/, "")}`;
  }

  private rendered(text: string): string {
    return this.options.markdown ? new MarkdownBlocks(this.options.markdown).finish(text) : text;
  }

  /** Prints what a snapshot adds to what is on screen, as it is. */
  private streamRaw(key: string, text: string): void {
    if (this.stream?.key !== key) {
      if (this.midLine) this.write("\n");
      this.write(this.header());
      this.midLine = true;
      this.stream = { key, printed: "", interrupted: false, started: true };
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

  /** Prints the blocks a snapshot completed (all of them when final), rendered. */
  private streamRendered(key: string, text: string, final: boolean): void {
    if (this.stream?.key !== key) {
      if (this.midLine) this.write("\n");
      this.midLine = false;
      this.stream = { key, printed: "", interrupted: false, blocks: new MarkdownBlocks(this.options.markdown!), started: false };
    }
    const stream = this.stream;
    const blocks = final ? stream.blocks!.finish(text) : stream.blocks!.next(text);
    stream.printed = text;
    if (blocks === "") return;
    const output = stream.started ? blocks : `${this.withHeader(blocks)}${blocks.endsWith("\n") ? "\n" : ""}`;
    stream.started = true;
    stream.interrupted = false;
    this.write(output);
    this.midLine = !output.endsWith("\n");
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

  private refreshIndicator(): void {
    const indicator = this.options.indicator;
    if (!indicator) return;
    if (this.closed || this.waitingSince === undefined || this.midLine) return indicator.hide();
    indicator.show(this.stream && this.stream.printed !== "" ? "writing" : "thinking", this.waitingSince);
  }

  private write(text: string): void {
    if (text === "") return;
    // The indicator's line is cleared first: nothing is printed over it.
    this.options.indicator?.hide();
    this.options.output.write(text);
  }
}
