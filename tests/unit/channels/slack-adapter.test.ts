/**
 * The Slack adapter against the fake Slack, through the real SDK: Socket Mode's connection,
 * acknowledgements and reconnects, files, threads, and the error kinds.
 */
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import pino from "pino";
import { afterEach, describe, expect, it } from "vitest";
import { type SlackAdapterOptions, createSlackAdapter } from "../../../channels/slack/slack-adapter.js";
import { ChannelError } from "../../../src/errors.js";
import type { PlatformEvent } from "../../../src/gateway/kit/index.js";
import { startFakeSlack } from "../../support/fake-slack-server.js";

const BOT_TOKEN = "xoxb-unit-1111-bot-secret";
const APP_TOKEN = "xapp-unit-2222-app-secret";
const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function connected(overrides: Partial<SlackAdapterOptions> = {}) {
  const slack = await startFakeSlack({ botToken: BOT_TOKEN, appToken: APP_TOKEN, redeliverAfterMs: 500 });
  const dir = await mkdtemp(path.join(tmpdir(), "countbot-slack-adapter-"));
  cleanups.push(async () => {
    await slack.close();
    await rm(dir, { recursive: true, force: true });
  });
  const adapter = createSlackAdapter({ botToken: BOT_TOKEN, appToken: APP_TOKEN, mode: "socket", apiUrl: slack.apiUrl, inheritParent: true, maxImageBytes: 1_000_000, maxFileBytes: 1_000_000, downloadDir: dir, logger: pino({ level: "silent" }), handOverBackoffMs: 10, ...overrides });
  const events: PlatformEvent[] = [];
  const changes: boolean[] = [];
  adapter.watchConnection?.((change) => changes.push(change.connected));
  cleanups.push(() => adapter.stop());
  return { slack, adapter, events, changes, sink: async (event: PlatformEvent) => (events.push(event), "published" as const) };
}

async function failure(promise: Promise<unknown>): Promise<ChannelError> {
  const error = await promise.then(
    () => undefined,
    (caught: unknown) => caught,
  );
  expect(error).toBeInstanceOf(ChannelError);
  return error as ChannelError;
}

const alice = { id: "U0ALICE001", name: "alice", displayName: "Alice" };

describe("Slack adapter: Socket Mode", () => {
  it("knows the bot from auth.test, opens the socket with the app token, and acknowledges each envelope", async () => {
    const { slack, adapter, events, sink } = await connected();
    await adapter.start(sink);
    expect(adapter.identity).toEqual({ userId: slack.bot.id, name: "countbot", botId: slack.bot.botId, team: "Fake Team" });
    expect(adapter.botUsername?.()).toBe("countbot");
    expect(slack.calls.map((call) => call.method).slice(0, 2)).toEqual(["auth.test", "apps.connections.open"]);
    slack.addUser(alice);
    expect(await slack.say({ from: alice, channel: "D0ALICE001", text: "hello <@U0BOT00001>" })).toMatchObject({ deliveries: [1] });
    await slack.waitFor(() => events.length === 1);
    expect(events[0]).toMatchObject({ chatId: "D0ALICE001", chatType: "private", senderId: alice.id, senderName: "Alice", text: "hello @countbot", mentionsBot: true });
  });

  it("fails the start with Slack's reason when a token is refused", async () => {
    const badBot = await connected({ botToken: "xoxb-unit-wrong" });
    const refusedBot = await failure(badBot.adapter.start(badBot.sink));
    expect(refusedBot).toMatchObject({ kind: "auth" });
    expect(refusedBot.message).toContain("invalid_auth");
    const badApp = await connected({ appToken: "xapp-unit-wrong" });
    const refusedApp = await failure(badApp.adapter.start(badApp.sink));
    expect(refusedApp.message).toMatch(/apps\.connections\.open failed: invalid_auth/);
    expect(refusedApp.message).not.toContain("xapp-unit-wrong");
  });

  it("reconnects after Slack's disconnect and after a dropped socket, and says so", async () => {
    const { slack, adapter, events, changes, sink } = await connected();
    await adapter.start(sink);
    slack.socket.disconnect();
    await slack.waitFor(() => slack.connectionsOpened === 2 && slack.liveConnections === 1, { what: "the reconnect after disconnect" });
    slack.socket.dropConnections();
    await slack.waitFor(() => slack.connectionsOpened === 3 && slack.liveConnections === 1, { what: "the reconnect after a drop", timeoutMs: 15_000 });
    await slack.waitFor(() => adapter.reconnects === 2);
    expect(changes).toEqual([false, true, false, true]);
    slack.addUser(alice);
    await slack.say({ from: alice, channel: "D0ALICE001", text: "still there?" });
    await slack.waitFor(() => events.some((event) => event.text === "still there?"));
  });

  it("takes a slash command and acknowledges it", async () => {
    const { slack, adapter, events, sink } = await connected();
    await adapter.start(sink);
    const answer = await slack.push("slash_commands", slack.command({ from: alice, channel: "C0GENERAL1", command: "/team", text: "Analysts look at this" }));
    expect(answer.deliveries).toBe(1);
    await slack.waitFor(() => events.length === 1);
    expect(events[0]).toMatchObject({ chatId: "C0GENERAL1", chatType: "group", text: "/team Analysts look at this", mentionsBot: true, scopes: ["channel:C0GENERAL1"] });
  });

  it("downloads a shared file with the bot token", async () => {
    const { slack, adapter, events, sink } = await connected();
    await adapter.start(sink);
    const file = slack.addFile({ id: "F0PNG00001", name: "dot.png", mimetype: "image/png", bytes: Buffer.from("89504e470d0a1a0a", "hex") });
    await slack.say({ from: alice, channel: "D0ALICE001", text: "look", files: [file] });
    await slack.waitFor(() => events.length === 1);
    expect(events[0]!.media).toMatchObject([{ kind: "image", mimeType: "image/png", name: "dot.png" }]);
    expect((await readFile(events[0]!.media[0]!.path)).toString("hex")).toBe("89504e470d0a1a0a");
  });
});

