/**
 * A fake WeCom server API and callback sender, for the channel through `apiRoot: fake.origin`:
 *
 * - `GET /cgi-bin/gettoken?corpid&corpsecret` → `{errcode: 0, access_token, expires_in}` (40013 for
 *   another corp, 40001 for another secret); every other route takes `?access_token=` (40014 for
 *   an unknown one, 42001 for an expired one);
 * - `POST /cgi-bin/message/send` (`touser`, `agentid`, `msgtype` text or markdown): the content at
 *   most `maxContentBytes` UTF-8 bytes (45002 otherwise), a user outside `members` in `invaliduser`;
 *   `POST /cgi-bin/appchat/send`;
 * - `GET /cgi-bin/media/get?media_id`: the bytes added with {@link FakeWeComServer.addMedia}, with
 *   Content-Type, Content-Length and Content-Disposition; 40007 as JSON for an unknown id;
 * - the callbacks WeCom makes: a message as the application's XML, encrypted and signed with this
 *   side's own implementation of the crypto (wecom-callback-crypto.ts), POSTed to the callback URL;
 *   the URL verification GET with an encrypted echostr.
 */
import { randomBytes } from "node:crypto";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { wecomEncrypt, wecomSignature } from "./wecom-callback-crypto.js";

export interface FakeWeComOptions {
  corpId: string;
  agentId: string;
  secret: string;
  token: string;
  encodingAESKey: string;
  /** Members the application may message. Default: anyone. */
  members?: string[];
  /** Lifetime of an access token. Default 7200 s. */
  tokenTtlS?: number;
  maxContentBytes?: number;
}

export interface WeComCall {
  route: string;
  method: string;
  query: Record<string, string>;
  body: Record<string, unknown>;
  errcode: number;
}

export interface SentMessage {
  seq: number;
  msgid: string;
  /** The member (message/send) or the chat (appchat/send). */
  target: string;
  route: "message" | "appchat";
  msgtype: string;
  content: string;
}

export interface AppMessageInput {
  from: string;
  text?: string;
  msgType?: "text" | "image" | "voice" | "file" | "event";
  mediaId?: string;
  msgId?: string;
  createTime?: number;
  extra?: Record<string, string>;
}

export interface CallbackSigning {
  /** Sign with this token instead of the application's. */
  token?: string;
  /** A signature as given, instead of a computed one. */
  signature?: string;
  timestamp?: string;
  /** Encrypt for another corp id. */
  receiveId?: string;
  /** The body as given, instead of the XML envelope. */
  rawBody?: string;
}

export interface FakeWeComServer {
  origin: string;
  requests: WeComCall[];
  messages: SentMessage[];
  readonly tokenCalls: number;
  appMessage(input: AppMessageInput): { xml: string; msgId: string };
  /** POSTs a message to the callback URL as WeCom does; resolves with the answer. */
  postCallback(url: string, xml: string, signing?: CallbackSigning): Promise<{ status: number; body: string; ms: number }>;
  /** The URL verification GET; resolves with the answer and the echostr's plaintext. */
  verifyUrl(url: string, signing?: CallbackSigning): Promise<{ status: number; body: string; expected: string }>;
  addMedia(mediaId: string, bytes: Buffer, mimeType: string, fileName?: string): void;
  /** Makes every issued access token invalid (errcode 40014). */
  revokeTokens(): void;
  waitFor<T>(predicate: () => T | undefined | null | false, options?: { timeoutMs?: number; what?: string }): Promise<T>;
  close(): Promise<void>;
}

const cdata = (value: string) => `<![CDATA[${value.replaceAll("]]>", "]]]]><![CDATA[>")}]]>`;

function readBody(incoming: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    incoming.on("data", (chunk: Buffer) => chunks.push(chunk));
    incoming.on("end", () => resolve(Buffer.concat(chunks)));
    incoming.on("error", reject);
  });
}

