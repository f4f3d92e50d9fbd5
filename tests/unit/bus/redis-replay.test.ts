/**
 * Commands replayed after a lost connection, and commands that reach Redis late. ioredis resends
 * a command whose reply died with the connection, and sends what it queued while offline once it
 * is back; each step of the bus and the store must come out right either way. A loopback proxy
 * (tests/support/redis-proxy.ts) cuts the connection right after a chosen command reached Redis,
 * or holds commands back.
 */
import { randomUUID } from "node:crypto";
import { Redis } from "ioredis";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { InboundMessage, OutboundMessage } from "../../../src/bus/message.js";
import type { MessageBus } from "../../../src/bus/message-bus.js";
import { createRedisBus } from "../../../src/bus/redis-bus.js";
import { busKeys } from "../../../src/bus/redis-keys.js";
import { connectRedis, type RedisConnection, waitUntilReady } from "../../../src/redis/client.js";
import { createRedisStore, redisHistoryKeys } from "../../../src/store/redis-store.js";
import { storedEntryTexts } from "../../../src/store/store.js";
import { type RedisProxy, startRedisProxy } from "../../support/redis-proxy.js";
import { deleteKeys, redisUrl } from "../../support/redis.js";

let direct: Redis;
let proxy: RedisProxy;
let connection: RedisConnection;
let prefix: string;
let bus: MessageBus;

beforeEach(async () => {
  direct = new Redis(redisUrl);
  const { port, hostname } = new URL(redisUrl);
  proxy = await startRedisProxy({ host: hostname, port: Number(port) || 6379 });
  connection = connectRedis(proxy.url, { name: "replay-test" });
  connection.on("error", () => undefined);
  await waitUntilReady(connection, 5_000);
  prefix = `countbot-replay-${randomUUID()}`;
  bus = createRedisBus({ redis: connection, prefix, leaseTtlMs: 30_000, redeliveryDelayMs: 20 });
});

afterEach(async () => {
  await bus.close();
  connection.disconnect();
  await proxy.close();
  await deleteKeys(direct, prefix);
  await direct.quit();
});

function inbound(content: string, extra: Partial<InboundMessage> = {}): InboundMessage {
  return { id: randomUUID(), channel: "web", chatId: "chat-1", senderId: "u", content, media: [], mentions: [], receivedAt: Date.now(), metadata: {}, ...extra };
}

function final(id: string, content: string): OutboundMessage {
  return { id, channel: "web", chatId: "chat-1", content, kind: "final", media: [], metadata: {} };
}

