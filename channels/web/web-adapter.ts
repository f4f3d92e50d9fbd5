/**
 * The web page as a channel: a ChannelAdapter on the shared runtime like every platform. Admission
 * judges what is posted (`/stop` cancels at once, `/help` is answered at the gateway, `/new` and
 * the rest go onto the bus); the dispatcher delivers replies (delivery dedupe per chunk, drafts).
 *
 * - Inbound: `POST /api/chat/:chatId/messages` becomes a PlatformEvent of a private chat; the
 *   answer says what admission did (202 queued, 200 a retried `clientMessageId`, 429 over the
 *   rate limit). Authentication is the API server's (bearer token), so the policy is open.
 * - Outbound: `GET /ws?chatId=` streams the chat's drafts, tool notices and replies, one JSON
 *   object per WebSocket message (WebEvent). A final that finds no socket open is kept (bounded)
 *   and sent when one connects, so a reply survives a page reload; drafts and notices are only for
 *   whoever is watching.
 * - Several gateways: every gateway runs this channel (no leader: the page connects to any of
 *   them) and consumes a share of the replies; each event is also fanned out over the bus so the
 *   gateway that holds the chat's socket sends it. A client may see a final twice (once live from
 *   another gateway, once from a buffer here): its id is stable, dedupe on it.
 */
import { randomUUID } from "node:crypto";
import type { FastifyInstance } from "fastify";
import type { Logger } from "pino";
import type { WebSocket } from "ws";
import { z } from "zod";
import type { Subscription } from "../../src/bus/message-bus.js";
import { ChannelError } from "../../src/errors.js";
import { type AdmissionOutcome, type ChannelAdapter, type ChannelCapabilities, type ChannelDependencies, type EventSink, type SendOptions, compositeKey } from "../../src/gateway/channel.js";
import { parseRequest } from "../../src/gateway/http-request.js";

export const WEB_CHANNEL = "web";

export const ChatIdSchema = z
  .string()
  .min(1)
  .max(128)
  .regex(/^[\w:.-]+$/, "letters, digits, _ : . and - only");

export const SendMessageBodySchema = z.strictObject({
  content: z
    .string()
    .min(1)
    .max(32_768)
    .refine((content) => content.trim() !== "", "expected some text, not only spaces"),
  /** Who wrote it, when the page knows (several people in one chat). Default: `web-user`. */
  senderId: z.string().min(1).max(128).optional(),
  /** The page's own id for the message: a retried POST with the same id is queued once. */
  clientMessageId: z.string().min(1).max(128).optional(),
});
export type SendMessageBody = z.infer<typeof SendMessageBodySchema>;

const ChatParamsSchema = z.object({ chatId: ChatIdSchema });

/** What a socket receives, one JSON object per WebSocket message. */
export type WebEvent =
  | { type: "draft"; replyId: string; text: string }
  | { type: "notice"; id: string; content: string }
  /**
   * A reply. `answers`: the ids (from POST) of the messages this reply answers. A reply too long
   * for one message comes in parts, each with `part` (0-based) and `parts`.
   */
  | { type: "message"; id: string; content: string; answers: string[]; part?: number; parts?: number };

export const webCapabilities: ChannelCapabilities = {
  // The page renders Markdown itself and takes long replies in one piece.
  maxMessageLength: 100_000,
  markdown: "plain",
  streaming: "draft",
  // The agent already throttles drafts; a draft goes out as soon as it arrives.
  draftIntervalMs: 0,
  minSendIntervalMs: 0,
  chatType: "private",
};

export interface WebAdapterOptions extends Pick<ChannelDependencies, "bus" | "logger" | "now" | "newId"> {
  /** Finals kept per chat while no socket is open; the oldest go first. Default 50. */
  maxPendingPerChat?: number;
  /** Chats with kept finals; the chat idle longest is dropped first. Default 10,000. */
  maxPendingChats?: number;
  /** Ping every socket this often and drop those that did not answer the last ping. 0: never. Default 30 s. */
  pingIntervalMs?: number;
  /** Skip drafts for a socket with more than this many bytes not yet written (a slow client). Default 1 MiB. */
  maxDraftBacklogBytes?: number;
}

interface PendingFinal {
  /** Publish order, so a final put back after a failed send keeps its place. */
  sequence: number;
  event: WebEvent & { type: "message" };
}

/** How the POST is answered, by what admission did. */
type Receipt = { status: number; body: Record<string, unknown> };

