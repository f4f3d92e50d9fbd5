/**
 * A fake QQ open platform (Bot API v2), spoken to by the channel through `apiRoot: fake.origin`
 * and `tokenUrl: fake.tokenUrl`:
 *
 * - `POST /app/getAppAccessToken` (`{appId, clientSecret}`) → `{access_token, expires_in}` (a
 *   string, as QQ sends it); every other route wants `Authorization: QQBot <token>` (401, code 11244);
 * - `GET /gateway` → the WebSocket gateway on this server (fake-qq-gateway.ts); `GET /users/@me`;
 * - `POST /v2/groups/{group_openid}/messages`, `POST /v2/users/{openid}/messages`: text
 *   (msg_type 0) or Markdown (msg_type 2, refused unless `markdown` is allowed). A passive reply's
 *   `msg_id` must be a message of that chat within `replyWindowMs`, at most 5 replies to it, each
 *   `msg_seq` once (40054005 otherwise); a message without `msg_id` is active, refused unless
 *   `activeGroupMessages`;
 * - `POST /channels/{channel_id}/messages`, `POST /dms/{guild_id}/messages`: guild messages, passive
 *   within the window or active.
 * Texts over `maxLength` are refused. Failures on demand: {@link FakeQQServer.failNext}.
 */
import { randomBytes } from "node:crypto";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { WebSocketServer } from "ws";
import { type FakeQQGateway, createFakeQQGateway } from "./fake-qq-gateway.js";
import { type FakeQQUser, type QQEvent, c2cMessage, channelMessage, groupAtMessage, qqSign } from "./qq-events.js";

export type { FakeQQUser, QQEvent } from "./qq-events.js";

export type QQRoute = "token" | "gateway" | "me" | "groupMessage" | "userMessage" | "channelMessage" | "dmsMessage";

export interface QQFailure {
  status: number;
  code: number;
  message?: string;
}

export interface QQCall {
  route: QQRoute | "unknown";
  method: string;
  path: string;
  body: Record<string, unknown>;
  status: number;
  code?: number;
}

export interface QQBotMessage {
  seq: number;
  id: string;
  /** The chat as the channel names it: `group:…`, `user:…`, `channel:…`, `dms:…`. */
  chatId: string;
  text: string;
  markdown: boolean;
  msgId?: string;
  msgSeq?: number;
}

export interface FakeQQOptions {
  appId: string;
  appSecret: string;
  replyWindowMs?: number;
  activeGroupMessages?: boolean;
  markdown?: boolean;
  maxLength?: number;
  heartbeatIntervalMs?: number;
}

export interface FakeQQServer {
  origin: string;
  tokenUrl: string;
  bot: { id: string; username: string };
  requests: QQCall[];
  messages: QQBotMessage[];
  gateway: FakeQQGateway;
  /** Builds an event (and remembers its message for passive replies). */
  groupAt(input: { group: string; from: FakeQQUser; text: string }): QQEvent;
  c2c(input: { from: FakeQQUser; text: string }): QQEvent;
  channel(input: { channel: string; guild: string; from: FakeQQUser; text: string; atBot?: boolean; all?: boolean }): QQEvent;
  /** Dispatches over the gateway (`times` > 1: delivered again, same event id). */
  dispatch(event: QQEvent, times?: number): void;
  /** Posts an event to a webhook as QQ does, signed with `secret` (default the app's). */
  postWebhook(url: string, payload: unknown, sign?: { secret?: string; timestamp?: string }): Promise<{ status: number; body: string }>;
  shown(chatId: string): string[];
  revokeTokens(): void;
  failNext(route: QQRoute, failure: QQFailure): void;
  waitFor<T>(predicate: () => T | undefined | null | false, options?: { timeoutMs?: number; what?: string }): Promise<T>;
  close(): Promise<void>;
}

const MESSAGE_ROUTES: Array<[RegExp, QQRoute, string]> = [
  [/^\/v2\/groups\/([^/]+)\/messages$/, "groupMessage", "group"],
  [/^\/v2\/users\/([^/]+)\/messages$/, "userMessage", "user"],
  [/^\/channels\/([^/]+)\/messages$/, "channelMessage", "channel"],
  [/^\/dms\/([^/]+)\/messages$/, "dmsMessage", "dms"],
];

