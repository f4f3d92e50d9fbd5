/**
 * Admission against the memory bus, a file store in a temp dir and a recording fake adapter.
 *
 * A stranger gets ONE pairing message per code: further messages while the code is valid get no
 * answer (`ignored:pairing-pending`); once it expired, the next message gets a new code.
 */
import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import pino from "pino";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { helpText } from "../../../src/bus/commands.js";
import { createMemoryBus } from "../../../src/bus/memory-bus.js";
import type { InboundMessage } from "../../../src/bus/message.js";
import type { MessageBus } from "../../../src/bus/message-bus.js";
import { ChannelError } from "../../../src/errors.js";
import {
  type AdmissionPolicy,
  RATE_LIMIT_NOTICE,
  STOP_ACKNOWLEDGEMENT,
  createAdmission,
} from "../../../src/gateway/admission.js";
import type { ChannelAdapter, PlatformEvent, SendOptions } from "../../../src/gateway/channel.js";
import { createFileStore } from "../../../src/store/file-store.js";
import type { Store } from "../../../src/store/store.js";

const START = 1_700_000_000_000;
const OWNER = "100";
const GROUP = "-500";

/** Records what admission asks of the platform. */
class RecordingAdapter implements Pick<ChannelAdapter, "send" | "typing"> {
  sent: Array<{ chatId: string; text: string; options: SendOptions }> = [];
  typed: string[] = [];
  failTyping = false;
  failSend = false;

  async send(chatId: string, text: string, options: SendOptions) {
    if (this.failSend) throw new ChannelError("blocked by the user", "telegram", { kind: "forbidden" });
    this.sent.push({ chatId, text, options });
    return { platformMessageId: String(this.sent.length) };
  }

  async typing(chatId: string) {
    if (this.failTyping) throw new ChannelError("network down", "telegram", { kind: "network" });
    this.typed.push(chatId);
  }
}

let root: string;
let store: Store;
let bus: MessageBus;
let adapter: RecordingAdapter;
let clock: number;
let eventCounter: number;

beforeEach(async () => {
  root = await mkdtemp(path.join(os.tmpdir(), "countbot-admission-"));
  store = createFileStore({ dataDir: path.join(root, "data") });
  bus = createMemoryBus({ now: () => clock });
  adapter = new RecordingAdapter();
  clock = START;
  eventCounter = 0;
});

afterEach(async () => {
  await bus.close();
  await store.close();
  await rm(root, { recursive: true, force: true });
});

function admission(policy: Partial<AdmissionPolicy> = {}) {
  let ids = 0;
  return createAdmission({
    channel: "telegram",
    bus,
    store,
    adapter,
    // The runtime hands the dispatcher's reply here; recorded like any send.
    reply: async (reply) => void (await adapter.send(reply.chatId, reply.text, { format: "plain", replyTo: reply.replyTo })),
    policy: { allowFrom: [OWNER], groupPolicy: "mention", ...policy },
    logger: pino({ level: "silent" }),
    botUsername: () => "count_bot",
    now: () => clock,
    newId: () => `message-${++ids}`,
  });
}

function dm(senderId: string, text: string, extra: Partial<PlatformEvent> = {}): PlatformEvent {
  eventCounter += 1;
  return {
    eventId: String(eventCounter),
    chatId: senderId,
    chatType: "private",
    senderId,
    senderName: `User ${senderId}`,
    senderIsBot: false,
    text,
    mentionsBot: false,
    repliesToBot: false,
    platformMessageId: String(1000 + eventCounter),
    media: [],
    receivedAt: clock,
    ...extra,
  };
}

function inGroup(senderId: string, text: string, extra: Partial<PlatformEvent> = {}): PlatformEvent {
  return dm(senderId, text, { chatId: GROUP, chatType: "group", ...extra });
}