export class WebAdapter implements ChannelAdapter {
  readonly name = WEB_CHANNEL;
  readonly capabilities = webCapabilities;
  private readonly logger: Logger;
  private readonly newId: () => string;
  private readonly now: () => number;
  private readonly sockets = new Map<string, Set<WebSocket>>();
  private readonly alive = new WeakMap<WebSocket, boolean>();
  private readonly pending: PendingFinals;
  /** compositeKey(chatId, clientMessageId) → the inbound id it was queued under, to answer a retry with it. */
  private readonly accepted = new BoundedMap<string, string>(10_000);
  private sink: EventSink | undefined;
  private fanIn: Subscription | undefined;
  private pingTimer: NodeJS.Timeout | undefined;
  private sequence = 0;
  /** Names this gateway in fan-out messages, so it ignores its own. */
  private readonly instance = randomUUID();

  constructor(private readonly options: WebAdapterOptions) {
    this.logger = options.logger.child({ channel: WEB_CHANNEL });
    this.newId = options.newId ?? randomUUID;
    this.now = options.now ?? Date.now;
    this.pending = new PendingFinals(options.maxPendingPerChat ?? 50, options.maxPendingChats ?? 10_000, (chatId, dropped) =>
      this.logger.warn({ chatId, dropped }, "web replies dropped: no socket connected and the buffer is full"),
    );
  }

  async start(sink: EventSink): Promise<void> {
    this.sink = sink;
    this.fanIn ??= await this.options.bus.onBroadcast(WEB_CHANNEL, (payload) => this.fromOtherGateway(payload));
    const interval = this.options.pingIntervalMs ?? 30_000;
    if (interval > 0 && !this.pingTimer) {
      this.pingTimer = setInterval(() => this.pingAll(), interval);
      this.pingTimer.unref();
    }
  }

  /** Stops taking messages, then closes every socket (1001, going away). */
  async stop(): Promise<void> {
    this.sink = undefined;
    if (this.pingTimer) clearInterval(this.pingTimer);
    this.pingTimer = undefined;
    await this.fanIn?.close();
    this.fanIn = undefined;
    for (const sockets of this.sockets.values()) for (const socket of sockets) socket.close(1001, "server shutting down");
    this.sockets.clear();
    const kept = this.pending.size;
    if (kept > 0) this.logger.warn({ replies: kept }, "web replies not delivered before shutdown");
  }

  /**
   * Adds the channel's routes to `app`, which must have `@fastify/websocket` registered (and
   * loaded: call this from a plugin registered after it). Authentication is the server's job.
   */
  registerRoutes(app: FastifyInstance): void {
    app.post("/api/chat/:chatId/messages", async (request, reply) => {
      const { chatId } = parseRequest(ChatParamsSchema, request.params, "params");
      const body = parseRequest(SendMessageBodySchema, request.body, "body");
      const receipt = await this.receive(chatId, body);
      return reply.code(receipt.status).send(receipt.body);
    });

    app.get(
      "/ws",
      {
        websocket: true,
        // Runs before the upgrade, so a bad chat id is an HTTP 400 and not a socket that closes at once.
        preValidation: async (request) => void parseRequest(ChatParamsSchema, request.query, "query"),
      },
      (socket, request) => this.attach(parseRequest(ChatParamsSchema, request.query, "query").chatId, socket),
    );
  }

  /** Hands a message from the page to admission. A clientMessageId seen before queues nothing. */
  async receive(chatId: string, body: SendMessageBody): Promise<Receipt> {
    const sink = this.sink;
    if (!sink) return { status: 503, body: { error: "the web channel is not running" } };
    const id = this.newId();
    // Scoped to the chat, because the bus dedupes per channel and pages may number their own
    // messages; length-prefixed, because chat ids may contain `:` (`a:b` + `1` is not `a` + `b:1`).
    const retryKey = body.clientMessageId === undefined ? undefined : compositeKey(chatId, body.clientMessageId);
    let outcome: AdmissionOutcome;
    try {
      outcome = await this.admit(sink, id, chatId, retryKey, body);
    } catch (error) {
      // Accepted means stored: a message the bus could not store (Redis away) is an error the
      // page retries, with the same clientMessageId so a publish that did land is not queued twice.
      this.logger.warn({ err: error, sessionKey: `${WEB_CHANNEL}:${chatId}`, clientMessageId: body.clientMessageId }, "web message not stored");
      return { status: 503, body: { error: "the message could not be stored; send it again (with the same clientMessageId)" } };
    }
    const fields = { sessionKey: `${WEB_CHANNEL}:${chatId}`, clientMessageId: body.clientMessageId };
    switch (outcome) {
      case "published":
        if (retryKey !== undefined) this.accepted.set(retryKey, id);
        this.logger.debug({ ...fields, messageId: id }, "web message queued");
        return { status: 202, body: { id } };
      case "duplicate": {
        // The first request's id, when this process took it; another gateway's is not known here.
        const original = retryKey === undefined ? undefined : this.accepted.get(retryKey);
        this.logger.debug(fields, "duplicate web message ignored");
        return { status: 200, body: original === undefined ? { duplicate: true } : { id: original, duplicate: true } };
      }
      case "rate-limited":
      case "ignored:rate-limited":
        return { status: 429, body: { error: "too many messages: wait a minute before sending more" } };
      case "command:stop":
      case "command:help":
        return { status: 200, body: { id, command: outcome.slice("command:".length) } };
      default:
        return { status: 202, body: { id, outcome } };
    }
  }

