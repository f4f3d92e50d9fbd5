import { afterEach, describe, expect, it } from "vitest";
import { WebSocket } from "ws";
import type { WebEvent } from "../../../channels/web/web-adapter.js";
import { createMemoryBus } from "../../../src/bus/memory-bus.js";
import type { OutboundMessage } from "../../../src/bus/message.js";
import type { MessageBus } from "../../../src/bus/message-bus.js";
import { BusError } from "../../../src/errors.js";
import { type ChatEventLog, createMemoryChatEventLog } from "../../../src/store/chat-event-log.js";
import { startWebGateway } from "../../support/web-gateway.js";

const TOKEN = "web-test-token";
const auth = { authorization: `Bearer ${TOKEN}` };

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function start(channelOptions: { maxPendingPerChat?: number; rateLimitPerMinute?: number; events?: ChatEventLog } = {}, busOptions: { maxQueued?: number } = {}) {
  const bus = createMemoryBus(busOptions);
  cleanups.push(() => bus.close());
  let counter = 0;
  const newId = () => `message-${++counter}`;
  const gateway = await startWebGateway({ bus, token: TOKEN, newId, now: () => 5_000, ...channelOptions });
  cleanups.push(() => gateway.close());
  return { bus, web: gateway.adapter, gateway, url: gateway.url };
}

function send(url: string, chatId: string, body: unknown): Promise<Response> {
  return fetch(`${url}/api/chat/${chatId}/messages`, {
    method: "POST",
    headers: { "content-type": "application/json", ...auth },
    body: JSON.stringify(body),
  });
}

interface Client {
  events: WebEvent[];
  socket: WebSocket;
  closed: Promise<number>;
}

async function connect(url: string, chatId: string, after?: string): Promise<Client> {
  const socket = new WebSocket(`${url.replace("http", "ws")}/ws?chatId=${chatId}${after === undefined ? "" : `&after=${after}`}`, { headers: auth });
  const events: WebEvent[] = [];
  socket.on("message", (data: Buffer) => events.push(JSON.parse(data.toString("utf8")) as WebEvent));
  const closed = new Promise<number>((resolve) => socket.on("close", (code) => resolve(code)));
  await new Promise<void>((resolve, reject) => {
    socket.once("open", () => resolve());
    socket.once("error", reject);
  });
  cleanups.push(async () => {
    socket.terminate();
    await closed;
  });
  return { events, socket, closed };
}