function readBody(incoming: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    incoming.on("data", (chunk: Buffer) => chunks.push(chunk));
    incoming.on("end", () => resolve(Buffer.concat(chunks)));
    incoming.on("error", reject);
  });
}

export async function startFakeQQ(options: FakeQQOptions): Promise<FakeQQServer> {
  const replyWindowMs = options.replyWindowMs ?? 5 * 60_000;
  const bot = { id: `1${randomBytes(8).readBigUInt64BE().toString().slice(0, 17)}`, username: "CountBot-QQ" };
  const requests: QQCall[] = [];
  const messages: QQBotMessage[] = [];
  const tokens = new Set<string>();
  const failures = new Map<QQRoute, QQFailure[]>();
  /** User messages by id: the chat they came in and when, the replies they got. */
  const triggers = new Map<string, { chatId: string; at: number; seqs: Set<number> }>();
  const gateway = createFakeQQGateway({ validToken: (token) => tokens.has(token), bot, heartbeatIntervalMs: options.heartbeatIntervalMs ?? 30_000 });
  let nextSeq = 1;

  const remember = (event: QQEvent, chatId: string): QQEvent => {
    triggers.set(event.d.id, { chatId, at: Date.now(), seqs: new Set() });
    return event;
  };

  function postMessage(kind: string, target: string, body: Record<string, unknown>): { status: number; body: Record<string, unknown> } {
    const chatId = `${kind}:${target}`;
    const v2 = kind === "group" || kind === "user";
    const markdown = v2 ? body.msg_type === 2 : body.markdown !== undefined;
    const text = markdown ? (body.markdown as { content?: unknown } | undefined)?.content : body.content;
    if (typeof text !== "string" || text === "") return { status: 400, body: { code: 50006, message: "message is empty" } };
    if (markdown && !options.markdown) return { status: 400, body: { code: 304082, message: "markdown message not allowed for this bot" } };
    if (text.length > (options.maxLength ?? 4_000)) return { status: 400, body: { code: 304003, message: "content too long" } };
    const msgId = typeof body.msg_id === "string" ? body.msg_id : undefined;
    const msgSeq = typeof body.msg_seq === "number" ? body.msg_seq : v2 && msgId ? 1 : undefined;
    if (msgId) {
      const trigger = triggers.get(msgId);
      if (!trigger || trigger.chatId !== chatId) return { status: 400, body: { code: 40034028, message: "msg_id invalid for this chat" } };
      if (Date.now() - trigger.at > replyWindowMs) return { status: 400, body: { code: 40034024, message: "msg_id expired: passive reply window is over" } };
      if (v2 && msgSeq !== undefined) {
        if (trigger.seqs.has(msgSeq)) return { status: 400, body: { code: 40054005, message: "消息被去重，请检查请求msgseq" } };
        if (trigger.seqs.size >= 5) return { status: 400, body: { code: 40034025, message: "msg_id reply count exceeds the limit" } };
        trigger.seqs.add(msgSeq);
      }
    } else if (v2 && !options.activeGroupMessages) {
      return { status: 403, body: { code: 40034102, message: "active messages are not allowed for this bot" } };
    }
    const id = `BOTMSG${String(nextSeq).padStart(6, "0")}${randomBytes(4).toString("hex")}`;
    messages.push({ seq: nextSeq++, id, chatId, text, markdown, ...(msgId ? { msgId } : {}), ...(msgSeq !== undefined ? { msgSeq } : {}) });
    return { status: 200, body: v2 ? { id, timestamp: Date.now() } : { id, channel_id: target, content: text, timestamp: new Date().toISOString() } };
  }

  function routeOf(method: string, pathname: string): { route: QQRoute | "unknown"; kind?: string; target?: string } {
    if (method === "POST" && pathname === "/app/getAppAccessToken") return { route: "token" };
    if (method === "GET" && pathname === "/gateway") return { route: "gateway" };
    if (method === "GET" && pathname === "/users/@me") return { route: "me" };
    for (const [pattern, route, kind] of MESSAGE_ROUTES) {
      const match = method === "POST" ? pattern.exec(pathname) : null;
      if (match) return { route, kind, target: decodeURIComponent(match[1]!) };
    }
    return { route: "unknown" };
  }

  async function handle(incoming: IncomingMessage, response: ServerResponse): Promise<void> {
    const url = new URL(incoming.url ?? "/", "http://127.0.0.1");
    const method = incoming.method ?? "GET";
    const raw = await readBody(incoming);
    const { route, kind, target } = routeOf(method, url.pathname);
    const call: QQCall = { route, method, path: url.pathname, body: {}, status: 200 };
    requests.push(call);
    const reply = (status: number, payload: Record<string, unknown>) => {
      call.status = status;
      if (typeof payload.code === "number") call.code = payload.code;
      response.writeHead(status, { "content-type": "application/json" });
      response.end(JSON.stringify(payload));
    };
    try {
      call.body = raw.length > 0 ? (JSON.parse(raw.toString("utf8")) as Record<string, unknown>) : {};
    } catch {
      return reply(400, { code: 40000, message: "the body is not JSON" });
    }
    if (route === "unknown") return reply(404, { code: 404, message: `no route for ${method} ${url.pathname}` });
    const failure = failures.get(route)?.shift();
    if (failure) return reply(failure.status, { code: failure.code, message: failure.message ?? "failure on demand", trace_id: randomBytes(8).toString("hex") });
    if (route === "token") {
      if (call.body.appId !== options.appId || call.body.clientSecret !== options.appSecret) return reply(200, { code: 100016, message: "invalid appid or secret" });
      const token = randomBytes(24).toString("base64url");
      tokens.add(token);
      return reply(200, { access_token: token, expires_in: "7200" });
    }
    const auth = incoming.headers.authorization ?? "";
    if (!auth.startsWith("QQBot ") || !tokens.has(auth.slice(6)) || incoming.headers["x-union-appid"] !== options.appId) return reply(401, { code: 11244, message: "token not exist or expire" });
    if (route === "gateway") return reply(200, { url: `ws://127.0.0.1:${(server.address() as AddressInfo).port}/websocket` });
    if (route === "me") return reply(200, { ...bot, avatar: "", union_openid: "", union_user_account: "" });
    const result = postMessage(kind!, target!, call.body);
    return reply(result.status, result.body);
  }

  const server = createServer((incoming, response) => {
    handle(incoming, response).catch((error: unknown) => {
      response.writeHead(500);
      response.end(String(error));
    });
  });
  const sockets = new WebSocketServer({ noServer: true });
  server.on("upgrade", (incoming, socket, head) => {
    if (new URL(incoming.url ?? "/", "http://127.0.0.1").pathname !== "/websocket") return void socket.end("HTTP/1.1 404 Not Found\r\n\r\n");
    sockets.handleUpgrade(incoming, socket, head, (webSocket) => gateway.accept(webSocket));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

  return {
    origin,
    tokenUrl: `${origin}/app/getAppAccessToken`,
    bot,
    requests,
    messages,
    gateway,
    groupAt: (input) => remember(groupAtMessage(input), `group:${input.group}`),
    c2c: (input) => remember(c2cMessage(input), `user:${input.from.openid}`),
    channel: (input) => remember(channelMessage({ ...input, bot }), `channel:${input.channel}`),
    dispatch: (event, times) => gateway.dispatch(event, times),
    async postWebhook(url, payload, sign = {}) {
      const body = JSON.stringify(payload);
      const timestamp = sign.timestamp ?? String(Math.floor(Date.now() / 1000));
      const headers = {
        "content-type": "application/json",
        "user-agent": "QQBot-Callback",
        "x-bot-appid": options.appId,
        "x-signature-method": "Ed25519",
        "x-signature-timestamp": timestamp,
        "x-signature-ed25519": qqSign(sign.secret ?? options.appSecret, `${timestamp}${body}`),
      };
      const response = await fetch(url, { method: "POST", headers, body });
      return { status: response.status, body: await response.text() };
    },
    shown: (chatId) => messages.filter((message) => message.chatId === chatId).map((message) => message.text),
    revokeTokens: () => tokens.clear(),
    failNext(route, failure) {
      failures.set(route, [...(failures.get(route) ?? []), failure]);
    },
    async waitFor(predicate, waitOptions = {}) {
      const deadline = Date.now() + (waitOptions.timeoutMs ?? 10_000);
      for (;;) {
        const value = predicate();
        if (value) return value;
        if (Date.now() > deadline) throw new Error(`fake QQ: timed out waiting for ${waitOptions.what ?? "a condition"}`);
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    },
    async close() {
      gateway.close();
      sockets.close();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
