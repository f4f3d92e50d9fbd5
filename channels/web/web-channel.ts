/**
 * The web as a channel. `POST /api/chat/:chatId/messages` puts a message on the bus;
 * `GET /ws?chatId=` streams that chat's drafts, tool notices and final replies, in order.
 *
 * One consumer of the bus's `web` outbound channel per process fans events out to the sockets of
 * each chat. A final that finds no socket open is kept (bounded) and sent when one connects, so a
 * reply survives a page reload; drafts and notices are only for whoever is watching. Finals are
 * deduped with `bus.markDelivered` before they are sent or kept: a turn re-run after a crash repeats
 * its ids, and the repeat is dropped here.
 */
import { randomUUID } from "node:crypto";
import type { FastifyInstance } from "fastify";
import type { Logger } from "pino";
import type { WebSocket } from "ws";
import { z } from "zod";
import { parseRequest } from "../../src/api/validation.js";
import type { InboundMessage, OutboundMessage } from "../../src/bus/message.js";
import type { MessageBus, OutboundEvent, Subscription } from "../../src/bus/message-bus.js";

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
  /** A final reply. `answers`: the ids (from POST) of the messages this reply answers. */
  | { type: "message"; id: string; content: string; answers: string[] };

export interface WebChannelOptions {
  bus: MessageBus;
  logger: Logger;
  newId?: () => string;
  now?: () => number;
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

export class WebChannel {
  readonly channel = WEB_CHANNEL;
  private readonly logger: Logger;
  private readonly newId: () => string;
  private readonly now: () => number;
  private readonly sockets = new Map<string, Set<WebSocket>>();
  private readonly alive = new WeakMap<WebSocket, boolean>();
  private readonly pending: PendingFinals;
  /** `chatId:clientMessageId` → the inbound id it was queued under, to answer a retry with it. */
  private readonly accepted = new BoundedMap<string, string>(10_000);
  private subscription: Subscription | undefined;
  private fanIn: Subscription | undefined;
  private pingTimer: NodeJS.Timeout | undefined;
  private sequence = 0;
  /** Names this gateway in fan-out messages, so it ignores its own. */
  private readonly instance = randomUUID();

  constructor(private readonly options: WebChannelOptions) {
    this.logger = options.logger.child({ channel: WEB_CHANNEL });
    this.newId = options.newId ?? randomUUID;
    this.now = options.now ?? Date.now;
    this.pending = new PendingFinals(options.maxPendingPerChat ?? 50, options.maxPendingChats ?? 10_000, (chatId, dropped) =>
      this.logger.warn({ chatId, dropped }, "web replies dropped: no socket connected and the buffer is full"),
    );
  }

  /** Start consuming the bus's `web` outbound channel. Call once per process. */
  async start(): Promise<void> {
    if (this.subscription) return;
    // With several gateways each consumes a share of the replies; every reply is also fanned out so
    // the gateway that holds the chat's socket sends it. Clients may see a final twice (once live
    // from another gateway, once from a buffer here): its id is stable, dedupe on it.
    this.fanIn = await this.options.bus.onBroadcast(WEB_CHANNEL, (payload) => this.fromOtherGateway(payload));
    this.subscription = await this.options.bus.consumeOutbound(WEB_CHANNEL, (event) => this.deliver(event));
    const interval = this.options.pingIntervalMs ?? 30_000;
    if (interval > 0) {
      this.pingTimer = setInterval(() => this.pingAll(), interval);
      this.pingTimer.unref();
    }
  }