describe("a reply lost with the connection, the command replayed", () => {
  it("the delivery mark replayed finds its own mark and still counts as ours; another's does not", async () => {
    const lost = proxy.loseReplyTo("sent:reply-1#0");
    expect(await bus.markDelivered("reply-1#0")).toBe(true);
    await lost;
    expect(await bus.markDelivered("reply-1#0")).toBe(false);
  });

  it("a publish replayed is queued once and reported accepted (with and without a platform event id)", async () => {
    const withEvent = inbound("with event id", { platformEventId: "event-1" });
    const lost = proxy.loseReplyTo("with event id");
    expect(await bus.publishInbound(withEvent)).toEqual({ accepted: true });
    await lost;
    const withoutEvent = inbound("without event id");
    const lostAgain = proxy.loseReplyTo("without event id");
    expect(await bus.publishInbound(withoutEvent)).toEqual({ accepted: true });
    await lostAgain;
    expect((await direct.lrange(busKeys(prefix).mailbox("web:chat-1"), 0, -1)).map((raw) => (JSON.parse(raw) as InboundMessage).content)).toEqual(["with event id", "without event id"]);
  });

  it("a claim replayed hands over the same lease, not an orphan; its ack replayed is not a lost lease", async () => {
    await bus.publishInbound(inbound("claim me"));
    const lost = proxy.loseReplyContaining("claim me");
    const claim = await bus.claimSession({ timeoutMs: 2_000 });
    await lost;
    expect(claim).toMatchObject({ sessionKey: "web:chat-1", attempt: 1 });
    expect(claim!.messages.map((message) => message.content)).toEqual(["claim me"]);
    expect(await bus.holds(claim!)).toBe(true);

    const lostAck = proxy.loseReplyTo(`${claim!.messages[0]!.id}`);
    await bus.ack(claim!);
    await lostAck;
    expect(await direct.llen(busKeys(prefix).mailbox("web:chat-1"))).toBe(0);
  });

  it("a claim of several sessions replayed hands over the same leases", async () => {
    await bus.publishInbound(inbound("first of many"));
    await bus.publishInbound(inbound("second of many", { chatId: "chat-2" }));
    const lost = proxy.loseReplyContaining("second of many");
    const claims = await bus.claimSessions({ timeoutMs: 2_000, max: 5 });
    await lost;
    expect(claims.map((claim) => [claim.sessionKey, claim.attempt])).toEqual([
      ["web:chat-1", 1],
      ["web:chat-2", 1],
    ]);
    for (const claim of claims) expect(await bus.holds(claim)).toBe(true);
  });

  it("a fenced publish replayed adds one stream entry", async () => {
    await bus.publishInbound(inbound("answer me"));
    const claim = (await bus.claimSession({ timeoutMs: 2_000 }))!;
    const lost = proxy.loseReplyTo("the only answer");
    await bus.publishOutbound(final("out-1", "the only answer"), claim);
    await lost;
    expect(await direct.xlen(busKeys(prefix).outbound("web"))).toBe(1);
  });

  it("an ack with its reply replayed succeeds and adds one stream entry", async () => {
    await bus.publishInbound(inbound("answer and ack me"));
    const claim = (await bus.claimSession({ timeoutMs: 2_000 }))!;
    const lost = proxy.loseReplyTo("the acked answer");
    await bus.ack(claim, 1, final("out-4", "the acked answer"));
    await lost;
    expect(await direct.xlen(busKeys(prefix).outbound("web"))).toBe(1);
    expect(await direct.llen(busKeys(prefix).mailbox("web:chat-1"))).toBe(0);
    expect(await bus.holds(claim)).toBe(false);
  });

  it("an ack with the turn's history replayed writes the history once", async () => {
    const historyBus = createRedisBus({ redis: connection, prefix, leaseTtlMs: 30_000, redeliveryDelayMs: 20, historyKeys: redisHistoryKeys });
    const store = createRedisStore({ redis: connection, prefix });
    try {
      await historyBus.publishInbound(inbound("keep me"));
      const claim = (await historyBus.claimSession({ timeoutMs: 2_000 }))!;
      const lost = proxy.loseReplyTo("the kept answer");
      const history = storedEntryTexts([
        { role: "user", content: "keep me", at: 1 },
        { role: "assistant", content: "the kept answer", at: 1 },
      ]);
      await historyBus.ack(claim, 1, final("out-5", "the kept answer"), history);
      await lost;
      expect((await store.sessions.load("web:chat-1")).history.map((entry) => entry.content)).toEqual(["keep me", "the kept answer"]);
      expect(await direct.xlen(busKeys(prefix).outbound("web"))).toBe(1);
    } finally {
      await store.close();
      await historyBus.close();
    }
  });

  it("a fenced history append replayed writes the turn once", async () => {
    const store = createRedisStore({ redis: connection, prefix });
    await bus.publishInbound(inbound("remember me"));
    const claim = (await bus.claimSession({ timeoutMs: 2_000 }))!;
    const lost = proxy.loseReplyTo("the turn's answer");
    await store.sessions.append(
      "web:chat-1",
      [
        { role: "user", content: "remember me", at: 1 },
        { role: "assistant", content: "the turn's answer", at: 1 },
      ],
      { token: claim.token },
    );
    await lost;
    expect((await store.sessions.load("web:chat-1")).history.map((entry) => entry.content)).toEqual(["remember me", "the turn's answer"]);
    await store.close();
  });

  it("an XREADGROUP answer lost with the connection is delivered after the reconnect, not after the 60 s reclaim", async () => {
    const delivered: string[] = [];
    const subscription = await bus.consumeOutbound("web", async (event) => {
      if (event.type === "message") delivered.push(event.message.content);
    });
    const lost = proxy.loseReplyContaining("read me once");
    await bus.publishOutbound(final("out-2", "read me once"));
    await lost;
    const deadline = Date.now() + 15_000;
    while (delivered.length === 0 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
    await subscription.close();
    expect(delivered).toEqual(["read me once"]);
  });
});

describe("a failover to a replica that never got the outbound stream", () => {
  it("recreates the delivery group the new primary lacks, and delivers what is published after", async () => {
    const delivered: string[] = [];
    const subscription = await bus.consumeOutbound("web", async (event) => {
      if (event.type === "message") delivered.push(event.message.content);
    });
    await bus.publishOutbound(final("out-before", "before the failover"));
    const until = async (count: number) => {
      const deadline = Date.now() + 15_000;
      while (delivered.length < count && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
    };
    await until(1);
    // The promoted replica had not received the stream or its group (asynchronous replication): gone.
    await direct.del(busKeys(prefix).outbound("web"));
    await bus.publishOutbound(final("out-after", "after the failover"));
    await until(2);
    await subscription.close();
    expect(delivered).toEqual(["before the failover", "after the failover"]);
  });
});

describe("commands that reach Redis late judge leases by Redis's clock, not the one they were sent with", () => {
  it("a lease check held back past the lease's expiry says the lease is gone, and a fenced write is refused", async () => {
    const shortBus = createRedisBus({ redis: connection, prefix, leaseTtlMs: 1_000 });
    await shortBus.publishInbound(inbound("short lease"));
    const claim = (await shortBus.claimSession({ timeoutMs: 2_000 }))!;
    proxy.holdRequests(1_500);
    // Sent now (the client's clock says the lease has most of a second left), arriving after it ran out.
    const [held, published] = await Promise.all([
      shortBus.holds(claim),
      shortBus.publishOutbound(final("out-3", "too late"), claim).then(
        () => "published",
        (error: Error) => error.message,
      ),
    ]);
    expect(held).toBe(false);
    expect(published).toMatch(/no longer held/);
    await shortBus.close();
  });
});