async function until(condition: () => boolean | Promise<boolean>, what: string): Promise<void> {
  const deadline = Date.now() + 5_000;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

function outbound(chatId: string, id: string, fields: Partial<OutboundMessage> = {}): OutboundMessage {
  return { id, channel: "web", chatId, content: `reply ${id}`, kind: "final", media: [], metadata: {}, ...fields };
}

async function publishFinal(bus: MessageBus, chatId: string, id: string, answers: string[] = []): Promise<void> {
  await bus.publishOutbound(outbound(chatId, id, { metadata: { answers } }));
}

describe("sending", () => {
  it("puts the message on the bus and answers 202 with its id", async () => {
    const { bus, url } = await start();
    const response = await send(url, "room-1", { content: "hello there", senderId: "alice" });
    expect(response.status).toBe(202);
    expect(await response.json()).toEqual({ id: "message-1" });

    const claim = await bus.claimSession({ timeoutMs: 1_000 });
    expect(claim?.sessionKey).toBe("web:room-1");
    expect(claim?.messages).toEqual([
      {
        id: "message-1",
        channel: "web",
        chatId: "room-1",
        senderId: "alice",
        content: "hello there",
        media: [],
        mentions: [],
        receivedAt: 5_000,
        platformEventId: "message-1",
        chatType: "private",
        metadata: { platformMessageId: "message-1" },
      },
    ]);
  });

  it("queues a retried clientMessageId once and answers the retry with the first id", async () => {
    const { bus, url } = await start();
    const body = { content: "only once", clientMessageId: "c-1" };
    const first = await send(url, "room", body);
    expect(first.status).toBe(202);
    expect(await first.json()).toEqual({ id: "message-1" });
    const retry = await send(url, "room", body);
    expect(retry.status).toBe(200);
    expect(await retry.json()).toEqual({ id: "message-1", duplicate: true });
    // Client ids are the page's own: the same one in another chat is another message.
    expect((await send(url, "other-room", body)).status).toBe(202);

    const claims = [await bus.claimSession({ timeoutMs: 1_000 }), await bus.claimSession({ timeoutMs: 1_000 })];
    const room = claims.find((claim) => claim?.sessionKey === "web:room");
    expect(room?.messages.map((message) => message.id)).toEqual(["message-1"]);
    expect(room?.messages[0]?.senderId).toBe("web-user");
    expect(room?.messages[0]?.metadata).toEqual({ clientMessageId: "c-1", platformMessageId: "message-1" });
    expect(await bus.claimSession({ timeoutMs: 0 })).toBeNull();
  });

  it("answers 503, not 202, when the bus could not store the message; the retry is accepted", async () => {
    const { bus, url } = await start();
    const publish = bus.publishInbound.bind(bus);
    let down = true;
    bus.publishInbound = async (message) => {
      if (down) throw new BusError("Redis is not reachable", "unavailable");
      return publish(message);
    };
    const body = { content: "store me", clientMessageId: "s-1" };
    const refused = await send(url, "room", body);
    expect(refused.status).toBe(503);
    expect(await refused.json()).toMatchObject({ error: expect.stringMatching(/could not be stored/) });
    down = false;
    expect((await send(url, "room", body)).status).toBe(202);
  });

  it("answers 503 once the in-process bus is full, and takes the same message again when a turn has made room", async () => {
    const { bus, url } = await start({}, { maxQueued: 2 });
    expect((await send(url, "room-a", { content: "one" })).status).toBe(202);
    expect((await send(url, "room-b", { content: "two" })).status).toBe(202);
    const body = { content: "three", clientMessageId: "c-3" };
    const refused = await send(url, "room-c", body);
    expect(refused.status).toBe(503);
    expect(await refused.json()).toMatchObject({ error: expect.stringMatching(/could not be stored; send it again/) });
    const claim = await bus.claimSession({ timeoutMs: 0 });
    await bus.ack(claim!);
    const retried = await send(url, "room-c", body);
    expect(retried.status).toBe(202);
    const claims = await bus.claimSessions({ timeoutMs: 0, max: 10 });
    expect(claims.map((each) => each.messages.map((message) => message.content))).toEqual([["two"], ["three"]]);
  });

  it("keeps dedupe keys of different chats apart even when the ids contain the separator (a:b + 1 vs a + b:1)", async () => {
    const { bus, url } = await start();
    const first = await send(url, "a:b", { content: "from chat a:b", clientMessageId: "1" });
    const second = await send(url, "a", { content: "from chat a", clientMessageId: "b:1" });
    expect(first.status).toBe(202);
    expect(second.status).toBe(202);
    expect(await second.json()).toEqual({ id: "message-2" });
    const claims = [await bus.claimSession({ timeoutMs: 1_000 }), await bus.claimSession({ timeoutMs: 1_000 })];
    expect(claims.map((claim) => claim?.sessionKey).sort()).toEqual(["web:a", "web:a:b"]);
    // Each chat's own retry is still a duplicate.
    expect((await send(url, "a", { content: "from chat a", clientMessageId: "b:1" })).status).toBe(200);
  });
});

describe("commands", () => {
  it("cancels at once on /stop, without queueing it behind the running turn, and answers on the socket", async () => {
    const { bus, url } = await start();
    const client = await connect(url, "busy-room");
    const cancelled: string[] = [];
    const subscription = await bus.onCancel((sessionKey) => cancelled.push(sessionKey));
    cleanups.push(() => subscription.close());
    await send(url, "busy-room", { content: "a long question" });
    const claim = await bus.claimSession({ timeoutMs: 1_000 }); // a worker is running its turn

    const response = await send(url, "busy-room", { content: "/stop" });
    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({ id: "message-2", command: "stop" });
    expect(cancelled).toEqual(["web:busy-room"]);
    await until(() => client.events.length === 1, "the gateway's answer");
    expect(client.events).toEqual([{ type: "message", id: expect.stringMatching(/^gateway-/), content: "Stopping.", answers: [], seq: "5000-0" }]);
    // Nothing was queued behind the turn.
    await bus.ack(claim!);
    expect(await bus.claimSession({ timeoutMs: 0 })).toBeNull();
  });

  it("answers /help through the dispatcher once, also when the page retries the POST", async () => {
    const { url } = await start();
    const client = await connect(url, "helpful");
    const body = { content: "/help", clientMessageId: "h-1" };
    expect(await (await send(url, "helpful", body)).json()).toEqual({ id: "message-1", command: "help" });
    expect((await send(url, "helpful", body)).status).toBe(200);
    await until(() => client.events.length >= 1, "the help text");
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(client.events).toHaveLength(1);
    expect(client.events[0]).toMatchObject({ type: "message", content: expect.stringContaining("/new") });
  });

  it("limits a sender only when the operator set a rate (sender ids are the page's own word)", async () => {
    const open = await start();
    for (let index = 0; index < 15; index += 1) expect((await send(open.url, "room", { content: `message ${index}` })).status).toBe(202);
    const limited = await start({ rateLimitPerMinute: 1 });
    expect((await send(limited.url, "room", { content: "first" })).status).toBe(202);
    const refused = await send(limited.url, "room", { content: "second" });
    expect(refused.status).toBe(429);
    expect(await refused.json()).toEqual({ error: expect.stringContaining("too many messages") });
  });

  it("puts /new on the bus for the worker", async () => {
    const { bus, url } = await start();
    expect((await send(url, "fresh", { content: "/new" })).status).toBe(202);
    const claim = await bus.claimSession({ timeoutMs: 1_000 });
    expect(claim?.messages.map((message) => message.content)).toEqual(["/new"]);
  });
});

describe("streaming", () => {
  it("passes a team run's per-agent events to the page with the notice", async () => {
    const { bus, url } = await start();
    const page = await connect(url, "chat-t");
    const workflow = { runId: "wf-1", team: "Analysts", nodeId: "frontend", event: "node-tool", status: "running", tool: "read_file" };
    await bus.publishOutbound(outbound("chat-t", "workflow-wf-1-frontend-node-tool-1-1", { kind: "notice", content: "Team [Analysts]: Frontend analyst (frontend) ran read_file", metadata: { workflow } }));
    await until(() => page.events.length === 1, "the notice");
    expect(page.events).toEqual([{ type: "notice", id: "workflow-wf-1-frontend-node-tool-1-1", content: "Team [Analysts]: Frontend analyst (frontend) ran read_file", workflow }]);
  });

  it("sends drafts, notices and the final of its own chat, in order", async () => {
    const { bus, url } = await start();
    const mine = await connect(url, "chat-a");
    const other = await connect(url, "chat-b");

    await bus.publishDraft({ replyId: "in-1:0", channel: "web", chatId: "chat-a", text: "Hel" });
    await until(() => mine.events.length === 1, "the first draft");
    await bus.publishOutbound(outbound("chat-a", "in-1:1", { kind: "notice", content: "read_file(notes.md)" }));
    await bus.publishDraft({ replyId: "in-1:0", channel: "web", chatId: "chat-a", text: "Hello" });
    // The bus drops a draft still queued when its final comes: let this one through first.
    await until(() => mine.events.length === 3, "the notice and the second draft");
    await publishFinal(bus, "chat-a", "in-1:0", ["in-1"]);
    await bus.publishDraft({ replyId: "in-2:0", channel: "web", chatId: "chat-b", text: "for b" });
    await until(() => other.events.length === 1, "the draft of chat b");
    await publishFinal(bus, "chat-b", "in-2:0", ["in-2"]);

    await until(() => mine.events.length === 4 && other.events.length === 2, "every event");
    expect(mine.events).toEqual([
      { type: "draft", replyId: "in-1:0", text: "Hel" },
      { type: "notice", id: "in-1:1", content: "read_file(notes.md)" },
      { type: "draft", replyId: "in-1:0", text: "Hello" },
      { type: "message", id: "in-1:0", content: "reply in-1:0", answers: ["in-1"], seq: "5000-0" },
    ]);
    expect(other.events).toEqual([
      { type: "draft", replyId: "in-2:0", text: "for b" },
      { type: "message", id: "in-2:0", content: "reply in-2:0", answers: ["in-2"], seq: "5000-1" },
    ]);
  });

  it("has the bus publish a chat's drafts only while a page of it is open", async () => {
    const { bus, url } = await start();
    const draft = (text: string) => bus.publishDraft({ replyId: "in-9:0", channel: "web", chatId: "chat-w", text });
    expect(await draft("nobody is watching")).toBe(false);
    const page = await connect(url, "chat-w");
    await until(async () => await draft("watched"), "the page's chat declared watched");
    await until(() => page.events.length > 0, "a draft");
    page.socket.close();
    await page.closed;
    await until(async () => !(await draft("the page left")), "the chat no longer watched");
  });

  it("sends every socket of the chat the same events", async () => {
    const { bus, url } = await start();
    const tabs = [await connect(url, "shared"), await connect(url, "shared")];
    await publishFinal(bus, "shared", "in-1:0");
    await until(() => tabs.every((tab) => tab.events.length === 1), "both tabs");
    expect(tabs[0]!.events).toEqual(tabs[1]!.events);
  });

  it("keeps finals for a chat with no socket and sends them, in order, when one connects", async () => {
    const { bus, web, url } = await start();
    await bus.publishDraft({ replyId: "in-1:0", channel: "web", chatId: "later", text: "lost on purpose" });
    await bus.publishOutbound(outbound("later", "in-1:1", { kind: "notice" }));
    await publishFinal(bus, "later", "in-1:0", ["in-1"]);
    await publishFinal(bus, "later", "in-2:0", ["in-2"]);
    await until(async () => (await web.waiting("later")) === 2, "the finals to be kept");

    const client = await connect(url, "later");
    await publishFinal(bus, "later", "in-3:0", ["in-3"]);
    await until(() => client.events.length === 3, "the kept finals and the new one");
    expect(client.events).toEqual([
      { type: "message", id: "in-1:0", content: "reply in-1:0", answers: ["in-1"], seq: "5000-0" },
      { type: "message", id: "in-2:0", content: "reply in-2:0", answers: ["in-2"], seq: "5000-1" },
      { type: "message", id: "in-3:0", content: "reply in-3:0", answers: ["in-3"], seq: "5000-2" },
    ]);
    expect(await web.waiting("later")).toBe(0);

    // Sent once: a second socket does not get them again.
    const second = await connect(url, "later");
    await publishFinal(bus, "later", "in-4:0");
    await until(() => second.events.length === 1, "the next final");
    expect(second.events.map((event) => (event.type === "message" ? event.id : event.type))).toEqual(["in-4:0"]);
  });

  it("reads the log again after a failed read, so the chat's last final still comes when the log is back (Redis away)", async () => {
    const log = createMemoryChatEventLog({ now: () => 5_000 });
    // The first two reads fail: the socket's first read, and the one a final kept meanwhile starts.
    let failures = 2;
    const events: ChatEventLog = {
      append: (chatId, payload) => log.append(chatId, payload),
      markDelivered: (chatId, id) => log.markDelivered(chatId, id),
      since: (chatId, after) => (failures-- > 0 ? Promise.reject(new Error("Connection is closed.")) : log.since(chatId, after)),
    };
    const { bus, url } = await start({ events });
    const client = await connect(url, "flaky");
    await until(() => failures <= 1, "the socket's first read to fail");
    await publishFinal(bus, "flaky", "in-1:0", ["in-1"]);
    // No other event comes: only a read of its own brings the final.
    await until(() => client.events.length === 1, "the final, read again once the log answers");
    expect(client.events).toEqual([{ type: "message", id: "in-1:0", content: "reply in-1:0", answers: ["in-1"], seq: "5000-0" }]);
  });

  it("keeps only the newest finals of a chat when too many wait", async () => {
    const { bus, web, url } = await start({ maxPendingPerChat: 2 });
    for (const id of ["in-1:0", "in-2:0", "in-3:0"]) await publishFinal(bus, "busy", id);
    await until(async () => (await web.waiting("busy")) === 2, "the buffer to fill");
    const client = await connect(url, "busy");
    await until(() => client.events.length === 2, "the kept finals");
    expect(client.events.map((event) => (event.type === "message" ? event.id : event.type))).toEqual(["in-2:0", "in-3:0"]);
  });

  it("sends a redelivered final once", async () => {
    const { bus, web, url } = await start();
    const client = await connect(url, "again");
    await publishFinal(bus, "again", "in-1:0");
    await publishFinal(bus, "again", "in-1:0");
    await publishFinal(bus, "again", "in-2:0");
    await until(() => client.events.length >= 2, "the finals");
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(client.events.map((event) => (event.type === "message" ? event.id : event.type))).toEqual(["in-1:0", "in-2:0"]);

    // Also while kept for a chat with no socket.
    await publishFinal(bus, "away", "in-3:0");
    await publishFinal(bus, "away", "in-3:0");
    await publishFinal(bus, "away", "in-4:0");
    await until(async () => (await web.waiting("away")) === 2, "the kept finals");
    const late = await connect(url, "away");
    await until(() => late.events.length === 2, "the kept finals");
    expect(late.events.map((event) => (event.type === "message" ? event.id : event.type))).toEqual(["in-3:0", "in-4:0"]);
  });

  it("refuses a socket with a bad chat id before the upgrade", async () => {
    const { url } = await start();
    const status = await new Promise<number>((resolve, reject) => {
      const socket = new WebSocket(`${url.replace("http", "ws")}/ws?chatId=${encodeURIComponent("no spaces")}`, { headers: auth });
      socket.on("unexpected-response", (_request, response) => {
        resolve(response.statusCode ?? 0);
        socket.terminate();
      });
      socket.on("open", () => reject(new Error("the socket opened")));
      socket.on("error", reject);
    });
    expect(status).toBe(400);
  });

  it("closes its sockets with 1001 when the gateway closes", async () => {
    const { bus, gateway, url } = await start();
    const client = await connect(url, "bye");
    await gateway.close();
    expect(await client.closed).toBe(1001);
    // The outbound consumer stopped: the bus keeps what comes next for the next process.
    await publishFinal(bus, "bye", "in-1:0");
    expect(await bus.markDelivered("in-1:0#0")).toBe(true);
  });
});

describe("resuming", () => {
  const ids = (client: Client) => client.events.map((event) => (event.type === "draft" ? event.type : event.id));
  const seqOf = (client: Client, id: string) => {
    const event = client.events.find((candidate) => candidate.type !== "draft" && candidate.id === id);
    return event && event.type !== "draft" ? event.seq : undefined;
  };

  it("gives a page that reconnects with the last seq it saw exactly what it missed, once, even when another tab had it", async () => {
    const { bus, url } = await start();
    const otherTab = await connect(url, "resume");
    const page = await connect(url, "resume");
    await publishFinal(bus, "resume", "in-1:0");
    await publishFinal(bus, "resume", "in-2:0");
    await until(() => page.events.length === 2 && otherTab.events.length === 2, "both finals on both tabs");
    const lastSeen = seqOf(page, "in-2:0")!;
    expect(lastSeen).toMatch(/^\d+-\d+$/);
    page.socket.close();
    await page.closed;

    await publishFinal(bus, "resume", "in-3:0");
    await bus.publishOutbound(outbound("resume", "task-1-completed-100", { kind: "notice", content: "Subagent [x] completed", metadata: { task: { id: "1" } } }));
    await bus.publishOutbound(outbound("resume", "in-4:1", { kind: "notice", content: "exec(ls)" }));
    await until(() => otherTab.events.length === 5, "the other tab to get them live");

    const back = await connect(url, "resume", lastSeen);
    await publishFinal(bus, "resume", "in-5:0");
    await until(() => back.events.length === 3, "what was missed and the next final");
    // The task notice is kept like a final; a tool-call notice is only for whoever watched.
    expect(ids(back)).toEqual(["in-3:0", "task-1-completed-100", "in-5:0"]);
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(back.events).toHaveLength(3);

    // A page without a token gets what no socket was sent: nothing, here.
    const fresh = await connect(url, "resume");
    await publishFinal(bus, "resume", "in-6:0");
    await until(() => fresh.events.length === 1, "the next final");
    expect(ids(fresh)).toEqual(["in-6:0"]);
  });

  it("refuses a resume token that is not a seq before the upgrade", async () => {
    const { url } = await start();
    const status = await new Promise<number>((resolve, reject) => {
      const socket = new WebSocket(`${url.replace("http", "ws")}/ws?chatId=room&after=yesterday`, { headers: auth });
      socket.on("unexpected-response", (_request, response) => {
        resolve(response.statusCode ?? 0);
        socket.terminate();
      });
      socket.on("open", () => reject(new Error("the socket opened")));
      socket.on("error", reject);
    });
    expect(status).toBe(400);
  });
});