  private admit(sink: EventSink, id: string, chatId: string, retryKey: string | undefined, body: SendMessageBody): Promise<AdmissionOutcome> {
    return sink({
      eventId: retryKey ?? id,
      chatId,
      chatType: "private",
      senderId: body.senderId ?? "web-user",
      senderIsBot: false,
      text: body.content,
      mentionsBot: false,
      repliesToBot: false,
      platformMessageId: id,
      media: [],
      receivedAt: this.now(),
      metadata: body.clientMessageId === undefined ? {} : { clientMessageId: body.clientMessageId },
    });
  }

  /** Whether it takes messages (started, not stopped). */
  get running(): boolean {
    return this.sink !== undefined;
  }

  /** Sockets open for `chatId` (for tests and metrics). */
  connections(chatId: string): number {
    return this.sockets.get(chatId)?.size ?? 0;
  }

  /** Finals kept for `chatId` until a socket connects (for tests and metrics). */
  waiting(chatId: string): number {
    return this.pending.count(chatId);
  }

  async send(chatId: string, text: string, options: SendOptions): Promise<{ platformMessageId: string }> {
    const part = options.outbound;
    if (part?.kind === "notice") {
      await this.emit(chatId, { type: "notice", id: part.messageId, content: text });
      return { platformMessageId: part.messageId };
    }
    // Without an annotation it is the gateway's own reply (`/help`, `/stop`): a message of its own.
    const id = part?.messageId ?? `gateway-${this.newId()}`;
    const event: WebEvent & { type: "message" } = { type: "message", id, content: text, answers: part?.answers ?? [] };
    if (part && part.chunks > 1) Object.assign(event, { part: part.chunk, parts: part.chunks });
    this.sendFinal(chatId, { sequence: ++this.sequence, event }, this.openSockets(chatId));
    await this.fanOut(chatId, event);
    return { platformMessageId: id };
  }

  /** Web chats stream as drafts; a message is never edited in place. */
  async edit(): Promise<void> {
    throw new ChannelError("the web channel does not edit messages", "not-found");
  }

  async draft(chatId: string, _draftId: number, text: string, replyId: string): Promise<void> {
    const event: WebEvent = { type: "draft", replyId, text };
    this.sendDraft(chatId, event);
    await this.fanOut(chatId, event);
  }

  async typing(): Promise<void> {}

  private async emit(chatId: string, event: WebEvent): Promise<void> {
    this.broadcast(chatId, event);
    await this.fanOut(chatId, event);
  }

  private attach(chatId: string, socket: WebSocket): void {
    let sockets = this.sockets.get(chatId);
    if (!sockets) {
      sockets = new Set();
      this.sockets.set(chatId, sockets);
    }
    sockets.add(socket);
    this.alive.set(socket, true);
    socket.on("pong", () => this.alive.set(socket, true));
    socket.on("close", () => this.detach(chatId, socket));
    socket.on("error", (error) => this.logger.debug({ err: error, chatId }, "web socket error"));
    // What waited for this chat goes first; anything published after it comes through send().
    for (const final of this.pending.take(chatId)) this.sendFinal(chatId, final, [socket]);
  }

  private detach(chatId: string, socket: WebSocket): void {
    const sockets = this.sockets.get(chatId);
    if (!sockets) return;
    sockets.delete(socket);
    if (sockets.size === 0) this.sockets.delete(chatId);
  }

  /** Tells the other gateways, whose sockets for this chat this one cannot reach. */
  private async fanOut(chatId: string, event: WebEvent): Promise<void> {
    try {
      await this.options.bus.broadcast(WEB_CHANNEL, JSON.stringify({ from: this.instance, chatId, event }));
    } catch (error) {
      this.logger.warn({ err: error, chatId }, "could not fan a web event out to the other gateways");
    }
  }

