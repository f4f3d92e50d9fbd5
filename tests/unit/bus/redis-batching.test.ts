/**
 * What the Redis bus batches per turn of the event loop: the inbound messages a gateway accepts in
 * one moment (src/bus/redis-inbox.ts) and the turns a worker ends in one moment
 * (src/bus/redis-acks.ts) reach Redis in one script call each, and each keeps its own outcome.
 */
import { randomUUID } from "node:crypto";
import { Redis } from "ioredis";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { BusError } from "../../../src/errors.js";
import type { InboundMessage, OutboundMessage } from "../../../src/bus/message.js";
import type { MessageBus } from "../../../src/bus/message-bus.js";
import { createRedisBus } from "../../../src/bus/redis-bus.js";
import { busKeys } from "../../../src/bus/redis-keys.js";
import { commandsOn, deleteKeys, redisUrl } from "../../support/redis.js";

let redis: Redis;
let prefix: string;
let bus: MessageBus;
/** Every script call the bus made, by sha. */
let scriptCalls: string[];

function inbound(chatId: string, content: string): InboundMessage {
  return { id: randomUUID(), channel: "test", chatId, senderId: "u", content, media: [], mentions: [], receivedAt: Date.now(), metadata: {} };
}

function final(chatId: string, content: string): OutboundMessage {
  return { id: randomUUID(), channel: "test", chatId, content, kind: "final", media: [], metadata: {} };
}

beforeEach(() => {
  redis = new Redis(redisUrl, { maxRetriesPerRequest: null });
  prefix = `countbot-acks-${randomUUID()}`;
  scriptCalls = [];
  // The bus's connection, counting the script calls it sends.
  const counting = new Proxy(redis, {
    get(target, property) {
      const value = Reflect.get(target, property, target) as unknown;
      if (property === "evalsha") {
        return (sha: string, ...rest: unknown[]) => {
          scriptCalls.push(sha);
          return (target.evalsha as (...args: unknown[]) => Promise<unknown>)(sha, ...rest);
        };
      }
      return typeof value === "function" ? (value as (...args: unknown[]) => unknown).bind(target) : value;
    },
  });
  bus = createRedisBus({ redis: counting, prefix, leaseTtlMs: 10_000 });
});

afterEach(async () => {
  await bus.close();
  await deleteKeys(redis, prefix);
  await redis.quit();
});

describe("inbound publishes batched per moment", () => {
  it("queues the messages accepted in one moment in one script call, in order, a duplicate refused", async () => {
    const first = { ...inbound("a", "one"), platformEventId: "event-1" };
    const again = { ...inbound("a", "one, delivered twice by the platform"), platformEventId: "event-1" };
    const outcomes = await Promise.all([bus.publishInbound(first), bus.publishInbound(inbound("b", "to b")), bus.publishInbound(again), bus.publishInbound(inbound("a", "two"))]);

    expect(scriptCalls).toHaveLength(1);
    expect(outcomes.map((outcome) => outcome.accepted)).toEqual([true, true, false, true]);
    const claims = await bus.claimSessions({ max: 3, timeoutMs: 1_000 });
    const backlogs = Object.fromEntries(claims.map((claim) => [claim.sessionKey, claim.messages.map((message) => message.content)]));
    expect(backlogs).toEqual({ "test:a": ["one", "two"], "test:b": ["to b"] });
    // The same publish again (a replay after a lost reply) finds itself: accepted, not queued twice.
    expect(await bus.publishInbound(first)).toEqual({ accepted: true });
    expect(await redis.llen(busKeys(prefix).mailbox("test:a"))).toBe(2);
  });
});

describe("acks batched per moment", () => {
  it("ends the turns finished in one moment in one script call, each with its own outcome", async () => {
    for (const chat of ["a", "b", "c"]) await bus.publishInbound(inbound(chat, `to ${chat}`));
    const claims = await bus.claimSessions({ max: 3, timeoutMs: 1_000 });
    expect(claims.map((claim) => claim.sessionKey).sort()).toEqual(["test:a", "test:b", "test:c"]);
    const [a, b, c] = claims.sort((left, right) => left.sessionKey.localeCompare(right.sessionKey));
    await bus.publishInbound(inbound("b", "mid-turn"));
    scriptCalls = [];

    const outcomes = await Promise.allSettled([bus.ack(a!, 1, final("a", "reply to a")), bus.ack(b!, 1, final("b", "reply to b")), bus.ack(c!), bus.ack(a!)]);

    expect(scriptCalls).toHaveLength(1);
    expect(outcomes.slice(0, 3).map((outcome) => outcome.status)).toEqual(["fulfilled", "fulfilled", "fulfilled"]);
    // The same claim acked twice in the batch: the second finds the lease gone, and does nothing.
    const refused = outcomes[3]!;
    expect(refused.status).toBe("rejected");
    expect(refused.status === "rejected" && refused.reason instanceof BusError && refused.reason.code).toBe("lease-lost");
    const keys = busKeys(prefix);
    const stream = await redis.xrange(keys.outbound("test"), "-", "+");
    expect(stream.map(([, fields]) => (JSON.parse(fields[1]!) as { message: OutboundMessage }).message.content)).toEqual(["reply to a", "reply to b"]);
    // What arrived mid-turn is the next turn; the others are done.
    const next = await bus.claimSessions({ max: 3, timeoutMs: 1_000 });
    expect(next.map((claim) => [claim.sessionKey, claim.messages.map((message) => message.content)])).toEqual([["test:b", ["mid-turn"]]]);
    expect(await bus.stats()).toMatchObject({ ready: 0, leased: 1 });
  });
});

describe("what an ack costs Redis", () => {
  it("drops a turn's messages and learns whether more wait in one command (LPOP of one more), putting back what arrived mid-turn", async () => {
    for (const chat of ["quiet", "busy"]) {
      await bus.publishInbound(inbound(chat, `${chat} 1`));
      await bus.publishInbound(inbound(chat, `${chat} 2`));
    }
    const claims = await bus.claimSessions({ max: 2, timeoutMs: 1_000 });
    const byKey = Object.fromEntries(claims.map((claim) => [claim.sessionKey, claim]));
    await bus.publishInbound(inbound("busy", "busy 3, mid-turn"));
    const quiet = await commandsOn(redis, prefix, () => bus.ack(byKey["test:quiet"]!, 2, final("quiet", "done")));
    expect(quiet.lpop).toBe(1);
    expect(quiet.ltrim ?? 0).toBe(0);
    expect(quiet.llen ?? 0).toBe(0);
    expect(quiet.lpush ?? 0).toBe(0);
    expect(await redis.exists(busKeys(prefix).mailbox("test:quiet"))).toBe(0);
    await bus.ack(byKey["test:busy"]!, 2, final("busy", "done"));
    // What arrived mid-turn is the next turn, alone.
    const [next] = await bus.claimSessions({ max: 1, timeoutMs: 1_000 });
    expect(next?.sessionKey).toBe("test:busy");
    expect(next?.messages.map((message) => message.content)).toEqual(["busy 3, mid-turn"]);
  });
});
