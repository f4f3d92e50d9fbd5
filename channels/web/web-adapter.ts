/**
 * The web page as a channel: a ChannelAdapter on the shared runtime like every platform. Admission
 * judges what is posted (`/stop` cancels at once, `/help` is answered at the gateway, `/new` and
 * the rest go onto the bus); the dispatcher delivers replies (delivery dedupe per chunk, drafts).
 *
 * - Inbound: `POST /api/chat/:chatId/messages` becomes a PlatformEvent of a private chat (with the
 *   images it carries, kept as files: ./image-upload.ts); the answer says what admission did (202 queued, 200 a retried `clientMessageId`, 429 over the
 *   rate limit). Authentication is the API server's (bearer token), so the policy is open.
 * - Outbound: `GET /ws?chatId=[&after=<seq>]` streams the chat's drafts, tool notices and replies,
 *   one JSON object per WebSocket message (WebEvent). Finals and task notices are first kept in the
 *   chat's event log (ChatEventLog: Redis when scaled out, so a gateway restart loses nothing) and
 *   carry their log id `seq`; a page that reconnects with the last `seq` it saw gets exactly what
 *   it missed, once (./resumable-delivery.ts); one without gets what no socket was sent yet. Drafts
 *   and tool-call notices are only for whoever is watching.
 * - Several gateways: every gateway runs this channel (no leader: the page connects to any of
 *   them) and consumes a share of the replies; an event is also fanned out over the bus when
 *   another gateway holds a socket of its chat (./web-peers.ts: gateways tell each other), so that
 *   gateway sends it. The log is shared, so a page gets each final once whichever gateway it reaches.
 */
import { randomUUID } from "node:crypto";
import type { FastifyInstance } from "fastify";
import type { Logger } from "pino";
import type { WebSocket } from "ws";
import { z } from "zod";
import type { Media } from "../../src/bus/message.js";
import { ChannelError, errorMessage } from "../../src/errors.js";
import {
  type AdmissionOutcome,
  type AppendedEvent,
  type ChannelAdapter,
  type ChannelCapabilities,
  type ChannelDependencies,
  type ChatEventLog,
  EVENT_ID_PATTERN,
  type EventSink,
  type OutboundPart,
  type SendOptions,
  type Subscription,
  compositeKey,
  createImageBodyGate,
  createMemoryChatEventLog,
  parseRequest,
} from "../../src/gateway/kit/index.js";
import { BoundedMap } from "./bounded-map.js";
import { ImageUploadError, ImageUploadSchema, MAX_IMAGES, MAX_IMAGE_RUN_BYTES, MAX_MESSAGE_BODY_BYTES, MAX_MESSAGE_TEXT_BYTES, saveImages } from "./image-upload.js";
import { ResumableDelivery } from "./resumable-delivery.js";
import { WebPeers } from "./web-peers.js";

export const WEB_CHANNEL = "web";

export const ChatIdSchema = z
  .string()
  .min(1)
  .max(128)
  .regex(/^[\w:.-]+$/, "letters, digits, _ : . and - only");

export const SendMessageBodySchema = z
  .strictObject({
    /** The text; may be empty when images come with it. */
    content: z.string().max(32_768),
    /** Who wrote it, when the page knows (several people in one chat). Default: `web-user`. */
    senderId: z.string().min(1).max(128).optional(),
    /** The page's own id for the message: a retried POST with the same id is queued once. */
    clientMessageId: z.string().min(1).max(128).optional(),
    /** Images the model sees with the text (./image-upload.ts). */
    images: z.array(ImageUploadSchema).max(MAX_IMAGES).optional(),
  })
  .superRefine((body, context) => {
    if (body.images?.length) return;
    if (body.content === "") context.addIssue({ code: "custom", path: ["content"], message: "expected at least 1 character (or an image)" });
    else if (body.content.trim() === "") context.addIssue({ code: "custom", path: ["content"], message: "expected some text, not only spaces" });
  });
export type SendMessageBody = z.infer<typeof SendMessageBodySchema>;