describe("Slack adapter: replies", () => {
  it("posts into the thread a thread chat names, and follows that thread afterwards", async () => {
    const { slack, adapter, events, sink } = await connected();
    await adapter.start(sink);
    const parent = slack.message({ from: alice, channel: "C0GENERAL1", text: "topic" }).ts;
    const { platformMessageId } = await adapter.send(`C0GENERAL1:${parent}`, "**in** the thread", { format: "formatted" });
    expect(slack.posts.at(-1)).toMatchObject({ channel: "C0GENERAL1", threadTs: parent, ts: platformMessageId, text: "**in** the thread", mrkdwn: true });
    await adapter.send("C0GENERAL1", "a < b", { format: "plain" });
    expect(slack.calls.at(-1)?.body).toMatchObject({ text: "a &lt; b", mrkdwn: "false" });
    expect(slack.shown("C0GENERAL1")).toEqual(["a < b"]);
    await slack.say({ from: alice, channel: "C0GENERAL1", text: "no mention", threadTs: parent, parentUserId: alice.id });
    await slack.waitFor(() => events.length === 1);
    expect(events[0]).toMatchObject({ chatId: `C0GENERAL1:${parent}`, chatType: "thread", mentionsBot: false, repliesToBot: true });
  });

  it("maps Slack's refusals: a 429 with its wait and budget, gone chats and messages, no token in any text", async () => {
    const { slack, adapter, sink } = await connected();
    await adapter.start(sink);
    const { platformMessageId } = await adapter.send("D0ALICE001", "first", { format: "plain" });
    slack.failNext("chat.update", { status: 429, error: "ratelimited", retryAfter: 7 });
    expect(await failure(adapter.edit("D0ALICE001", platformMessageId, "x", { format: "plain" }))).toMatchObject({ kind: "rate-limit", retryAfterMs: 7_000, scope: "updates" });
    slack.failNext("chat.postMessage", { status: 429, error: "ratelimited", retryAfter: 1 });
    expect(await failure(adapter.send("D0ALICE001", "x", { format: "plain" }))).toMatchObject({ kind: "rate-limit", retryAfterMs: 1_000, scope: "channel" });
    expect(await failure(adapter.edit("D0ALICE001", "1.000000", "x", { format: "plain" }))).toMatchObject({ kind: "not-found" });
    slack.failNext("chat.update", { error: "cant_update_message" });
    expect(await failure(adapter.edit("D0ALICE001", platformMessageId, "x", { format: "plain" }))).toMatchObject({ kind: "not-found" });
    slack.failNext("chat.postMessage", { error: "is_archived" });
    expect(await failure(adapter.send("C0ARCHIVE1", "x", { format: "plain" }))).toMatchObject({ kind: "forbidden" });
    slack.failNext("chat.postMessage", { error: "missing_scope" });
    const scope = await failure(adapter.send("C0GENERAL1", "x", { format: "plain" }));
    expect(scope).toMatchObject({ kind: "forbidden" });
    expect(scope.message).toContain("reinstall");
    slack.failNext("chat.postMessage", { status: 500, error: "fatal_error" });
    const network = await failure(adapter.send("C0GENERAL1", "x", { format: "plain" }));
    expect(network.kind).toBe("network");
    for (const error of [scope, network]) expect(`${error.message}${error.stack}`).not.toContain(BOT_TOKEN);
  });
});
