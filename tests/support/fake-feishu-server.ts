/**
 * A fake Feishu / Lark open platform, spoken to by the real SDK (@larksuiteoapi/node-sdk) through
 * `domain: fake.origin`:
 *
 * - `POST /open-apis/auth/v3/tenant_access_token/internal`; every other call needs its Bearer token;
 * - `GET /open-apis/bot/v3/info` (the bot's open_id and name);
 * - `POST /open-apis/im/v1/messages?receive_id_type=chat_id` (create), `POST .../messages/:id/reply`,
 *   `PATCH .../messages/:id` (card update): a `uuid` seen before answers the message it made (one
 *   message per uuid, as Feishu keeps it for an hour); cards over 30 KB, with more than 5 tables or
 *   200 elements are refused with Feishu's codes; at most 5 sends and updates a second per chat
 *   (230020), the rest of the per-chat limit; with `appLimits`, the app's own (50 a second, 1,000
 *   a minute: HTTP 429, code 99991400, `x-ogw-ratelimit-reset`) and a card's updates (10 a second);
 *   `FAKE_LIMIT_DEBUG=1` prints each refusal with its budget and the calls in its window
 *   (sliding-limits.ts);
 * - `GET .../messages/:id/resources/:file_key?type=image|file`;
 * - `GET /open-apis/contact/v3/users/:open_id?user_id_type=open_id`: the name of a user who sent
 *   or was mentioned in an event built here; anyone else is Feishu's "user not found" (41050);
 * - `POST /callback/ws/endpoint` and the long connection it names (see feishu-frames.ts): pings are
 *   answered with pongs, events are pushed to ONE live connection (as Feishu does) and queued while
 *   none is; an event whose connection closes before it was acknowledged is pushed again to another
 *   (Feishu retries an event it got no answer to); {@link FakeFeishuServer.silence} makes the current
 *   connections go quiet without closing.
 *
 * Failures on demand ({@link FakeFeishuServer.failNext}): HTTP 400 with `{code, msg}` (the SDK
 * throws), HTTP 200 with `code ≠ 0` (it does not), 429 with `x-ogw-ratelimit-reset`.
 * {@link FakeFeishuServer.postWebhook} posts an event the way Feishu does: signed, optionally encrypted.
 */
import { randomBytes, randomUUID } from "node:crypto";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { WebSocketServer, type WebSocket } from "ws";
import { CONTROL, DATA, decodeFrame, encodeFrame } from "./feishu-frames.js";
import { type SignOptions, signedRequest } from "./feishu-webhook-signer.js";
import { type FakeEventInput, type FakeUser, type FeishuEventEnvelope, buildEvent } from "./feishu-events.js";
import { type SlidingLimit, SlidingLimits, logRefusal } from "./sliding-limits.js";

/** Feishu's published app limits: 50 calls a second and 1,000 a minute per app, 10 updates a second per card. */
export const FEISHU_APP_LIMITS = { second: { limit: 50, windowMs: 1_000 }, minute: { limit: 1_000, windowMs: 60_000 }, card: { limit: 10, windowMs: 1_000 } };

export type { FakeEventInput, FakeUser, FeishuEventEnvelope } from "./feishu-events.js";

export type FeishuRoute = "token" | "botInfo" | "contact" | "create" | "reply" | "patch" | "resource" | "endpoint";

export interface FeishuFailure {
  /** HTTP status. Default 400; 200 sends the `code` in a 200 answer, as many Feishu APIs do. */
  status?: number;
  code: number;
  msg?: string;
  /** Seconds in `x-ogw-ratelimit-reset`. */
  resetSeconds?: number;
}

export interface FeishuCall {
  route: FeishuRoute | "unknown";
  method: string;
  path: string;
  query: Record<string, string>;
  body: Record<string, unknown>;
  /** What it was answered: HTTP status and Feishu code. */
  status: number;
  code: number;
  /** When the call arrived (ms since the epoch). */
  at: number;
}

export interface BotMessage {
  messageId: string;
  chatId: string;
  msgType: string;
  /** The content as last set (parsed JSON). */
  content: Record<string, unknown>;
  /** Every content it had, the first one included. */
  history: Array<Record<string, unknown>>;
  replyTo?: string;
  replyInThread: boolean;
  uuid?: string;
}