const ChatParamsSchema = z.object({ chatId: ChatIdSchema });
const SocketQuerySchema = z.object({
  chatId: ChatIdSchema,
  /** The last `seq` the page saw: it gets what was kept after it. */
  after: z.string().regex(EVENT_ID_PATTERN, "the `seq` of an event this chat received").optional(),
});

/**
 * What a socket receives, one JSON object per WebSocket message. Finals and task notices carry
 * `seq`, their id in the chat's event log: reconnect with `after=<the last seq seen>`.
 */
export type WebEvent =
  | { type: "draft"; replyId: string; text: string }
  /**
   * A tool-call line, or a progress line of a background job. A team run's carries `workflow`:
   * `{ runId, team, nodeId, event, status, tool? }`, `event` being node-started, node-tool,
   * node-done, node-failed or node-skipped. The model's reasoning (`agent.showReasoning`) carries
   * `reasoning: true`: the page shows it dimmed, never as the reply.
   */
  | { type: "notice"; id: string; content: string; workflow?: Record<string, unknown>; seq?: string; reasoning?: true }
  /**
   * A reply. `answers`: the ids (from POST) of the messages this reply answers. A reply too long
   * for one message comes in parts, each with `part` (0-based) and `parts`.
   */
  | { type: "message"; id: string; content: string; answers: string[]; part?: number; parts?: number; seq?: string };

export const webCapabilities: ChannelCapabilities = {
  // The page renders Markdown itself and takes long replies in one piece.
  maxMessageLength: 100_000,
  streaming: "draft",
  // The agent already throttles drafts; a draft goes out as soon as it arrives.
  draftIntervalMs: 0,
  // Only chats with a page open see drafts: the adapter declares them as sockets come and go.
  draftsWatchedPerChat: true,
  minSendIntervalMs: 0,
  chatType: "private",
};

export interface WebAdapterOptions extends Pick<ChannelDependencies, "bus" | "logger" | "now" | "newId"> {
  /** Where finals and task notices are kept until a page has them. Default: in this process, bounded by the two options below. */
  events?: ChatEventLog;
  /** Without `events`: finals kept per chat; the oldest go first. Default 50. */
  maxPendingPerChat?: number;
  /** Without `events`: chats with kept finals; the chat written longest ago is dropped first. Default 10,000. */
  maxPendingChats?: number;
  /** Ping every socket this often and drop those that did not answer the last ping. 0: never. Default 30 s. */
  pingIntervalMs?: number;
  /** Skip drafts for a socket with more than this many bytes not yet written (a slow client). Default 1 MiB. */
  maxDraftBacklogBytes?: number;
  /** Where attached images are kept (`<dataDir>/media/web`). Without it, a message with images is refused. */
  mediaDirectory?: string;
}

