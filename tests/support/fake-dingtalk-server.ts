/**
 * A fake DingTalk open platform, spoken to by the real Stream SDK (`dingtalk-stream`) and the
 * channel's OpenAPI calls through `apiRoot: fake.origin`:
 *
 * - `POST /v1.0/gateway/connections/open` (the app's clientId and clientSecret, its subscriptions)
 *   answers `{endpoint, ticket}`; the WebSocket at the endpoint takes each ticket once. Frames are
 *   DingTalk's JSON: `{specVersion, type, headers, data}` down, `{code, headers, message, data}` up,
 *   with acknowledgements and redelivery (fake-dingtalk-stream.ts).
 * - `POST /v1.0/oauth2/accessToken` (appKey and appSecret) gives a token every other route needs
 *   in `x-acs-dingtalk-access-token` (401 `InvalidAuthentication` otherwise);
 * - `POST /v1.0/robot/oToMessages/batchSend`, `POST /v1.0/robot/groupMessages/send`: messages
 *   (`sampleMarkdown`, `sampleText`) with a `processQueryKey`; a Markdown text over
 *   `maxMarkdownLength` is refused; more than `apiCallsPerSecond` calls a second to one API get
 *   403 `Forbidden.AccessDenied.QpsLimitForApi`;
 * - `POST /v1.0/card/instances/createAndDeliver`, `PUT /v1.0/card/streaming`, `PUT /v1.0/card/instances`:
 *   AI cards by `outTrackId` (a create for an outTrackId that exists answers the card it made:
 *   assumed, DingTalk documents no duplicate rule), their parameters and every update;
 * - `POST /v1.0/robot/messageFiles/download` → a temporary URL on this server; session webhooks
 *   (`POST /robot/sendBySession?session=…`), valid until the time the message said.
 *
 * Failures on demand: {@link FakeDingTalkServer.failNext}.
 */
import { randomBytes, randomUUID } from "node:crypto";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { WebSocketServer } from "ws";
import { type FakeMessageInput, type RobotMessageJson, buildRobotMessage, signCallback } from "./dingtalk-messages.js";
import { createFakeStream } from "./fake-dingtalk-stream.js";

export type { FakeMessageInput, FakeUser, RobotMessageJson } from "./dingtalk-messages.js";

export { ROBOT_TOPIC } from "./fake-dingtalk-stream.js";

export type DingTalkRoute = "token" | "gateway" | "batchSend" | "groupSend" | "download" | "file" | "cardCreate" | "cardStreaming" | "cardUpdate" | "session";

export interface DingTalkFailure {
  status: number;
  code: string;
  message?: string;
}

export interface DingTalkCall {
  route: DingTalkRoute | "unknown";
  method: string;
  path: string;
  body: Record<string, unknown>;
  status: number;
  code?: string;
}

export interface BotMessage {
  /** Order among the messages and cards the robot put out. */
  seq: number;
  processQueryKey: string;
  route: "user" | "group" | "session";
  /** The staffId, the openConversationId, or the session's conversation. */
  target: string;
  msgKey: string;
  title?: string;
  text: string;
}

export interface FakeCard {
  seq: number;
  outTrackId: string;
  openSpaceId: string;
  templateId: string;
  params: Record<string, string>;
  /** flowStatus after each change, the first included. */
  statuses: string[];
  /** Streaming updates it took. */
  streamed: number;
}

export interface FakeDingTalkOptions {
  appKey: string;
  appSecret: string;
  robotCode?: string;
  /** Default 60 s, DingTalk's. */
  redeliverAfterMs?: number;
  apiCallsPerSecond?: number;
  maxMarkdownLength?: number;
}