export interface FakeFeishuOptions {
  appId: string;
  appSecret: string;
  botOpenId?: string;
  botName?: string;
  /** Seconds between the client's pings (ClientConfig.PingInterval). Default 120, Feishu's. */
  pingIntervalSeconds?: number;
  /** ClientConfig.ReconnectInterval and ReconnectNonce, in seconds. Default 1 and 0: reconnect at once. */
  reconnectIntervalSeconds?: number;
  /** Per-chat sends and updates allowed per second. Default 5. */
  perChatPerSecond?: number;
  /** The app's own limits on sends and updates, and a card's on its updates. Default: none. */
  appLimits?: { second?: SlidingLimit; minute?: SlidingLimit; card?: SlidingLimit };
}

export interface PushResult {
  /** The client's answer payload (`{code: 200}` when it took the event). */
  code: number;
}

export interface FakeFeishuServer {
  /** `http://127.0.0.1:<port>`: the SDK's `domain`. */
  origin: string;
  bot: { openId: string; name: string };
  requests: FeishuCall[];
  /** Messages the bot created (create or reply), in order. */
  messages: BotMessage[];
  /** Long connections open now, and of those the ones not silenced. */
  readonly connections: number;
  readonly liveConnections: number;
  /** How many times a client asked for a long-connection endpoint. */
  readonly endpointCalls: number;
  /** Pongs sent, on every connection: a live connection's proof of life, once a ping interval. */
  readonly pongs: number;
  /** Sends and updates refused for a rate limit (the chat's 230020, the app's 99991400). */
  readonly rateLimited: number;
  event(input: FakeEventInput): FeishuEventEnvelope;
  /** Stores a resource of a message (image or file) for the resource API. */
  addResource(messageId: string, fileKey: string, bytes: Buffer, mimeType?: string): void;
  /** Pushes an event over the long connection; resolves with the client's answer. */
  push(envelope: unknown, options?: { timeoutMs?: number }): Promise<PushResult>;
  /** The current connections stop answering and receiving (the socket stays open). */
  silence(): void;
  /** Closes every long connection from the server side. */
  dropConnections(): void;
  /** Posts a payload to a webhook URL the way Feishu does. */
  postWebhook(url: string, payload: unknown, sign: SignOptions): Promise<{ status: number; body: string }>;
  failNext(route: FeishuRoute, failure: FeishuFailure): void;
  waitFor<T>(predicate: () => T | undefined | null | false, options?: { timeoutMs?: number; what?: string }): Promise<T>;
  close(): Promise<void>;
}

const MAX_CARD_BYTES = 30 * 1024;
const MAX_TEXT_BYTES = 150 * 1024;

interface Connection {
  socket: WebSocket;
  live: boolean;
  /** Event frames sent on this connection and not yet acknowledged: answered, or sent again elsewhere when it closes. */
  waiting: Map<string, { answered: (code: number) => void; resend: () => void }>;
}

function readBody(incoming: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    incoming.on("data", (chunk: Buffer) => chunks.push(chunk));
    incoming.on("end", () => resolve(Buffer.concat(chunks)));
    incoming.on("error", reject);
  });
}

function routeOf(method: string, path: string): { route: FeishuRoute | "unknown"; params: string[] } {
  const messageRoute = /^\/open-apis\/im\/v1\/messages\/([^/]+)(\/reply|\/resources\/([^/]+))?$/.exec(path);
  if (method === "POST" && path === "/open-apis/auth/v3/tenant_access_token/internal") return { route: "token", params: [] };
  if (method === "GET" && path === "/open-apis/bot/v3/info") return { route: "botInfo", params: [] };
  const contact = /^\/open-apis\/contact\/v3\/users\/([^/]+)$/.exec(path);
  if (method === "GET" && contact) return { route: "contact", params: [decodeURIComponent(contact[1]!)] };
  if (method === "POST" && path === "/open-apis/im/v1/messages") return { route: "create", params: [] };
  if (method === "POST" && path === "/callback/ws/endpoint") return { route: "endpoint", params: [] };
  if (messageRoute && method === "POST" && messageRoute[2] === "/reply") return { route: "reply", params: [messageRoute[1]!] };
  if (messageRoute && method === "PATCH" && !messageRoute[2]) return { route: "patch", params: [messageRoute[1]!] };
  if (messageRoute && method === "GET" && messageRoute[3]) return { route: "resource", params: [messageRoute[1]!, decodeURIComponent(messageRoute[3])] };
  return { route: "unknown", params: [] };
}