  /** Stop consuming, then close every socket (1001, going away). */
  async close(): Promise<void> {
    if (this.pingTimer) clearInterval(this.pingTimer);
    this.pingTimer = undefined;
    await this.subscription?.close();
    this.subscription = undefined;
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
      const result = await this.receive(chatId, body);
      if (result.duplicate) return reply.code(200).send(result);
      return reply.code(202).send({ id: result.id });
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

  /** Queues a message from the page on the bus. A clientMessageId seen before queues nothing. */
  async receive(chatId: string, body: SendMessageBody): Promise<{ id: string; duplicate?: undefined } | { id?: string; duplicate: true }> {
    const id = this.newId();
    const message: InboundMessage = {
      id,
      channel: WEB_CHANNEL,
      chatId,
      senderId: body.senderId ?? "web-user",
      content: body.content,
      media: [],
      mentions: [],
      receivedAt: this.now(),
      // Scoped to the chat, because the bus dedupes per channel and pages may number their own messages.
      ...(body.clientMessageId === undefined ? {} : { platformEventId: `${chatId}:${body.clientMessageId}` }),
      metadata: body.clientMessageId === undefined ? {} : { clientMessageId: body.clientMessageId },
    };
    const { accepted } = await this.options.bus.publishInbound(message);
    const retryKey = body.clientMessageId === undefined ? undefined : `${chatId}:${body.clientMessageId}`;
    if (!accepted) {
      // The first request's id, when this process took it; another gateway's is not known here.
      const original = retryKey === undefined ? undefined : this.accepted.get(retryKey);
      this.logger.debug({ sessionKey: `${WEB_CHANNEL}:${chatId}`, clientMessageId: body.clientMessageId }, "duplicate web message ignored");
      return original === undefined ? { duplicate: true } : { id: original, duplicate: true };
    }
    if (retryKey !== undefined) this.accepted.set(retryKey, id);
    this.logger.debug({ sessionKey: `${WEB_CHANNEL}:${chatId}`, messageId: id }, "web message queued");
    return { id };
  }

  /** Sockets open for `chatId` (for tests and metrics). */
  connections(chatId: string): number {
    return this.sockets.get(chatId)?.size ?? 0;
  }

  /** Finals kept for `chatId` until a socket connects (for tests and metrics). */
  waiting(chatId: string): number {
    return this.pending.count(chatId);
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
    // What waited for this chat goes first; anything published after it comes through deliver().
    for (const final of this.pending.take(chatId)) this.sendFinal(chatId, final, [socket]);
  }

  private detach(chatId: string, socket: WebSocket): void {
    const sockets = this.sockets.get(chatId);
    if (!sockets) return;
    sockets.delete(socket);
    if (sockets.size === 0) this.sockets.delete(chatId);
  }

  /** The bus's handler: resolving acknowledges the event, throwing (e.g. Redis down) leaves it for redelivery. */
  private async deliver(event: OutboundEvent): Promise<void> {
    if (event.type === "draft") {
      this.sendDraft(event.draft.chatId, { type: "draft", replyId: event.draft.replyId, text: event.draft.text });
      return this.fanOut(event.draft.chatId, { type: "draft", replyId: event.draft.replyId, text: event.draft.text });
    }
    const message = event.message;
    if (message.kind === "draft") {
      this.sendDraft(message.chatId, { type: "draft", replyId: message.id, text: message.content });
      return this.fanOut(message.chatId, { type: "draft", replyId: message.id, text: message.content });
    }
    if (message.kind === "notice") {
      this.broadcast(message.chatId, { type: "notice", id: message.id, content: message.content });
      return this.fanOut(message.chatId, { type: "notice", id: message.id, content: message.content });
    }
    if (!(await this.options.bus.markDelivered(message.id))) {
      this.logger.debug({ chatId: message.chatId, outboundId: message.id }, "web reply already delivered");
      return;
    }
    const final: PendingFinal = { sequence: ++this.sequence, event: finalEvent(message) };
    this.sendFinal(message.chatId, final, this.openSockets(message.chatId));
    await this.fanOut(message.chatId, final.event);
  }

  /** Tells the other gateways, whose sockets for this chat this one cannot reach. */
  private async fanOut(chatId: string, event: WebEvent): Promise<void> {
    try {
      await this.options.bus.broadcast(WEB_CHANNEL, JSON.stringify({ from: this.instance, chatId, event }));
    } catch (error) {
      this.logger.warn({ err: error, chatId }, "could not fan a web event out to the other gateways");
    }
  }

  /** An event another gateway consumed: only sockets open here get it; nothing is buffered. */
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

  private sendDraft(chatId: string, event: WebEvent & { type: "draft" }): void {
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

function finalEvent(message: OutboundMessage): WebEvent & { type: "message" } {
  const answers = Array.isArray(message.metadata.answers) ? message.metadata.answers.map(String) : [];
  return { type: "message", id: message.id, content: message.content, answers };
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