export async function startFakeWeCom(options: FakeWeComOptions): Promise<FakeWeComServer> {
  const requests: WeComCall[] = [];
  const messages: SentMessage[] = [];
  const tokens = new Map<string, number>();
  const media = new Map<string, { bytes: Buffer; mimeType: string; fileName?: string }>();
  const maxBytes = options.maxContentBytes ?? 2048;
  let tokenCalls = 0;
  let nextSeq = 1;
  let nextMsgId = BigInt("7400000000000000000");

  const json = (response: ServerResponse, body: Record<string, unknown>) => {
    response.writeHead(200, { "content-type": "application/json; charset=UTF-8" });
    response.end(JSON.stringify(body));
  };

  function send(route: "message" | "appchat", body: Record<string, unknown>): Record<string, unknown> {
    const msgtype = String(body.msgtype ?? "");
    const part = body[msgtype] as { content?: unknown } | undefined;
    if ((msgtype !== "text" && msgtype !== "markdown") || typeof part?.content !== "string") return { errcode: 40008, errmsg: "invalid message type" };
    if (part.content.length === 0) return { errcode: 44004, errmsg: "empty content" };
    if (Buffer.byteLength(part.content, "utf8") > maxBytes) return { errcode: 45002, errmsg: "content size out of limit" };
    if (route === "appchat") {
      if (typeof body.chatid !== "string") return { errcode: 86003, errmsg: "chat not exist" };
      messages.push({ seq: nextSeq++, msgid: "", target: body.chatid, route, msgtype, content: part.content });
      return { errcode: 0, errmsg: "ok" };
    }
    if (String(body.agentid) !== options.agentId) return { errcode: 40056, errmsg: "invalid agentid" };
    const touser = String(body.touser ?? "");
    if (options.members && !options.members.includes(touser)) return { errcode: 0, errmsg: "ok", invaliduser: touser };
    const msgid = `msg${(nextMsgId++).toString()}`;
    messages.push({ seq: nextSeq++, msgid, target: touser, route, msgtype, content: part.content });
    return { errcode: 0, errmsg: "ok", invaliduser: "", msgid };
  }

  async function handle(incoming: IncomingMessage, response: ServerResponse): Promise<void> {
    const url = new URL(incoming.url ?? "/", "http://127.0.0.1");
    const raw = await readBody(incoming);
    const query = Object.fromEntries(url.searchParams);
    const call: WeComCall = { route: url.pathname, method: incoming.method ?? "GET", query, body: {}, errcode: 0 };
    requests.push(call);
    const reply = (body: Record<string, unknown>) => {
      call.errcode = typeof body.errcode === "number" ? body.errcode : 0;
      json(response, body);
    };
    if (url.pathname === "/cgi-bin/gettoken") {
      tokenCalls += 1;
      if (query.corpid !== options.corpId) return reply({ errcode: 40013, errmsg: "invalid corpid" });
      if (query.corpsecret !== options.secret) return reply({ errcode: 40001, errmsg: "invalid credential" });
      const token = randomBytes(24).toString("base64url");
      const ttl = options.tokenTtlS ?? 7_200;
      tokens.set(token, Date.now() + ttl * 1000);
      return reply({ errcode: 0, errmsg: "ok", access_token: token, expires_in: ttl });
    }
    const expiresAt = tokens.get(query.access_token ?? "");
    if (expiresAt === undefined) return reply({ errcode: 40014, errmsg: "invalid access_token" });
    if (expiresAt < Date.now()) return reply({ errcode: 42001, errmsg: "access_token expired" });
    if (url.pathname === "/cgi-bin/media/get") {
      const item = media.get(query.media_id ?? "");
      if (!item) return reply({ errcode: 40007, errmsg: "invalid media_id" });
      const disposition = item.fileName ? { "content-disposition": `attachment; filename="${item.fileName}"` } : {};
      response.writeHead(200, { "content-type": item.mimeType, "content-length": String(item.bytes.length), ...disposition });
      response.end(item.bytes);
      return;
    }
    let body: Record<string, unknown>;
    try {
      body = JSON.parse(raw.toString("utf8")) as Record<string, unknown>;
    } catch {
      return reply({ errcode: 47001, errmsg: "data format error" });
    }
    call.body = body;
    if (url.pathname === "/cgi-bin/message/send") return reply(send("message", body));
    if (url.pathname === "/cgi-bin/appchat/send") return reply(send("appchat", body));
    return reply({ errcode: 404, errmsg: `no route ${url.pathname}` });
  }

  const server = createServer((incoming, response) => {
    handle(incoming, response).catch((error: unknown) => json(response, { errcode: -1, errmsg: String(error) }));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

  function signedQuery(encrypted: string, signing: CallbackSigning): URLSearchParams {
    const timestamp = signing.timestamp ?? String(Math.floor(Date.now() / 1000));
    const nonce = randomBytes(6).toString("hex");
    const signature = signing.signature ?? wecomSignature(signing.token ?? options.token, timestamp, nonce, encrypted);
    return new URLSearchParams({ msg_signature: signature, timestamp, nonce });
  }

  return {
    origin,
    requests,
    messages,
    get tokenCalls() {
      return tokenCalls;
    },
    appMessage(input) {
      const msgType = input.msgType ?? "text";
      const msgId = input.msgId ?? (nextMsgId++).toString();
      const fields: Record<string, string> = {
        ToUserName: options.corpId,
        FromUserName: input.from,
        CreateTime: String(input.createTime ?? Math.floor(Date.now() / 1000)),
        MsgType: msgType,
        ...(msgType === "text" ? { Content: input.text ?? "" } : {}),
        ...(input.mediaId ? { MediaId: input.mediaId } : {}),
        ...(msgType === "event" ? {} : { MsgId: msgId }),
        AgentID: options.agentId,
        ...input.extra,
      };
      const xml = `<xml>${Object.entries(fields)
        .map(([name, value]) => `<${name}>${/^\d+$/.test(value) ? value : cdata(value)}</${name}>`)
        .join("")}</xml>`;
      return { xml, msgId };
    },
    async postCallback(url, xml, signing = {}) {
      const encrypted = wecomEncrypt(options.encodingAESKey, xml, signing.receiveId ?? options.corpId);
      const body = signing.rawBody ?? `<xml><ToUserName>${cdata(options.corpId)}</ToUserName><AgentID>${cdata(options.agentId)}</AgentID><Encrypt>${cdata(encrypted)}</Encrypt></xml>`;
      const started = performance.now();
      const response = await fetch(`${url}?${signedQuery(encrypted, signing).toString()}`, { method: "POST", headers: { "content-type": "text/xml" }, body });
      const text = await response.text();
      return { status: response.status, body: text, ms: performance.now() - started };
    },
    async verifyUrl(url, signing = {}) {
      const expected = randomBytes(8).toString("hex");
      const echostr = wecomEncrypt(options.encodingAESKey, expected, signing.receiveId ?? options.corpId);
      const query = signedQuery(echostr, signing);
      query.set("echostr", echostr);
      const response = await fetch(`${url}?${query.toString()}`);
      return { status: response.status, body: await response.text(), expected };
    },
    addMedia(mediaId, bytes, mimeType, fileName) {
      media.set(mediaId, { bytes, mimeType, ...(fileName ? { fileName } : {}) });
    },
    revokeTokens() {
      tokens.clear();
    },
    async waitFor(predicate, waitOptions = {}) {
      const deadline = Date.now() + (waitOptions.timeoutMs ?? 10_000);
      for (;;) {
        const value = predicate();
        if (value) return value;
        if (Date.now() > deadline) throw new Error(`fake WeCom: timed out waiting for ${waitOptions.what ?? "a condition"}`);
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    },
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