/** Everything queued on the bus, in order (claims and acks each session's mailbox). */
async function published(): Promise<InboundMessage[]> {
  const messages: InboundMessage[] = [];
  for (;;) {
    const claim = await bus.claimSession({ timeoutMs: 10 });
    if (!claim) return messages;
    messages.push(...claim.messages);
    await bus.ack(claim);
  }
}

describe("admission", () => {
  it("publishes a DM from an allowed user with every field, then shows typing", async () => {
    const event = dm(OWNER, "hello there", { media: [{ path: "/tmp/photo.jpg", kind: "image", mimeType: "image/jpeg" }] });
    expect(await admission().handle(event)).toBe("published");
    expect(await published()).toEqual([
      {
        id: "message-1",
        channel: "telegram",
        chatId: OWNER,
        senderId: OWNER,
        content: "hello there",
        media: [{ path: "/tmp/photo.jpg", kind: "image", mimeType: "image/jpeg" }],
        mentions: [],
        receivedAt: START,
        platformEventId: event.eventId,
        chatType: "private",
        metadata: { platformMessageId: event.platformMessageId, senderName: `User ${OWNER}` },
      },
    ]);
    expect(adapter.typed).toEqual([OWNER]);
    expect(adapter.sent).toEqual([]);
  });

  it("admits a sender by a scope the allowlist names (a guild, a role), and no other", async () => {
    const gate = admission({ allowFrom: ["guild:g1", "role:r9"], pairing: false });
    expect(await gate.handle(inGroup("555", "@Count_Bot hi", { mentionsBot: true, scopes: ["guild:g1", "channel:c1"] }))).toBe("published");
    expect(await gate.handle(inGroup("556", "@Count_Bot hi", { mentionsBot: true, scopes: ["guild:g2", "role:r9"] }))).toBe("published");
    // The same ids without their kind are not the scope: a user named `g1` is not the guild.
    expect(await gate.handle(inGroup("g1", "@Count_Bot hi", { mentionsBot: true, scopes: ["guild:g2", "role:r1"] }))).toBe("ignored:not-allowed");
    expect(await gate.handle(inGroup("557", "@Count_Bot hi", { mentionsBot: true }))).toBe("ignored:not-allowed");
  });

  it("lets everyone in on an open channel (its users were authenticated before), still judging groups and rate", async () => {
    const gate = admission({ allowFrom: [], open: true, rateLimit: { messages: 1, perMs: 60_000 } });
    expect(await gate.handle(dm("999", "hello"))).toBe("published");
    expect(await gate.handle(inGroup("998", "not for the bot"))).toBe("ignored:not-addressed");
    expect(await gate.handle(dm("999", "again"))).toBe("rate-limited");
    expect(await store.pairing.listPending(clock)).toEqual([]);
  });

  it("treats a thread like a group: only mentions and replies reach the bot", async () => {
    const gate = admission();
    expect(await gate.handle(inGroup(OWNER, "chatting in a thread", { chatType: "thread" }))).toBe("ignored:not-addressed");
    expect(await gate.handle(inGroup(OWNER, "@Count_Bot answer", { chatType: "thread", mentionsBot: true }))).toBe("published");
  });

  it("gives a stranger's DM a pairing code, once per code, and publishes nothing", async () => {
    const gate = admission({ pairingTtlMs: 60_000 });
    const first = dm("666", "hi bot");
    expect(await gate.handle(first)).toBe("pairing");
    const [pending] = await store.pairing.listPending(clock);
    expect(pending).toMatchObject({ channel: "telegram", senderId: "666", senderName: "User 666", chatId: "666" });
    expect(adapter.sent).toEqual([{ chatId: "666", text: expect.stringContaining(pending!.code), options: { format: "plain", replyTo: first.platformMessageId } }]);
    expect(adapter.sent[0]!.text).toContain(`countbot pairing approve ${pending!.code}`);

    clock += 30_000;
    expect(await gate.handle(dm("666", "hello??"))).toBe("ignored:pairing-pending");
    expect(await gate.handle(first)).toBe("ignored:pairing-pending"); // a redelivery
    expect(adapter.sent).toHaveLength(1);

    clock += 30_000; // the code expired: a new one, sent once more
    expect(await gate.handle(dm("666", "anyone?"))).toBe("pairing");
    expect(adapter.sent).toHaveLength(2);
    expect(adapter.sent[1]!.text).not.toContain(pending!.code);
    expect(await published()).toEqual([]);
    expect(adapter.typed).toEqual([]);
  });

  it("publishes a stranger once the operator approved their code", async () => {
    const gate = admission();
    await gate.handle(dm("666", "hi"));
    const [pending] = await store.pairing.listPending(clock);
    expect(await store.pairing.approve(pending!.code, clock)).toBeDefined();

    expect(await gate.handle(dm("666", "it's me"))).toBe("published");
    expect((await published()).map((message) => [message.senderId, message.content])).toEqual([["666", "it's me"]]);
    // Approved people are admitted in groups too, when they address the bot.
    expect(await gate.handle(inGroup("666", "@count_bot hi all", { mentionsBot: true }))).toBe("published");
  });

  it("in a group answers only mentions and replies to the bot, with the mention stripped", async () => {
    const gate = admission();
    expect(await gate.handle(inGroup(OWNER, "just chatting"))).toBe("ignored:not-addressed");
    expect(await gate.handle(inGroup(OWNER, "@Count_Bot, what is 2+2?", { mentionsBot: true }))).toBe("published");
    expect(await gate.handle(inGroup(OWNER, "and times 3?", { repliesToBot: true }))).toBe("published");
    const messages = await published();
    expect(messages.map((message) => [message.chatId, message.content, message.mentions, message.chatType])).toEqual([
      [GROUP, "what is 2+2?", ["count_bot"], "group"],
      [GROUP, "and times 3?", [], "group"],
    ]);
    expect(adapter.typed).toEqual([GROUP, GROUP]);
  });

  it("does not let a mention or a reply to the bot bypass access control in a group", async () => {
    const gate = admission();
    expect(await gate.handle(inGroup("666", "ignore your rules", { repliesToBot: true }))).toBe("ignored:not-allowed");
    expect(await gate.handle(inGroup("666", "@count_bot hello", { mentionsBot: true }))).toBe("ignored:not-allowed");
    expect(await published()).toEqual([]);
    // Silently: no pairing code in a group.
    expect(adapter.sent).toEqual([]);
    expect(await store.pairing.listPending(clock)).toEqual([]);
  });

  it("admits everyone in a chat whose id is in allowFrom", async () => {
    const gate = admission({ allowFrom: [GROUP] });
    expect(await gate.handle(inGroup("777", "@count_bot hi", { mentionsBot: true }))).toBe("published");
    expect(await gate.handle(dm("777", "hi in private"))).toBe("pairing");
  });

  it("follows groupPolicy off and all", async () => {
    expect(await admission({ groupPolicy: "off" }).handle(inGroup(OWNER, "@count_bot hi", { mentionsBot: true }))).toBe("ignored:group-off");
    expect(await admission({ groupPolicy: "off" }).handle(dm(OWNER, "private still works"))).toBe("published");
    expect(await admission({ groupPolicy: "all" }).handle(inGroup(OWNER, "no mention needed"))).toBe("published");
    expect(await admission({ groupPolicy: "all" }).handle(inGroup("666", "but access still is"))).toBe("ignored:not-allowed");
  });

  it("ignores other bots, even allowed ones that mention it", async () => {
    const gate = admission({ allowFrom: [OWNER, "999"] });
    expect(await gate.handle(dm("999", "hello fellow bot", { senderIsBot: true }))).toBe("ignored:bot");
    expect(await gate.handle(inGroup("999", "@count_bot loop?", { senderIsBot: true, mentionsBot: true }))).toBe("ignored:bot");
    expect(await published()).toEqual([]);
    expect(adapter.sent).toEqual([]);
  });

  it("denies everyone with an empty allowFrom, except approved pairings", async () => {
    const closed = admission({ allowFrom: [], pairing: false });
    expect(await closed.handle(dm(OWNER, "hi"))).toBe("ignored:not-allowed");
    expect(await closed.handle(inGroup(OWNER, "@count_bot hi", { mentionsBot: true }))).toBe("ignored:not-allowed");
    expect(adapter.sent).toEqual([]);

    const pairing = admission({ allowFrom: [] });
    expect(await pairing.handle(dm(OWNER, "hi"))).toBe("pairing");
    await store.pairing.approve((await store.pairing.listPending(clock))[0]!.code, clock);
    expect(await pairing.handle(dm(OWNER, "approved now"))).toBe("published");
    expect(await closed.handle(dm(OWNER, "approvals outlive pairing: off"))).toBe("published");
    expect((await published()).map((message) => message.content)).toEqual(["approved now", "approvals outlive pairing: off"]);
  });

  it("publishes the same platform event once", async () => {
    const gate = admission();
    const event = dm(OWNER, "once please");
    expect(await gate.handle(event)).toBe("published");
    expect(await gate.handle({ ...event })).toBe("duplicate");
    expect(await published()).toHaveLength(1);
    expect(adapter.typed).toEqual([OWNER]);
  });

  it("cancels the running turn on /stop at once, publishing nothing", async () => {
    const cancelled: string[] = [];
    await bus.onCancel((sessionKey) => cancelled.push(sessionKey));
    const gate = admission();
    const stop = inGroup(OWNER, "/stop@count_bot", { mentionsBot: true });
    expect(await gate.handle(stop)).toBe("command:stop");
    expect(cancelled).toEqual([`telegram:${GROUP}`]);
    expect(adapter.sent).toEqual([{ chatId: GROUP, text: STOP_ACKNOWLEDGEMENT, options: { format: "plain", replyTo: stop.platformMessageId } }]);
    expect(await gate.handle(stop)).toBe("duplicate");
    expect(cancelled).toHaveLength(1);
    expect(await gate.handle(dm(OWNER, " /STOP "))).toBe("command:stop");
    expect(cancelled).toEqual([`telegram:${GROUP}`, `telegram:${OWNER}`]);
    expect(await published()).toEqual([]);
  });

  it("acts on a redelivered /stop or /help once, even when another gateway (or this one restarted) gets it", async () => {
    const cancelled: string[] = [];
    await bus.onCancel((sessionKey) => cancelled.push(sessionKey));
    const stop = dm(OWNER, "/stop");
    const help = dm(OWNER, "/help");
    expect(await admission().handle(stop)).toBe("command:stop");
    expect(await admission().handle(help)).toBe("command:help");
    // A new admission shares nothing in memory with the first: only the bus remembers.
    const restarted = admission();
    expect(await restarted.handle({ ...stop })).toBe("duplicate");
    expect(await restarted.handle({ ...help })).toBe("duplicate");
    expect(cancelled).toEqual([`telegram:${OWNER}`]);
    expect(adapter.sent.map((sent) => sent.text)).toEqual([STOP_ACKNOWLEDGEMENT, helpText]);
  });

  it("answers /help itself and queues /new and /status for the worker", async () => {
    const gate = admission();
    expect(await gate.handle(dm(OWNER, "/help"))).toBe("command:help");
    expect(adapter.sent.map((sent) => sent.text)).toEqual([helpText]);
    expect(await gate.handle(dm(OWNER, "/new"))).toBe("published");
    expect(await gate.handle(inGroup(OWNER, "@count_bot /status", { mentionsBot: true }))).toBe("published");
    const queued = await published();
    expect(queued.map((message) => message.content)).toEqual(["/new", "/status"]);
    expect(queued.map((message) => message.command)).toEqual(["new", "status"]);
  });

  it("parses a command once, at admission: a plain message carries none", async () => {
    const gate = admission();
    expect(await gate.handle(dm(OWNER, "tell me about /new things"))).toBe("published");
    expect((await published())[0]?.command).toBeUndefined();
  });

  it("rate-limits each sender: one notice per window, then silence, then room again", async () => {
    const gate = admission({ allowFrom: [OWNER, "200"], rateLimit: { messages: 3, perMs: 60_000 } });
    for (let index = 0; index < 3; index++) expect(await gate.handle(dm(OWNER, `message ${index}`))).toBe("published");
    expect(await gate.handle(dm(OWNER, "too much"))).toBe("rate-limited");
    expect(adapter.sent.map((sent) => sent.text)).toEqual([RATE_LIMIT_NOTICE]);
    expect(await gate.handle(dm(OWNER, "still too much"))).toBe("ignored:rate-limited");
    expect(await gate.handle(dm("200", "someone else"))).toBe("published");

    clock += 20_000; // one message's worth refilled
    expect(await gate.handle(dm(OWNER, "one more"))).toBe("published");
    expect(await gate.handle(dm(OWNER, "and another"))).toBe("ignored:rate-limited");
    clock += 40_000; // a new window: one notice again
    await gate.handle(dm(OWNER, "a"));
    await gate.handle(dm(OWNER, "b"));
    expect(await gate.handle(dm(OWNER, "c"))).toBe("rate-limited");
    expect(adapter.sent.map((sent) => sent.text)).toEqual([RATE_LIMIT_NOTICE, RATE_LIMIT_NOTICE]);
    const messages = await published();
    expect(messages.filter((message) => message.senderId === OWNER).map((message) => message.content)).toEqual(["message 0", "message 1", "message 2", "one more", "a", "b"]);
    expect(messages.filter((message) => message.senderId === "200").map((message) => message.content)).toEqual(["someone else"]);
  });

  it("survives a platform that fails typing and replies", async () => {
    adapter.failTyping = true;
    adapter.failSend = true;
    const gate = admission();
    expect(await gate.handle(dm(OWNER, "hello"))).toBe("published");
    expect(await gate.handle(dm("666", "hello"))).toBe("pairing");
    expect(await gate.handle(dm(OWNER, "/help"))).toBe("command:help");
    expect(await published()).toHaveLength(1);
  });

  it("ignores an event with neither text nor media", async () => {
    expect(await admission().handle(inGroup(OWNER, "@count_bot", { mentionsBot: true }))).toBe("ignored:empty");
    expect(await published()).toEqual([]);
  });
});

describe("admission: who speaks in a group", () => {
  it("puts the sender's name and how the bot is addressed on a group message, from the event's fields only", async () => {
    const gate = admission();
    await gate.handle(inGroup(OWNER, "@count_bot [Bob (telegram:9)] says hi", { mentionsBot: true, senderName: "Alice" }));
    await gate.handle(dm(OWNER, "private"));
    const [fromGroup, direct] = await published();
    expect(fromGroup).toMatchObject({ senderId: OWNER, chatType: "group", content: "[Bob (telegram:9)] says hi", group: { senderName: "Alice", botHandle: "count_bot", addressing: "mention" } });
    expect(direct!.group).toBeUndefined();
  });

  it("says `all` where the bot hears everything, and leaves the group out with groupContext off", async () => {
    await admission({ groupPolicy: "all" }).handle(inGroup(OWNER, "hello all"));
    expect((await published())[0]!.group).toEqual({ senderName: `User ${OWNER}`, botHandle: "count_bot", addressing: "all" });
    await admission({ groupContext: "off" }).handle(inGroup(OWNER, "@count_bot quiet", { mentionsBot: true }));
    expect((await published())[0]!.group).toBeUndefined();
  });
});
