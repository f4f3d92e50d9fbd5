/**
 * A streamed answer as OpenAI sends one: server-sent events, each `data:` a `chat.completion.chunk`
 * (the role first, then the text as it grows, then the finish, then the usage when asked for),
 * and `data: [DONE]` at the end. While nothing comes (a tool runs, a team works) an SSE comment
 * every so often keeps proxies from cutting the connection; clients skip comments.
 */
import type { FastifyReply } from "fastify";
import { type AnswerHeader, type TokenCounts, chunkObject, unshownTail, usageChunk } from "./wire.js";

export interface ChunkStreamOptions {
  header: AnswerHeader;
  /** The request asked `stream_options.include_usage`. */
  includeUsage: boolean;
  /** Default 15 s. */
  keepAliveMs?: number;
}

export class ChunkStream {
  private shown = "";
  /** Text that came before the stream was open. */
  private early: string[] | undefined = [];
  private keepAlive: NodeJS.Timeout | undefined;
  private ended = false;

  constructor(
    private readonly reply: FastifyReply,
    private readonly options: ChunkStreamOptions,
  ) {}

  /** Sends the headers and the role chunk, then any text that came meanwhile. */
  open(): void {
    const { reply } = this;
    reply.hijack();
    // Hijacked, the reply's own headers (helmet's) are not sent unless passed on.
    for (const [name, value] of Object.entries(reply.getHeaders())) if (value !== undefined) reply.raw.setHeader(name, value);
    reply.raw.writeHead(200, { "content-type": "text/event-stream; charset=utf-8", "cache-control": "no-cache", connection: "keep-alive", "x-accel-buffering": "no" });
    this.event(chunkObject(this.options.header, { role: "assistant", content: "" }, null, this.options.includeUsage));
    const early = this.early ?? [];
    this.early = undefined;
    for (const delta of early) this.text(delta);
    this.keepAlive = setInterval(() => this.write(": keep-alive\n\n"), this.options.keepAliveMs ?? 15_000);
    this.keepAlive.unref();
    reply.raw.once("close", () => this.stopKeepAlive());
  }

  /** New text of the answer. */
  text(delta: string): void {
    if (this.early) return void this.early.push(delta);
    if (delta === "") return;
    this.shown += delta;
    this.event(chunkObject(this.options.header, { content: delta }, null, this.options.includeUsage));
  }

  /** The whole answer: what the stream has not shown of it, the finish, the usage, `[DONE]`. */
  finish(content: string, usage: TokenCounts | undefined): void {
    const tail = unshownTail(this.shown, content);
    if (tail !== "") this.text(tail);
    const { header, includeUsage } = this.options;
    this.event(chunkObject(header, {}, "stop", includeUsage));
    if (includeUsage) this.event(usageChunk(header, usage));
    this.write("data: [DONE]\n\n");
    this.end();
  }

  /** Ends the stream with an error event (`data: {"error": ...}`), which clients raise. */
  fail(body: unknown): void {
    this.event(body);
    this.end();
  }

  private event(body: unknown): void {
    this.write(`data: ${JSON.stringify(body)}\n\n`);
  }

  private write(text: string): void {
    const { raw } = this.reply;
    if (this.ended || raw.destroyed || raw.writableEnded) return;
    raw.write(text);
  }

  private end(): void {
    this.stopKeepAlive();
    if (this.ended) return;
    this.ended = true;
    if (!this.reply.raw.writableEnded) this.reply.raw.end();
  }

  private stopKeepAlive(): void {
    if (this.keepAlive) clearInterval(this.keepAlive);
    this.keepAlive = undefined;
  }
}