  /** An event another gateway delivered: only sockets open here get it; nothing is buffered. */
  private fromOtherGateway(payload: string): void {
    let parsed: { from: string; chatId: string; event: WebEvent };
    try {
      parsed = JSON.parse(payload) as typeof parsed;
    } catch {
      return;
    }
    if (parsed.from === this.instance) return;
    if (parsed.event.type === "draft") this.sendDraft(parsed.chatId, parsed.event);
    else this.broadcast(parsed.chatId, parsed.event);
  }

  private sendDraft(chatId: string, event: WebEvent): void {
    const limit = this.options.maxDraftBacklogBytes ?? 1024 * 1024;
    const data = JSON.stringify(event);
    // Drafts are snapshots: a client that cannot keep up simply gets a later one.
    for (const socket of this.openSockets(chatId)) if (socket.bufferedAmount <= limit) socket.send(data);
  }

  private broadcast(chatId: string, event: WebEvent): void {
    const data = JSON.stringify(event);
    for (const socket of this.openSockets(chatId)) socket.send(data);
  }

  /**
   * Sends a final to `sockets` without waiting for the writes (one slow client must not hold up
   * every chat). When no socket is open, or every write fails, the final is kept for the next one.
   */
  private sendFinal(chatId: string, final: PendingFinal, sockets: WebSocket[]): void {
    if (sockets.length === 0) {
      this.pending.keep(chatId, final);
      return;
    }
    const data = JSON.stringify(final.event);
    let outstanding = sockets.length;
    let written = false;
    for (const socket of sockets) {
      socket.send(data, (error) => {
        if (!error) written = true;
        outstanding -= 1;
        if (outstanding === 0 && !written) {
          const open = this.openSockets(chatId).filter((candidate) => !sockets.includes(candidate));
          this.sendFinal(chatId, final, open);
        }
      });
    }
  }

  private openSockets(chatId: string): WebSocket[] {
    const sockets = this.sockets.get(chatId);
    if (!sockets) return [];
    return [...sockets].filter((socket) => socket.readyState === socket.OPEN);
  }

  private pingAll(): void {
    for (const sockets of this.sockets.values()) {
      for (const socket of sockets) {
        // No pong since the last ping: the peer is gone without closing; its replies go to the buffer.
        if (!this.alive.get(socket)) {
          socket.terminate();
          continue;
        }
        this.alive.set(socket, false);
        socket.ping();
      }
    }
  }
}

/** Finals waiting for a socket: at most `perChat` per chat (oldest dropped), at most `chats` chats (least recent dropped). */
class PendingFinals {
  private readonly chats = new Map<string, PendingFinal[]>();

  constructor(
    private readonly perChat: number,
    private readonly maxChats: number,
    private readonly onDrop: (chatId: string, dropped: number) => void,
  ) {}

  get size(): number {
    let total = 0;
    for (const finals of this.chats.values()) total += finals.length;
    return total;
  }

  keep(chatId: string, final: PendingFinal): void {
    const finals = this.chats.get(chatId) ?? [];
    this.chats.delete(chatId);
    this.chats.set(chatId, finals);
    let index = finals.length;
    while (index > 0 && finals[index - 1]!.sequence > final.sequence) index -= 1;
    finals.splice(index, 0, final);
    if (finals.length > this.perChat) this.onDrop(chatId, finals.splice(0, finals.length - this.perChat).length);
    while (this.chats.size > this.maxChats) {
      const [oldest, dropped] = this.chats.entries().next().value!;
      this.chats.delete(oldest);
      this.onDrop(oldest, dropped.length);
    }
  }

  count(chatId: string): number {
    return this.chats.get(chatId)?.length ?? 0;
  }

  take(chatId: string): PendingFinal[] {
    const finals = this.chats.get(chatId) ?? [];
    this.chats.delete(chatId);
    return finals;
  }
}

/** A Map that forgets its oldest entry beyond `limit`. */
class BoundedMap<Key, Value> {
  private readonly entries = new Map<Key, Value>();

  constructor(private readonly limit: number) {}

  get(key: Key): Value | undefined {
    return this.entries.get(key);
  }

  set(key: Key, value: Value): void {
    this.entries.delete(key);
    this.entries.set(key, value);
    if (this.entries.size > this.limit) this.entries.delete(this.entries.keys().next().value!);
  }
}
