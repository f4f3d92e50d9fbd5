/**
 * A fake WeCom intelligent-robot long connection, spoken to by WeCom's own SDK
 * (`@wecom/aibot-node-sdk`) through `wsUrl: fake.url`. Frames are WeCom's JSON:
 *
 * - `{cmd: "aibot_subscribe", headers: {req_id}, body: {bot_id, secret}}` → `{headers: {req_id},
 *   errcode: 0}` (40001 and a close for other credentials); `ping` → an acknowledgement;
 * - down: `{cmd: "aibot_msg_callback", headers: {req_id}, body: {msgid, aibotid, chatid, chattype,
 *   from: {userid}, msgtype, text}}`; a group message's text begins with `@<robot name>`;
 * - up: `aibot_respond_msg` with `{msgtype: "stream", stream: {id, finish, content}}` on a
 *   message's req_id (its stream shows the newest content; an update after `finish` is refused
 *   with errcode 40058), `aibot_send_msg` with `{chatid, msgtype: "markdown", markdown: {content}}`
 *   (over `maxContentBytes` bytes: 45002); each acknowledged `{headers: {req_id}, errcode, errmsg}`.
 *
 * Failures on demand: {@link FakeAibot.failNext} answers the next reply or push with an errcode.
 */
import { randomBytes } from "node:crypto";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { type WebSocket, WebSocketServer } from "ws";

export interface AibotStream {
  seq: number;
  id: string;
  /** The chat of the message it answers. */
  chatId: string;
  reqId: string;
  content: string;
  finished: boolean;
  updates: number;
}

export interface AibotPush {
  seq: number;
  chatId: string;
  content: string;
}

export interface FakeAibot {
  url: string;
  botId: string;
  streams: AibotStream[];
  pushes: AibotPush[];
  readonly connections: number;
  readonly subscribes: number;
  /** Delivers a message; resolves with its msgid. */
  say(input: { from: string; text: string; group?: string; mention?: boolean; msgId?: string }): string;
  failNext(route: "respond" | "send", errcode: number, errmsg: string): void;
  /** What a chat shows from the robot, streams and pushes in order. */
  shown(chatId: string): string[];
  waitFor<T>(predicate: () => T | undefined | null | false, options?: { timeoutMs?: number; what?: string }): Promise<T>;
  close(): Promise<void>;
}

interface Frame {
  cmd?: string;
  headers?: { req_id?: string };
  body?: Record<string, unknown>;
}