export interface FakeDingTalkServer {
  origin: string;
  chatbotUserId: string;
  requests: DingTalkCall[];
  messages: BotMessage[];
  cards: FakeCard[];
  readonly liveConnections: number;
  readonly gatewayCalls: number;
  /** The subscriptions the last open-connection call asked for. */
  readonly subscriptions: unknown;
  /** Acknowledgements received, by robot msgId. */
  readonly acks: Map<string, number>;
  message(input: FakeMessageInput): RobotMessageJson;
  /** Delivers a robot message over the Stream connection; resolves once acknowledged, with the deliveries it took. */
  push(message: RobotMessageJson, options?: { ignoreAcks?: number; timeoutMs?: number }): Promise<{ deliveries: number }>;
  addFile(downloadCode: string, bytes: Buffer, mimeType: string): void;
  /** A SYSTEM ping to every connection; resolves once each echoed it. */
  ping(): Promise<void>;
  /** A SYSTEM disconnect to every connection, closed `graceMs` later. */
  disconnect(graceMs?: number): void;
  dropConnections(): void;
  /** The next `count` WebSocket upgrades are refused (401), their tickets notwithstanding. */
  refuseUpgrades(count: number): void;
  /** Makes every issued access token invalid (as a revoked or expired one). */
  revokeTokens(): void;
  /** Posts a robot message to an HTTP callback as DingTalk does, signed with `secret` (default the app's). */
  postCallback(url: string, message: unknown, sign?: { secret?: string; timestamp?: string }): Promise<{ status: number; body: string }>;
  failNext(route: DingTalkRoute, failure: DingTalkFailure): void;
  waitFor<T>(predicate: () => T | undefined | null | false, options?: { timeoutMs?: number; what?: string }): Promise<T>;
  close(): Promise<void>;
}

const routes: Record<string, DingTalkRoute> = {
  "POST /v1.0/oauth2/accessToken": "token",
  "POST /v1.0/gateway/connections/open": "gateway",
  "POST /v1.0/robot/oToMessages/batchSend": "batchSend",
  "POST /v1.0/robot/groupMessages/send": "groupSend",
  "POST /v1.0/robot/messageFiles/download": "download",
  "POST /v1.0/card/instances/createAndDeliver": "cardCreate",
  "PUT /v1.0/card/streaming": "cardStreaming",
  "PUT /v1.0/card/instances": "cardUpdate",
  "POST /robot/sendBySession": "session",
};

function readBody(incoming: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    incoming.on("data", (chunk: Buffer) => chunks.push(chunk));
    incoming.on("end", () => resolve(Buffer.concat(chunks)));
    incoming.on("error", reject);
  });
}