/** How long the news of a socket takes to reach the other gateways, at most (pub/sub on one Redis). */
const PEER_NEWS_MS = 250;

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
  private readonly events: ChatEventLog;
  private readonly delivery: ResumableDelivery;
  /** compositeKey(chatId, clientMessageId) → the inbound id it was queued under, to answer a retry with it. */
  private readonly accepted = new BoundedMap<string, string>(10_000);
  private sink: EventSink | undefined;
  private fanIn: Subscription | undefined;
  private pingTimer: NodeJS.Timeout | undefined;
  /** Names this gateway in fan-out messages, so it ignores its own. */
  private readonly instance = randomUUID();
  /** Which other gateways hold which chats' sockets: an event is fanned out only to a chat held elsewhere. */
  private readonly peers: WebPeers;

  constructor(private readonly options: WebAdapterOptions) {
    this.logger = options.logger.child({ channel: WEB_CHANNEL });
    this.newId = options.newId ?? randomUUID;
    this.now = options.now ?? Date.now;
    this.events =
      options.events ??
      createMemoryChatEventLog({
        maxPerChat: options.maxPendingPerChat,
        now: options.now,
        maxChats: options.maxPendingChats,
        onDrop: (chatId, dropped) => this.logger.debug({ chatId, dropped }, "older web replies dropped from the chat's log"),
      });
    this.delivery = new ResumableDelivery(this.events, this.logger);
    this.peers = new WebPeers({ bus: options.bus, topic: WEB_CHANNEL, instance: this.instance, localChats: () => this.sockets.keys(), logger: this.logger, now: options.now });
  }

  async start(sink: EventSink): Promise<void> {
    this.sink = sink;
    if (!this.fanIn) {
      this.fanIn = await this.options.bus.onBroadcast(WEB_CHANNEL, (payload) => this.fromOtherGateway(payload));
      await this.peers.start();
    }
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
    if (this.fanIn) await this.peers.stop();
    await this.fanIn?.close();
    this.fanIn = undefined;
    for (const sockets of this.sockets.values()) for (const socket of sockets) socket.close(1001, "server shutting down");
    this.sockets.clear();
  }

  /**
   * Adds the channel's routes to `app`, which must have `@fastify/websocket` registered (and
   * loaded: call this from a plugin registered after it). Authentication is the server's job.
   */
  registerRoutes(app: FastifyInstance): void {
    // Images come base64 in the body: this route alone takes bodies that large, and only in
    // images (the gate refuses a large body of anything else with 413 before it is parsed).
    const gate = { textBytes: MAX_MESSAGE_TEXT_BYTES, images: MAX_IMAGES, imageRunBytes: MAX_IMAGE_RUN_BYTES };
    const preParsing = async (_request: unknown, _reply: unknown, payload: NodeJS.ReadableStream) => {
      const gated = createImageBodyGate(gate);
      payload.on("error", (error: Error) => gated.destroy(error));
      return payload.pipe(gated);
    };
    app.post("/api/chat/:chatId/messages", { bodyLimit: MAX_MESSAGE_BODY_BYTES, preParsing }, async (request, reply) => {
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
        preValidation: async (request) => void parseRequest(SocketQuerySchema, request.query, "query"),
      },
      (socket, request) => {
        const query = parseRequest(SocketQuerySchema, request.query, "query");
        this.attach(query.chatId, socket, query.after);
      },
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
    let media: Media[] = [];
    if (body.images?.length) {
      const directory = this.options.mediaDirectory;
      if (directory === undefined) return { status: 400, body: { error: "images: this web channel keeps no files, so it takes no images" } };
      try {
        media = await saveImages(directory, id, body.images);
      } catch (error) {
        if (error instanceof ImageUploadError) return { status: 400, body: { error: error.message } };
        this.logger.warn({ err: error, sessionKey: `${WEB_CHANNEL}:${chatId}` }, "web images not stored");
        return { status: 503, body: { error: "the images could not be stored; send the message again" } };
      }
    }
    let outcome: AdmissionOutcome;
    try {
      outcome = await this.admit(sink, id, chatId, retryKey, body, media);
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

  private admit(sink: EventSink, id: string, chatId: string, retryKey: string | undefined, body: SendMessageBody, media: Media[]): Promise<AdmissionOutcome> {
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
      media,
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

  /** Finals and task notices kept for `chatId` that no socket was sent yet (for tests and metrics). */
  async waiting(chatId: string): Promise<number> {
    return (await this.events.since(chatId)).events.length;
  }

  async send(chatId: string, text: string, options: SendOptions): Promise<{ platformMessageId: string }> {
    const part = options.outbound;
    if (part?.kind === "notice") {
      const workflow = part.metadata.workflow;
      const notice: WebEvent = { type: "notice", id: part.messageId, content: text };
      if (typeof workflow === "object" && workflow !== null) notice.workflow = workflow as Record<string, unknown>;
      if (part.metadata.reasoning === true) notice.reasoning = true;
      if (mustNotMiss(part)) await this.emitKept(chatId, notice);
      else await this.emit(chatId, notice);
      return { platformMessageId: part.messageId };
    }
    // Without an annotation it is the gateway's own reply (`/help`, `/stop`): a message of its own.
    const id = part?.messageId ?? `gateway-${this.newId()}`;
    const event: WebEvent & { type: "message" } = { type: "message", id, content: text, answers: part?.answers ?? [] };
    if (part && part.chunks > 1) Object.assign(event, { part: part.chunk, parts: part.chunks });
    await this.emitKept(chatId, event);
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

  /**
   * Keeps the event in the chat's log first (a failure is the dispatcher's to retry), then sends
   * it to the sockets here and fans it out to the other gateways' sockets.
   */
  private async emitKept(chatId: string, event: WebEvent & { type: "message" | "notice" }): Promise<void> {
    const payload = JSON.stringify(event);
    let appended: AppendedEvent;
    try {
      appended = await this.events.append(chatId, payload);
    } catch (error) {
      throw new ChannelError(`cannot keep the web reply ${event.id} for chat ${chatId}: ${errorMessage(error)}`, WEB_CHANNEL, { cause: error, kind: "network" });
    }
    this.delivery.appended(chatId, this.openSockets(chatId), { ...appended, payload });
    await this.fanOut(chatId, { ...event, seq: appended.id });
  }

  private attach(chatId: string, socket: WebSocket, after: string | undefined): void {
    let sockets = this.sockets.get(chatId);
    if (!sockets) {
      sockets = new Set();
      this.sockets.set(chatId, sockets);
    }
    if (sockets.size === 0) this.peers.attached(chatId);
    sockets.add(socket);
    this.watchDraftsOf(chatId, socket);
    this.alive.set(socket, true);
    socket.on("pong", () => this.alive.set(socket, true));
    socket.on("close", () => this.detach(chatId, socket));
    socket.on("error", (error) => this.logger.debug({ err: error, chatId }, "web socket error"));
    // What this page missed goes first; anything published after it comes through send().
    this.delivery.attach(chatId, socket, after);
    // A final another gateway kept while the news of this socket was on its way to it was not fanned
    // out here: read the log once more when that news has surely arrived.
    if (this.peers.any) setTimeout(() => this.delivery.wake(chatId, [socket]), PEER_NEWS_MS).unref();
  }

  /** While the socket is open, the chat's drafts are published (the bus drops those nobody watches). */
  private watchDraftsOf(chatId: string, socket: WebSocket): void {
    const watching = this.options.bus.watchDrafts(WEB_CHANNEL, chatId);
    watching.catch((error: unknown) => this.logger.warn({ err: error, chatId }, "could not declare a web chat's drafts watched"));
    socket.once("close", () => void watching.then((subscription) => subscription.close()).catch(() => undefined));
  }

  private detach(chatId: string, socket: WebSocket): void {
    const sockets = this.sockets.get(chatId);
    if (!sockets) return;
    sockets.delete(socket);
    if (sockets.size === 0) {
      this.sockets.delete(chatId);
      this.peers.detached(chatId);
    }
  }

  /** Tells the other gateways that hold sockets of this chat (this one cannot reach them). */
  private async fanOut(chatId: string, event: WebEvent): Promise<void> {
    if (!this.peers.holdsElsewhere(chatId)) return;
    try {
      await this.options.bus.broadcast(WEB_CHANNEL, JSON.stringify({ from: this.instance, chatId, event }));
    } catch (error) {
      this.logger.warn({ err: error, chatId }, "could not fan a web event out to the other gateways");
    }
  }

  /** An event another gateway delivered: only sockets open here get it (the log has it already). */
  private fromOtherGateway(payload: string): void {
    let parsed: { from: string; chatId: string; event: WebEvent; peer?: undefined };
    try {
      parsed = JSON.parse(payload) as typeof parsed;
    } catch {
      return;
    }
    if (parsed.from === this.instance || this.peers.receive(parsed)) return;
    const { event } = parsed;
    if (event.type === "draft") this.sendDraft(parsed.chatId, event);
    else if (event.seq !== undefined) this.delivery.wake(parsed.chatId, this.openSockets(parsed.chatId));
    else this.broadcast(parsed.chatId, event);
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

/** Task (and team) notices are kept like finals: a page that was away must still learn a task ended. */
function mustNotMiss(part: OutboundPart): boolean {
  return part.metadata.task !== undefined || part.metadata.team !== undefined;
}