export async function startFakeAibot(options: { botId: string; secret: string; robotName: string; maxContentBytes?: number }): Promise<FakeAibot> {
  const streams: AibotStream[] = [];
  const pushes: AibotPush[] = [];
  const sockets = new Set<WebSocket>();
  const chatOfReq = new Map<string, string>();
  const failures: Record<"respond" | "send", Array<{ errcode: number; errmsg: string }>> = { respond: [], send: [] };
  let seq = 1;
  let subscribes = 0;
  let nextMsg = 1;

  const server = createServer();
  const wss = new WebSocketServer({ server });
  const ack = (socket: WebSocket, reqId: string, errcode = 0, errmsg = "ok") => socket.send(JSON.stringify({ headers: { req_id: reqId }, errcode, errmsg }));

  function respond(reqId: string, body: Record<string, unknown>): { errcode: number; errmsg: string } {
    const chatId = chatOfReq.get(reqId);
    const stream = body.stream as { id?: unknown; finish?: unknown; content?: unknown } | undefined;
    if (!chatId || body.msgtype !== "stream" || typeof stream?.id !== "string" || typeof stream.content !== "string") return { errcode: 40058, errmsg: "invalid reply" };
    if (Buffer.byteLength(stream.content, "utf8") > 20_480) return { errcode: 45002, errmsg: "content too long" };
    let found = streams.find((candidate) => candidate.id === stream.id);
    if (found?.finished) return { errcode: 40058, errmsg: "stream already finished" };
    if (!found) {
      found = { seq: seq++, id: stream.id, chatId, reqId, content: "", finished: false, updates: 0 };
      streams.push(found);
    }
    found.content = stream.content;
    found.finished = stream.finish === true;
    found.updates += 1;
    return { errcode: 0, errmsg: "ok" };
  }

  function send(body: Record<string, unknown>): { errcode: number; errmsg: string } {
    const markdown = body.markdown as { content?: unknown } | undefined;
    if (typeof body.chatid !== "string" || body.msgtype !== "markdown" || typeof markdown?.content !== "string") return { errcode: 40008, errmsg: "invalid message type" };
    if (Buffer.byteLength(markdown.content, "utf8") > (options.maxContentBytes ?? 4096)) return { errcode: 45002, errmsg: "content too long" };
    pushes.push({ seq: seq++, chatId: body.chatid, content: markdown.content });
    return { errcode: 0, errmsg: "ok" };
  }

  wss.on("connection", (socket) => {
    let authed = false;
    socket.on("message", (data) => {
      const frame = JSON.parse(String(data)) as Frame;
      const reqId = frame.headers?.req_id ?? "";
      if (frame.cmd === "aibot_subscribe") {
        subscribes += 1;
        if (frame.body?.bot_id !== options.botId || frame.body?.secret !== options.secret) {
          ack(socket, reqId, 40001, "invalid bot_id or secret");
          return;
        }
        authed = true;
        sockets.add(socket);
        return ack(socket, reqId);
      }
      if (!authed) return socket.close(4001, "not subscribed");
      if (frame.cmd === "ping") return ack(socket, reqId);
      const route = frame.cmd === "aibot_respond_msg" ? "respond" : frame.cmd === "aibot_send_msg" ? "send" : undefined;
      if (!route) return ack(socket, reqId, 40058, `unknown cmd ${String(frame.cmd)}`);
      const failure = failures[route].shift();
      if (failure) return ack(socket, reqId, failure.errcode, failure.errmsg);
      const result = route === "respond" ? respond(reqId, frame.body ?? {}) : send(frame.body ?? {});
      ack(socket, reqId, result.errcode, result.errmsg);
    });
    socket.on("close", () => sockets.delete(socket));
  });

  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const url = `ws://127.0.0.1:${(server.address() as AddressInfo).port}`;

  return {
    url,
    botId: options.botId,
    streams,
    pushes,
    get connections() {
      return sockets.size;
    },
    get subscribes() {
      return subscribes;
    },
    say(input) {
      const msgid = input.msgId ?? `msg-${randomBytes(6).toString("hex")}-${nextMsg++}`;
      const reqId = `aibot_msg_callback_${randomBytes(8).toString("hex")}`;
      const group = input.group !== undefined;
      const chatId = group ? input.group! : input.from;
      chatOfReq.set(reqId, chatId);
      const text = group && input.mention !== false ? `@${options.robotName} ${input.text}` : input.text;
      const body = {
        msgid,
        aibotid: options.botId,
        ...(group ? { chatid: input.group } : {}),
        chattype: group ? "group" : "single",
        from: { userid: input.from },
        create_time: Math.floor(Date.now() / 1000),
        msgtype: "text",
        text: { content: text },
      };
      const frame = JSON.stringify({ cmd: "aibot_msg_callback", headers: { req_id: reqId }, body });
      // WeCom keeps one connection per robot: the newest.
      const target = [...sockets].at(-1);
      if (!target) throw new Error("fake aibot: no robot connected");
      target.send(frame);
      return msgid;
    },
    failNext(route, errcode, errmsg) {
      failures[route].push({ errcode, errmsg });
    },
    shown(chatId) {
      const fromStreams = streams.filter((stream) => stream.chatId === chatId).map((stream) => ({ seq: stream.seq, text: stream.content }));
      const fromPushes = pushes.filter((push) => push.chatId === chatId).map((push) => ({ seq: push.seq, text: push.content }));
      return [...fromStreams, ...fromPushes].sort((a, b) => a.seq - b.seq).map((item) => item.text);
    },
    async waitFor(predicate, waitOptions = {}) {
      const deadline = Date.now() + (waitOptions.timeoutMs ?? 10_000);
      for (;;) {
        const value = predicate();
        if (value) return value;
        if (Date.now() > deadline) throw new Error(`fake aibot: timed out waiting for ${waitOptions.what ?? "a condition"}`);
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    },
    async close() {
      for (const socket of wss.clients) socket.terminate();
      wss.close();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