/** Why Feishu would refuse this card, if it would: its size, tables and elements. */
function cardProblem(content: string): { code: number; msg: string } | undefined {
  if (Buffer.byteLength(content) > MAX_CARD_BYTES) return { code: 230025, msg: "The length of the message content reaches its limit." };
  let card: { body?: { elements?: Array<{ tag?: string; content?: string }> }; elements?: Array<{ tag?: string; content?: string }> };
  try {
    card = JSON.parse(content) as typeof card;
  } catch {
    return { code: 230001, msg: "Your request contains an invalid request parameter, ext=content is not a json" };
  }
  const elements = card.body?.elements ?? card.elements ?? [];
  if (elements.length > 200) return { code: 230099, msg: "Failed to create card content, ext=ErrCode: 11310; ErrMsg: element exceeds the limit" };
  const tables = elements.reduce((count, element) => count + (element.content?.match(/^\|?\s*:?-{3,}:?\s*\|/gm)?.length ?? 0) + (element.tag === "table" ? 1 : 0), 0);
  if (tables > 5) return { code: 230099, msg: "Failed to create card content, ext=ErrCode: 11310; ErrMsg: card table number over limit" };
  return undefined;
}

export async function startFakeFeishu(options: FakeFeishuOptions): Promise<FakeFeishuServer> {
  const bot = { openId: options.botOpenId ?? "ou_bot0000000000000000000000000001", name: options.botName ?? "CountBot" };
  const token = `t-${randomBytes(12).toString("hex")}`;
  const requests: FeishuCall[] = [];
  const messages: BotMessage[] = [];
  /** Users seen in events, for the contact API. */
  const knownUsers = new Map<string, FakeUser>();
  const byId = new Map<string, BotMessage>();
  const byUuid = new Map<string, BotMessage>();
  const resources = new Map<string, { bytes: Buffer; mimeType: string }>();
  const failures = new Map<FeishuRoute, FeishuFailure[]>();
  const connections = new Set<Connection>();
  const queued: Array<{ payload: Buffer; resolve: (result: PushResult) => void }> = [];
  let endpointCalls = 0;
  let pongs = 0;
  let nextMessage = 1;
  let nextDevice = 1;
  const perChatPerSecond = options.perChatPerSecond ?? 5;
  const appLimiter = new SlidingLimits();
  let rateLimited = 0;

  function answer(response: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
    response.writeHead(status, { "content-type": "application/json; charset=utf-8", ...headers });
    response.end(JSON.stringify(body));
  }

  const chatLimiter = new SlidingLimits();

  /** The chat's own budget (5 a second): whether this call breaks it (and counts it otherwise). */
  function overChatLimit(chatId: string, label: string, now: number): boolean {
    const broken = chatLimiter.hit([[`chat:${chatId}`, { limit: perChatPerSecond, windowMs: 1_000 }]], now, label);
    if (broken) logRefusal("feishu", label, broken, now);
    return broken !== undefined;
  }

  function messageData(message: BotMessage) {
    const now = String(Date.now());
    return {
      message_id: message.messageId,
      ...(message.replyTo ? { root_id: message.replyTo, parent_id: message.replyTo } : {}),
      msg_type: message.msgType,
      create_time: now,
      update_time: now,
      deleted: false,
      updated: message.history.length > 1,
      chat_id: message.chatId,
      sender: { id: options.appId, id_type: "app_id", sender_type: "app", tenant_key: "tenant-fake" },
      body: { content: JSON.stringify(message.content) },
    };
  }

  /** The app's budgets (and, for an update, the card's): the refusal when one is spent. */
  function overAppLimit(cardId: string | undefined, label: string, now: number): { status: number; code: number; msg: string; resetSeconds: number } | undefined {
    const limits = options.appLimits;
    if (!limits) return undefined;
    const broken = appLimiter.hit(
      [
        [`card:${cardId}`, cardId ? limits.card : undefined],
        ["second", limits.second],
        ["minute", limits.minute],
      ],
      now,
      label,
    );
    if (!broken) return undefined;
    rateLimited += 1;
    logRefusal("feishu", label, broken, now);
    const resetSeconds = Math.max(1, Math.ceil(broken.retryAfterMs / 1000));
    return broken.key.startsWith("card:")
      ? { status: 400, code: 230020, msg: "This operation triggers the frequency limit.", resetSeconds }
      : { status: 429, code: 99991400, msg: "request trigger frequency limit", resetSeconds };
  }

  /** The check every send and update passes; undefined when it may go ahead. */
  function refusal(msgType: string, content: unknown, chatId: string, cardId?: string): { status: number; code: number; msg: string; resetSeconds?: number } | undefined {
    if (typeof content !== "string") return { status: 400, code: 230001, msg: "Your request contains an invalid request parameter, ext=content is required" };
    if (msgType === "interactive") {
      const problem = cardProblem(content);
      if (problem) return { status: 400, ...problem };
    } else if (Buffer.byteLength(content) > MAX_TEXT_BYTES) {
      return { status: 400, code: 230025, msg: "The length of the message content reaches its limit." };
    }
    const now = Date.now();
    const label = `${cardId === undefined ? "send" : `update ${cardId}`} chat=${chatId}`;
    const app = overAppLimit(cardId, label, now);
    if (app) return app;
    if (overChatLimit(chatId, label, now)) {
      rateLimited += 1;
      return { status: 400, code: 230020, msg: "This operation triggers the frequency limit." };
    }
    return undefined;
  }

  function resetHeaders(resetSeconds: number | undefined): Record<string, string> {
    return resetSeconds === undefined ? {} : { "x-ogw-ratelimit-limit": "50", "x-ogw-ratelimit-reset": String(resetSeconds) };
  }

  function send(body: Record<string, unknown>, chatId: string, replyTo: string | undefined): { status: number; body: Record<string, unknown>; headers?: Record<string, string> } {
    const uuid = typeof body.uuid === "string" ? body.uuid : undefined;
    const known = uuid ? byUuid.get(uuid) : undefined;
    if (known) return { status: 200, body: { code: 0, msg: "success", data: messageData(known) } };
    const msgType = String(body.msg_type ?? "");
    const refused = refusal(msgType, body.content, chatId);
    if (refused) return { status: refused.status, body: { code: refused.code, msg: refused.msg }, headers: resetHeaders(refused.resetSeconds) };
    const content = JSON.parse(body.content as string) as Record<string, unknown>;
    const message: BotMessage = { messageId: `om_bot${String(nextMessage++).padStart(6, "0")}`, chatId, msgType, content, history: [content], replyInThread: body.reply_in_thread === true };
    if (replyTo) message.replyTo = replyTo;
    if (uuid) {
      message.uuid = uuid;
      byUuid.set(uuid, message);
    }
    messages.push(message);
    byId.set(message.messageId, message);
    return { status: 200, body: { code: 0, msg: "success", data: messageData(message) } };
  }

  async function handle(incoming: IncomingMessage, response: ServerResponse): Promise<void> {
    const url = new URL(incoming.url ?? "/", "http://127.0.0.1");
    const method = incoming.method ?? "GET";
    const raw = await readBody(incoming);
    let body: Record<string, unknown> = {};
    if (raw.length > 0) {
      try {
        body = JSON.parse(raw.toString("utf8")) as Record<string, unknown>;
      } catch {
        answer(response, 400, { code: 9499, msg: "Bad Request" });
        return;
      }
    }
    const { route, params } = routeOf(method, url.pathname);
    const call: FeishuCall = { route, method, path: url.pathname, query: Object.fromEntries(url.searchParams), body, status: 200, code: 0, at: Date.now() };
    requests.push(call);
    const reply = (status: number, payload: Record<string, unknown>, headers?: Record<string, string>) => {
      call.status = status;
      call.code = typeof payload.code === "number" ? payload.code : 0;
      answer(response, status, payload, headers);
    };
    if (route === "unknown") return reply(404, { code: 404, msg: `no route for ${method} ${url.pathname}` });
    const failure = failures.get(route)?.shift();
    if (failure) {
      const headers: Record<string, string> = failure.resetSeconds === undefined ? {} : { "x-ogw-ratelimit-limit": "5", "x-ogw-ratelimit-reset": String(failure.resetSeconds) };
      return reply(failure.status ?? 400, { code: failure.code, msg: failure.msg ?? "failure on demand" }, headers);
    }
    if (route === "token") {
      if (body.app_id !== options.appId || body.app_secret !== options.appSecret) return reply(200, { code: 10014, msg: "app secret invalid" });
      return reply(200, { code: 0, msg: "ok", tenant_access_token: token, expire: 7200 });
    }
    if (route === "endpoint") {
      if (body.AppID !== options.appId || body.AppSecret !== options.appSecret) return reply(200, { code: 403, msg: "forbidden", data: {} });
      endpointCalls += 1;
      const port = (server.address() as AddressInfo).port;
      return reply(200, {
        code: 0,
        msg: "ok",
        data: {
          URL: `ws://127.0.0.1:${port}/callback/ws/connect?device_id=device-${nextDevice++}&service_id=7`,
          ClientConfig: {
            PingInterval: options.pingIntervalSeconds ?? 120,
            ReconnectCount: -1,
            ReconnectInterval: options.reconnectIntervalSeconds ?? 1,
            ReconnectNonce: 0,
          },
        },
      });
    }
    if (incoming.headers.authorization !== `Bearer ${token}`) return reply(400, { code: 99991663, msg: "Invalid access token for authorization. Please make a request with token attached." });
    if (route === "botInfo") return reply(200, { code: 0, msg: "ok", bot: { activate_status: 2, app_name: bot.name, avatar_url: "", ip_white_list: [], open_id: bot.openId } });
    if (route === "contact") {
      const user = url.searchParams.get("user_id_type") === "open_id" ? knownUsers.get(params[0]!) : undefined;
      if (!user) return reply(400, { code: 41050, msg: "no user authority error" });
      return reply(200, { code: 0, msg: "success", data: { user: { open_id: user.openId, name: user.name, ...(user.userId ? { user_id: user.userId } : {}) } } });
    }
    if (route === "create") {
      if (url.searchParams.get("receive_id_type") !== "chat_id" || typeof body.receive_id !== "string") {
        return reply(400, { code: 230001, msg: "Your request contains an invalid request parameter, ext=receive_id" });
      }
      const result = send(body, body.receive_id, undefined);
      return reply(result.status, result.body, result.headers);
    }
    if (route === "reply") {
      const [messageId] = params;
      const chatId = byId.get(messageId!)?.chatId ?? chatOfUserMessage.get(messageId!);
      if (!chatId) return reply(400, { code: 230011, msg: "The message was withdrawn." });
      const result = send(body, chatId, messageId);
      return reply(result.status, result.body, result.headers);
    }
    if (route === "patch") {
      const message = byId.get(params[0]!);
      if (!message) return reply(400, { code: 230011, msg: "The message was withdrawn." });
      if (message.msgType !== "interactive") return reply(400, { code: 230001, msg: "Your request contains an invalid request parameter, ext=only card messages can be updated" });
      const refused = refusal("interactive", body.content, message.chatId, message.messageId);
      if (refused) return reply(refused.status, { code: refused.code, msg: refused.msg }, resetHeaders(refused.resetSeconds));
      const content = JSON.parse(body.content as string) as Record<string, unknown>;
      message.content = content;
      message.history.push(content);
      return reply(200, { code: 0, msg: "success", data: {} });
    }
    // resource
    const resource = resources.get(`${params[0]}/${params[1]}`);
    if (!resource) return reply(400, { code: 234003, msg: "File not in msg." });
    call.status = 200;
    response.writeHead(200, { "content-type": resource.mimeType, "content-length": String(resource.bytes.length) });
    response.end(resource.bytes);
  }

  /** Which user message lives in which chat: replies to user messages need it. */
  const chatOfUserMessage = new Map<string, string>();

  const server = createServer((incoming, response) => {
    handle(incoming, response).catch((error: unknown) => answer(response, 500, { code: 500, msg: String(error) }));
  });
  const sockets = new WebSocketServer({ noServer: true });
  server.on("upgrade", (incoming, socket, head) => {
    if (!(incoming.url ?? "").startsWith("/callback/ws/connect")) {
      socket.destroy();
      return;
    }
    sockets.handleUpgrade(incoming, socket, head, (webSocket) => accept(webSocket));
  });

  function accept(socket: WebSocket): void {
    const connection: Connection = { socket, live: true, waiting: new Map() };
    connections.add(connection);
    socket.on("message", (data: Buffer) => {
      if (!connection.live) return;
      const frame = decodeFrame(Buffer.isBuffer(data) ? data : Buffer.from(data));
      if (frame.method === CONTROL && frame.headers.type === "ping") {
        const config = { PingInterval: options.pingIntervalSeconds ?? 120, ReconnectCount: -1, ReconnectInterval: options.reconnectIntervalSeconds ?? 1, ReconnectNonce: 0 };
        pongs += 1;
        socket.send(encodeFrame({ ...frame, headers: { type: "pong" }, payload: Buffer.from(JSON.stringify(config)) }));
      } else if (frame.method === DATA) {
        const done = connection.waiting.get(frame.headers.message_id ?? "");
        const payload = frame.payload ? (JSON.parse(frame.payload.toString("utf8")) as { code?: number }) : {};
        done?.answered(payload.code ?? 0);
      }
    });
    const gone = () => {
      if (!connections.delete(connection)) return;
      for (const pending of [...connection.waiting.values()]) pending.resend();
      connection.waiting.clear();
    };
    socket.on("close", gone);
    socket.on("error", gone);
    for (const item of queued.splice(0)) deliver(item.payload).then(item.resolve, () => undefined);
  }

  function liveConnection(): Connection | undefined {
    const live = [...connections].filter((connection) => connection.live && connection.socket.readyState === connection.socket.OPEN);
    return live[Math.floor(Math.random() * live.length)];
  }

  function deliver(payload: Buffer, timeoutMs = 10_000): Promise<PushResult> {
    const connection = liveConnection();
    if (!connection) return new Promise((resolve) => queued.push({ payload, resolve }));
    const frameId = randomUUID();
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        connection.waiting.delete(frameId);
        reject(new Error(`fake Feishu: no answer to event frame ${frameId} within ${timeoutMs} ms`));
      }, timeoutMs);
      connection.waiting.set(frameId, {
        answered: (code) => {
          clearTimeout(timer);
          connection.waiting.delete(frameId);
          resolve({ code });
        },
        // The connection closed unanswered: the event goes to another one (or waits for one).
        resend: () => {
          clearTimeout(timer);
          deliver(payload, timeoutMs).then(resolve, reject);
        },
      });
      connection.socket.send(encodeFrame({ seqId: 0, logId: 0, service: 7, method: DATA, headers: { type: "event", message_id: frameId, sum: "1", seq: "0", trace_id: randomUUID() }, payload }));
    });
  }

  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

  return {
    origin,
    bot,
    requests,
    messages,
    get connections() {
      return connections.size;
    },
    get liveConnections() {
      return [...connections].filter((connection) => connection.live).length;
    },
    get endpointCalls() {
      return endpointCalls;
    },
    get pongs() {
      return pongs;
    },
    get rateLimited() {
      return rateLimited;
    },
    event(input) {
      const envelope = buildEvent(input, { appId: options.appId });
      for (const user of [input.sender, ...(input.mentions ?? [])]) if (user !== "all") knownUsers.set(user.openId, user);
      const { message } = envelope.event;
      for (const id of [message.message_id, message.root_id, message.parent_id]) if (id && !byId.has(id)) chatOfUserMessage.set(id, message.chat_id);
      return envelope;
    },
    addResource(messageId, fileKey, bytes, mimeType = "application/octet-stream") {
      resources.set(`${messageId}/${fileKey}`, { bytes, mimeType });
    },
    push(envelope, pushOptions) {
      return deliver(Buffer.from(JSON.stringify(envelope)), pushOptions?.timeoutMs);
    },
    silence() {
      for (const connection of connections) connection.live = false;
    },
    dropConnections() {
      for (const connection of connections) connection.socket.terminate();
    },
    async postWebhook(url, payload, sign) {
      const request = signedRequest(payload, sign);
      const response = await fetch(url, { method: "POST", headers: request.headers, body: request.rawBody });
      return { status: response.status, body: await response.text() };
    },
    failNext(route, failure) {
      failures.set(route, [...(failures.get(route) ?? []), failure]);
    },
    async waitFor(predicate, waitOptions = {}) {
      const deadline = Date.now() + (waitOptions.timeoutMs ?? 10_000);
      for (;;) {
        const value = predicate();
        if (value) return value;
        if (Date.now() > deadline) throw new Error(`fake Feishu: timed out waiting for ${waitOptions.what ?? "a condition"}`);
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    },
    async close() {
      for (const connection of connections) connection.socket.terminate();
      sockets.close();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