export async function startFakeDingTalk(options: FakeDingTalkOptions): Promise<FakeDingTalkServer> {
  const robotCode = options.robotCode ?? options.appKey;
  const chatbotUserId = `$:LWCP_v1:$bot${randomBytes(8).toString("hex")}`;
  const redeliverAfterMs = options.redeliverAfterMs ?? 60_000;
  const requests: DingTalkCall[] = [];
  const messages: BotMessage[] = [];
  const cards: FakeCard[] = [];
  const tokens = new Set<string>();
  const tickets = new Set<string>();
  const files = new Map<string, { bytes: Buffer; mimeType: string }>();
  const temporary = new Map<string, string>();
  const sessions = new Map<string, { conversationId: string; expiresAt: number }>();
  const failures = new Map<DingTalkRoute, DingTalkFailure[]>();
  const perSecond = new Map<string, number[]>();
  const stream = createFakeStream({ appKey: options.appKey, redeliverAfterMs });
  let gatewayCalls = 0;
  let subscriptions: unknown;
  let nextKey = 1;
  let nextSeq = 1;
  let upgradesToRefuse = 0;

  const answer = (response: ServerResponse, status: number, body: unknown) => {
    response.writeHead(status, { "content-type": "application/json; charset=utf-8" });
    response.end(JSON.stringify(body));
  };

  function overQps(route: string): boolean {
    const now = Date.now();
    const recent = (perSecond.get(route) ?? []).filter((time) => now - time < 1_000);
    if (recent.length >= (options.apiCallsPerSecond ?? 20)) return true;
    recent.push(now);
    perSecond.set(route, recent);
    return false;
  }

  /** A message the robot sends; the refusal DingTalk would give, or the processQueryKey. */
  function postMessage(route: BotMessage["route"], target: string, msgKey: unknown, msgParam: unknown): { status: number; body: Record<string, unknown> } {
    let param: { title?: string; text?: string; content?: string };
    try {
      param = JSON.parse(String(msgParam)) as typeof param;
    } catch {
      return { status: 400, body: { code: "InvalidParameter.MsgParam", message: "msgParam is not JSON" } };
    }
    const text = msgKey === "sampleMarkdown" ? param.text : msgKey === "sampleText" ? param.content : undefined;
    if (typeof text !== "string" || (msgKey === "sampleMarkdown" && typeof param.title !== "string")) {
      return { status: 400, body: { code: "InvalidParameter.MsgParam", message: `msgParam does not fit ${String(msgKey)}` } };
    }
    if (text.length > (options.maxMarkdownLength ?? 5_000)) return { status: 400, body: { code: "InvalidParameter.MsgParam", message: "the message content is too long" } };
    const processQueryKey = `pqk${String(nextKey++).padStart(6, "0")}`;
    messages.push({ seq: nextSeq++, processQueryKey, route, target, msgKey: String(msgKey), text, ...(param.title ? { title: param.title } : {}) });
    return { status: 200, body: { processQueryKey } };
  }

  function cardOf(outTrackId: unknown): FakeCard | undefined {
    return cards.find((card) => card.outTrackId === outTrackId);
  }

  function setParams(card: FakeCard, params: unknown, merge: boolean): void {
    const next = Object.fromEntries(Object.entries((params ?? {}) as Record<string, unknown>).map(([key, value]) => [key, String(value)]));
    card.params = merge ? { ...card.params, ...next } : next;
    if (next.flowStatus !== undefined) card.statuses.push(next.flowStatus);
  }

  function api(route: DingTalkRoute, body: Record<string, unknown>, origin: string): { status: number; body: Record<string, unknown> } {
    switch (route) {
      case "batchSend": {
        const userIds = body.userIds;
        if (body.robotCode !== robotCode || !Array.isArray(userIds) || userIds.length !== 1) return { status: 400, body: { code: "InvalidParameter", message: "robotCode or userIds" } };
        const sent = postMessage("user", String(userIds[0]), body.msgKey, body.msgParam);
        return sent.status === 200 ? { status: 200, body: { ...sent.body, invalidStaffIdList: [], flowControlledStaffIdList: [] } } : sent;
      }
      case "groupSend":
        if (body.robotCode !== robotCode || typeof body.openConversationId !== "string") return { status: 400, body: { code: "InvalidParameter", message: "robotCode or openConversationId" } };
        return postMessage("group", body.openConversationId, body.msgKey, body.msgParam);
      case "download": {
        const file = typeof body.downloadCode === "string" ? files.get(body.downloadCode) : undefined;
        if (!file || body.robotCode !== robotCode) return { status: 404, body: { code: "notFound.downloadCode", message: "download code not found" } };
        const key = randomBytes(8).toString("hex");
        temporary.set(key, String(body.downloadCode));
        return { status: 200, body: { downloadUrl: `${origin}/files/${key}` } };
      }
      case "cardCreate": {
        const params = (body.cardData as { cardParamMap?: Record<string, unknown> } | undefined)?.cardParamMap;
        const openSpaceId = String(body.openSpaceId ?? "");
        if (typeof body.outTrackId !== "string" || !params || !/^dtv1\.card\/\/IM_(GROUP|ROBOT)\.\S+$/.test(openSpaceId)) return { status: 400, body: { code: "InvalidParameter", message: "outTrackId, cardParamMap or openSpaceId" } };
        if (Object.values(params).some((value) => typeof value !== "string")) return { status: 400, body: { code: "InvalidParameter.CardParamMap", message: "cardParamMap values are strings" } };
        const spaceType = openSpaceId.includes("IM_GROUP") ? "IM_GROUP" : "IM_ROBOT";
        const deliverResults = [{ spaceType, spaceId: openSpaceId.split(".").slice(2).join("."), success: true, carrierId: `carrier-${body.outTrackId}` }];
        if (!cardOf(body.outTrackId)) {
          const card: FakeCard = { seq: nextSeq++, outTrackId: body.outTrackId, openSpaceId, templateId: String(body.cardTemplateId), params: {}, statuses: [], streamed: 0 };
          setParams(card, params, false);
          cards.push(card);
        }
        return { status: 200, body: { success: true, result: { outTrackId: body.outTrackId, deliverResults } } };
      }
      case "cardStreaming": {
        const card = cardOf(body.outTrackId);
        if (!card) return { status: 404, body: { code: "notFound.cardInstance", message: "card not found" } };
        const key = String(body.key);
        card.params[key] = body.isFull === false ? `${card.params[key] ?? ""}${String(body.content)}` : String(body.content);
        card.streamed += 1;
        return { status: 200, body: { success: true, result: true } };
      }
      case "cardUpdate": {
        const card = cardOf(body.outTrackId);
        if (!card) return { status: 404, body: { code: "notFound.cardInstance", message: "card not found" } };
        const merge = (body.cardUpdateOptions as { updateCardDataByKey?: boolean } | undefined)?.updateCardDataByKey === true;
        setParams(card, (body.cardData as { cardParamMap?: unknown } | undefined)?.cardParamMap, merge);
        return { status: 200, body: { success: true, result: true } };
      }
      default:
        return { status: 404, body: { code: "NotFound", message: "no such route" } };
    }
  }

  async function handle(incoming: IncomingMessage, response: ServerResponse): Promise<void> {
    const url = new URL(incoming.url ?? "/", "http://127.0.0.1");
    const method = incoming.method ?? "GET";
    const raw = await readBody(incoming);
    const route: DingTalkRoute | "unknown" = method === "GET" && url.pathname.startsWith("/files/") ? "file" : (routes[`${method} ${url.pathname}`] ?? "unknown");
    let body: Record<string, unknown> = {};
    const call: DingTalkCall = { route, method, path: url.pathname, body, status: 200 };
    requests.push(call);
    const reply = (status: number, payload: Record<string, unknown>) => {
      call.status = status;
      if (typeof payload.code === "string") call.code = payload.code;
      answer(response, status, payload);
    };
    try {
      body = raw.length > 0 ? (JSON.parse(raw.toString("utf8")) as Record<string, unknown>) : {};
      call.body = body;
    } catch {
      return reply(400, { code: "InvalidParameter", message: "the body is not JSON" });
    }
    if (route === "unknown") return reply(404, { code: "NotFound", message: `no route for ${method} ${url.pathname}` });
    const failure = failures.get(route)?.shift();
    if (failure) return reply(failure.status, { code: failure.code, message: failure.message ?? "failure on demand", requestid: randomUUID() });
    if (route === "file") {
      const code = temporary.get(url.pathname.slice("/files/".length));
      const file = code ? files.get(code) : undefined;
      if (!file) return reply(404, { code: "NotFound", message: "expired" });
      response.writeHead(200, { "content-type": file.mimeType, "content-length": String(file.bytes.length) });
      response.end(file.bytes);
      return;
    }
    if (route === "token") {
      if (body.appKey !== options.appKey || body.appSecret !== options.appSecret) return reply(400, { code: "invalidClientIdOrSecret", message: "无效的clientId或clientSecret" });
      const token = randomBytes(16).toString("hex");
      tokens.add(token);
      return reply(200, { accessToken: token, expireIn: 7200 });
    }
    if (route === "gateway") {
      if (body.clientId !== options.appKey || body.clientSecret !== options.appSecret) return reply(401, { code: "InvalidAuthentication", message: "clientId or clientSecret invalid" });
      gatewayCalls += 1;
      subscriptions = body.subscriptions;
      const ticket = randomUUID();
      tickets.add(ticket);
      return reply(200, { endpoint: `ws://127.0.0.1:${(server.address() as AddressInfo).port}/connect`, ticket });
    }
    if (route === "session") {
      const session = sessions.get(url.searchParams.get("session") ?? "");
      if (!session || session.expiresAt < Date.now()) return reply(200, { errcode: 300001, errmsg: "session expired" });
      const markdown = body.markdown as { title?: string; text?: string } | undefined;
      const text = body.msgtype === "markdown" ? markdown?.text : (body.text as { content?: string } | undefined)?.content;
      if (typeof text !== "string") return reply(200, { errcode: 40035, errmsg: "missing content" });
      messages.push({ seq: nextSeq++, processQueryKey: "", route: "session", target: session.conversationId, msgKey: String(body.msgtype), text, ...(markdown?.title ? { title: markdown.title } : {}) });
      return reply(200, { errcode: 0, errmsg: "ok" });
    }
    const token = incoming.headers["x-acs-dingtalk-access-token"];
    if (typeof token !== "string" || !tokens.has(token)) return reply(401, { code: "InvalidAuthentication", message: "不合法的access_token" });
    if (overQps(route)) return reply(403, { code: "Forbidden.AccessDenied.QpsLimitForApi", message: "请求过于频繁" });
    const result = api(route, body, `http://127.0.0.1:${(server.address() as AddressInfo).port}`);
    return reply(result.status, result.body);
  }

  const server = createServer((incoming, response) => {
    handle(incoming, response).catch((error: unknown) => answer(response, 500, { code: "ServiceUnavailable", message: String(error) }));
  });
  const sockets = new WebSocketServer({ noServer: true });
  server.on("upgrade", (incoming, socket, head) => {
    const url = new URL(incoming.url ?? "/", "http://127.0.0.1");
    const ticket = url.searchParams.get("ticket") ?? "";
    const refuse = upgradesToRefuse > 0;
    if (refuse) upgradesToRefuse -= 1;
    if (url.pathname !== "/connect" || !tickets.delete(ticket) || refuse) {
      socket.end("HTTP/1.1 401 Unauthorized\r\n\r\n");
      return;
    }
    sockets.handleUpgrade(incoming, socket, head, (webSocket) => stream.accept(webSocket));
  });

  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const context = {
    robotCode,
    chatbotUserId,
    corpId: "dingcorpfake0001",
    sessionWebhook(conversationId: string) {
      const session = randomBytes(12).toString("hex");
      const expiresAt = Date.now() + 90 * 60_000;
      sessions.set(session, { conversationId, expiresAt });
      return { url: `${origin}/robot/sendBySession?session=${session}`, expiresAt };
    },
  };

  return {
    origin,
    chatbotUserId,
    requests,
    messages,
    cards,
    get liveConnections() {
      return stream.liveConnections;
    },
    get gatewayCalls() {
      return gatewayCalls;
    },
    get subscriptions() {
      return subscriptions;
    },
    acks: stream.acks,
    message: (input) => buildRobotMessage(input, context),
    push: (message, pushOptions) => stream.push(message, pushOptions),
    addFile(downloadCode, bytes, mimeType) {
      files.set(downloadCode, { bytes, mimeType });
    },
    ping: () => stream.ping(),
    disconnect: (graceMs) => stream.disconnect(graceMs),
    dropConnections: () => stream.dropConnections(),
    refuseUpgrades(count) {
      upgradesToRefuse = count;
    },
    revokeTokens() {
      tokens.clear();
    },
    async postCallback(url, message, sign = {}) {
      const timestamp = sign.timestamp ?? String(Date.now());
      const headers = { "content-type": "application/json; charset=utf-8", timestamp, sign: signCallback(timestamp, sign.secret ?? options.appSecret) };
      const response = await fetch(url, { method: "POST", headers, body: JSON.stringify(message) });
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
        if (Date.now() > deadline) throw new Error(`fake DingTalk: timed out waiting for ${waitOptions.what ?? "a condition"}`);
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    },
    async close() {
      stream.close();
      sockets.close();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
