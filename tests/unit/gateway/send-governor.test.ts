/**
 * The send governor on the in-process store with a hand-moved clock: which budgets a call takes
 * from, finals waiting in order for the budget that stands in the way, drafts kept off the reserve
 * and stopped while a final waits or a 429 closed the budget, and limits overridden by config.
 */
import { describe, expect, it } from "vitest";
import { ConfigError } from "../../../src/errors.js";
import { defineQuotas, describeQuotas, limitsSchema, withLimits } from "../../../src/gateway/quotas.js";
import { createMemoryQuotaStore } from "../../../src/gateway/quota-store.js";
import { type SendGovernor, createSendGovernor } from "../../../src/gateway/send-governor.js";
import { nextDraftPace } from "../../../src/gateway/draft-pacing.js";

const quotas = defineQuotas({
  scopes: {
    chat: { per: "chat", limit: 1, windowMs: 1_000, calls: ["send", "edit", "draft"] },
    group: { per: "group", limit: 4, windowMs: 60_000, calls: ["send", "edit"] },
    bot: { per: "account", limit: 6, windowMs: 1_000 },
    card: { per: "message", limit: 2, windowMs: 1_000, calls: ["edit"] },
  },
  platformChatOf: (chatId) => chatId.split(":")[0]!,
});

/** A clock that moves only when a sleep passes; sleeps resolve in time order. */
function virtualTime() {
  let clock = 0;
  const sleepers: Array<{ at: number; wake: () => void }> = [];
  return {
    now: () => clock,
    sleep: (ms: number) => new Promise<void>((resolve) => sleepers.push({ at: clock + ms, wake: resolve })),
    advance: (ms: number) => void (clock += ms),
    /** Lets every pending sleep pass, earliest first, until none is left. */
    async run(): Promise<void> {
      for (;;) {
        await new Promise((resolve) => setImmediate(resolve));
        if (sleepers.length === 0) return;
        sleepers.sort((a, b) => a.at - b.at);
        const next = sleepers.shift()!;
        clock = Math.max(clock, next.at);
        next.wake();
      }
    },
  };
}

/** When `governor` lets a private chat's next send go, in virtual time (its timers run until they are done). */
async function nextSendAt(governor: SendGovernor, time: ReturnType<typeof virtualTime>, chatId: string): Promise<number> {
  const next = governor.acquire({ call: "send", chatId, chatType: "private" }).then(() => time.now());
  await time.run();
  return next;
}

/** A platform that answers every call the moment it is taken (as the dispatcher reports answers). */
function instantPlatform(governor: SendGovernor): SendGovernor {
  return {
    quotas: governor.quotas,
    streaming: (call) => governor.streaming(call),
    answered: (call) => governor.answered(call),
    rateLimited: (call, retryAfterMs, scope) => governor.rateLimited(call, retryAfterMs, scope),
    async acquire(call, signal) {
      const waited = await governor.acquire(call, signal);
      await governor.answered(call);
      return waited;
    },
    async tryAcquire(call) {
      const outcome = await governor.tryAcquire(call);
      await governor.answered(call);
      return outcome;
    },
  };
}

function setup() {
  const time = virtualTime();
  const store = createMemoryQuotaStore({ now: time.now });
  let deferred = 0;
  const raw = createSendGovernor({ quotas, store, now: time.now, sleep: time.sleep, marginMs: () => 0, onDeferred: () => (deferred += 1) });
  return { time, store, governor: instantPlatform(raw), raw, deferred: () => deferred };
}

describe("send governor", () => {
  it("holds each chat to its budget and the bot to its own: finals wait, in order, and go when there is room", async () => {
    const { time, governor, deferred } = setup();
    const sentAt: Array<[string, number]> = [];
    const finals = ["a", "b", "c", "d", "e", "f", "g", "h"].map((chat) =>
      governor.acquire({ call: "send", chatId: chat, chatType: "private" }).then(() => sentAt.push([chat, time.now()])),
    );
    finals.push(governor.acquire({ call: "send", chatId: "a", chatType: "private" }).then(() => sentAt.push(["a again", time.now()])));
    await time.run();
    await Promise.all(finals);
    // Six fit the bot's budget at once; the rest wait for the first calls to age out, a second later.
    expect(sentAt.filter(([, at]) => at === 0).map(([chat]) => chat)).toEqual(["a", "b", "c", "d", "e", "f"]);
    expect(sentAt.filter(([, at]) => at === 1_000).map(([chat]) => chat).sort()).toEqual(["a again", "g", "h"]);
    expect(deferred()).toBe(3);
  });

  it("serves the bot's budget to the chat with the longest backlog first: a busy chat's next call is not put behind chats that queued meanwhile", async () => {
    const { time, governor } = setup();
    const sentAt: Array<[string, number]> = [];
    const send = (chatId: string, label: string, backlog?: number) =>
      governor.acquire({ call: "send", chatId, chatType: "private", ...(backlog === undefined ? {} : { backlog }) }).then(() => sentAt.push([label, time.now()]));
    // Six single finals fill the bot's second; three more queue for the next one, then a busy
    // chat's final comes, with four more of its own behind it.
    const finals = ["a", "b", "c", "d", "e", "f", "g", "h", "i"].map((chat) => send(chat, chat));
    await new Promise((resolve) => setImmediate(resolve));
    finals.push(send("busy", "busy", 4));
    await time.run();
    await Promise.all(finals);
    expect(sentAt.filter(([, at]) => at === 0).map(([label]) => label)).toEqual(["a", "b", "c", "d", "e", "f"]);
    // First come first served among equals; the backlog goes ahead of them.
    expect(sentAt.filter(([, at]) => at === 1_000).map(([label]) => label)).toEqual(["busy", "g", "h", "i"]);
  });

  it("keeps a call of the bot's budget for a busy chat's next final: chats with nothing queued leave it", async () => {
    const time = virtualTime();
    const store = createMemoryQuotaStore({ now: time.now });
    const small = defineQuotas({ scopes: { chat: { per: "chat", limit: 5, windowMs: 1_000 }, bot: { per: "account", limit: 3, windowMs: 1_000 } } });
    const governor = instantPlatform(createSendGovernor({ quotas: small, store, now: time.now, sleep: time.sleep, marginMs: () => 0 }));
    const sentAt: Array<[string, number]> = [];
    const send = (chatId: string, label: string, backlog = 0) => governor.acquire({ call: "send", chatId, chatType: "group", backlog }).then(() => sentAt.push([label, time.now()]));
    await send("busy", "busy 1", 2);
    const singles = ["a", "b", "c"].map((chat) => send(chat, chat));
    await new Promise((resolve) => setImmediate(resolve));
    // Its next final comes back a round trip later and finds the call kept for it.
    await send("busy", "busy 2", 1);
    await time.run();
    await Promise.all(singles);
    expect(sentAt.filter(([, at]) => at === 0).map(([label]) => label)).toEqual(["busy 1", "a", "busy 2"]);
    expect(sentAt.filter(([, at]) => at === 1_000).map(([label]) => label)).toEqual(["b", "c"]);
  });

  it("counts a group's calls over the minute, and a topic thread in its group", async () => {
    const { time, governor } = setup();
    const sentAt: number[] = [];
    const sends = [0, 1, 2, 3, 4].map((index) => governor.acquire({ call: "send", chatId: `-100:topic${index}`, chatType: "thread" }).then(() => sentAt.push(time.now())));
    await time.run();
    await Promise.all(sends);
    // The chat budget (1 a second, per platform chat) spaces them; the group's 4 a minute holds the fifth.
    expect(sentAt).toEqual([0, 1_000, 2_000, 3_000, 60_000]);
  });

  it("keeps drafts off the reserve, stops them while a final waits for the budget, and lets the final through", async () => {
    const { time, governor } = setup();
    // The bot's budget: 6, of which 3 are kept for finals.
    const drafts = [];
    for (let index = 0; index < 4; index++) drafts.push(await governor.tryAcquire({ call: "draft", chatId: `d${index}`, chatType: "private" }));
    expect(drafts).toEqual(["taken", "taken", "taken", "low"]);
    for (let index = 0; index < 3; index++) await governor.acquire({ call: "send", chatId: `f${index}`, chatType: "private" });
    const waiting = governor.acquire({ call: "send", chatId: "late", chatType: "private" });
    await new Promise((resolve) => setImmediate(resolve));
    expect(await governor.tryAcquire({ call: "edit", chatId: "other", chatType: "private", messageId: "m1" })).toBe("closed");
    await time.run();
    await waiting;
    expect(time.now()).toBe(1_000);
    expect(await governor.tryAcquire({ call: "edit", chatId: "other", chatType: "private", messageId: "m1" })).toBe("taken");
  });

  it("closes the budget a 429 named for the wait asked, and only the chat's when it named none", async () => {
    const { time, store, governor } = setup();
    await governor.rateLimited({ call: "send", chatId: "a", chatType: "private" }, 5_000);
    expect(await governor.tryAcquire({ call: "draft", chatId: "a", chatType: "private" })).toBe("closed");
    expect(await governor.tryAcquire({ call: "draft", chatId: "b", chatType: "private" })).toBe("taken");
    await governor.rateLimited({ call: "send", chatId: "b", chatType: "private" }, 3_000, "bot");
    expect(await store.used({ key: "bot", limit: 6, windowMs: 1_000, reserve: 3 })).toBe(6);
    let sentAt = -1;
    const final = governor.acquire({ call: "send", chatId: "c", chatType: "private" }).then(() => (sentAt = time.now()));
    await time.run();
    await final;
    expect(sentAt).toBe(3_000);
  });

  it("takes an edit from its message's budget too, and as many calls as the send makes", async () => {
    const { store, governor } = setup();
    expect(await governor.acquire({ call: "edit", chatId: "a", chatType: "private", messageId: "card-1", cost: 2 })).toBe(0);
    expect(await governor.tryAcquire({ call: "edit", chatId: "b", chatType: "private", messageId: "card-1" })).toBe("low");
    expect(await store.used({ key: "card:card-1", limit: 2, windowMs: 1_000, reserve: 1 })).toBe(2);
    expect(await store.used({ key: "bot", limit: 6, windowMs: 1_000, reserve: 3 })).toBe(2);
  });
});

describe("draft pacing", () => {
  it("doubles the interval while budgets are low, up to the ceiling, halves it back as drafts go out, and stops when closed", () => {
    let pace = { intervalMs: 1_000, stopped: false };
    pace = nextDraftPace(pace, "low", 1_000, 8_000);
    expect(pace).toEqual({ intervalMs: 2_000, stopped: false });
    for (let index = 0; index < 5; index++) pace = nextDraftPace(pace, "low", 1_000, 8_000);
    expect(pace.intervalMs).toBe(8_000);
    pace = nextDraftPace(pace, "taken", 1_000, 8_000);
    expect(pace).toEqual({ intervalMs: 4_000, stopped: false });
    pace = nextDraftPace(pace, "closed", 1_000, 8_000);
    expect(pace.stopped).toBe(true);
    expect(nextDraftPace(pace, "taken", 1_000, 8_000).stopped).toBe(true);
  });
});

describe("platform quotas", () => {
  it("takes overrides by scope name and refuses an unknown name, naming the field", () => {
    const schema = limitsSchema(quotas);
    expect(schema.safeParse({ group: { limit: 10 } }).success).toBe(true);
    const unknown = schema.safeParse({ grup: { limit: 10 } });
    expect(unknown.success).toBe(false);
    expect(JSON.stringify(unknown.error?.issues)).toMatch(/grup/);
    expect(schema.safeParse({ group: { limit: 0 } }).success).toBe(false);
    const changed = withLimits(quotas, { group: { limit: 10 }, bot: { windowMs: 2_000 } }, "channels.telegram.limits");
    expect(changed.scopes.group).toMatchObject({ limit: 10, windowMs: 60_000 });
    expect(changed.scopes.bot).toMatchObject({ limit: 6, windowMs: 2_000 });
    expect(() => withLimits(quotas, { grup: { limit: 1 } }, "channels.telegram.limits")).toThrow(ConfigError);
    expect(describeQuotas(changed)).toContain("group: 10 per 1 min per group chat (send, edit)");
  });

  it("refuses a declaration a Redis take could not carry", () => {
    const scopes = Object.fromEntries(Array.from({ length: 7 }, (_, index) => [`s${index}`, { per: "account" as const, limit: 1, windowMs: 1 }]));
    expect(() => defineQuotas({ scopes })).toThrow(/at most 6/);
    expect(() => defineQuotas({ scopes: { bad: { per: "chat", limit: 0, windowMs: 1 } } })).toThrow(/limit/);
  });
});

describe("send governor and late answers", () => {
  it("counts a call the platform answered late from its answer, so the next call to the chat cannot arrive inside its window", async () => {
    const { time, raw: governor } = setup();
    const first = { call: "send" as const, chatId: "a", chatType: "private" as const };
    await governor.acquire(first);
    time.advance(800); // the request sat in a loaded event loop; the platform counted it on arrival
    await governor.answered(first);
    expect(await nextSendAt(governor, time, "a")).toBe(1_800);
  });

  it("counts a late call from a margin before its answer: the next is taken a window and a margin after, so it still arrives a window after the answer", async () => {
    const time = virtualTime();
    const store = createMemoryQuotaStore({ now: time.now });
    const governor = createSendGovernor({ quotas, store, now: time.now, sleep: time.sleep, marginMs: () => 50 });
    const first = { call: "send" as const, chatId: "a", chatType: "private" as const };
    await governor.acquire(first);
    time.advance(300);
    await governor.answered(first);
    // Counted from 250: room at 250 + 1,000 + 50, the answer's time plus the window.
    expect(await nextSendAt(governor, time, "a")).toBe(1_300);
  });

  it("leaves a call answered within the margin where it was taken, and forgets a draft's take once answered", async () => {
    const time = virtualTime();
    const store = createMemoryQuotaStore({ now: time.now });
    const raw = createSendGovernor({ quotas, store, now: time.now, sleep: time.sleep, marginMs: () => 100 });
    const governor = raw;
    const draft = { call: "draft" as const, chatId: "b", chatType: "private" as const };
    expect(await governor.tryAcquire(draft)).toBe("taken");
    time.advance(50);
    await governor.answered(draft);
    await governor.answered(draft); // a second answer changes nothing
    expect(await nextSendAt(governor, time, "b")).toBe(1_100);
  });
});

describe("send governor and calls still unanswered", () => {
  it("holds a chat's next call while one taken a window ago has no answer yet, then counts that one from its answer", async () => {
    const { time, raw: governor } = setup();
    const slow = { call: "send" as const, chatId: "a", chatType: "private" as const };
    await governor.acquire(slow);
    time.advance(1_000); // a window on, the platform has not answered: it may not have counted the call yet
    expect(await governor.tryAcquire({ call: "draft", chatId: "a", chatType: "private" })).toBe("low");
    const sentAt: number[] = [];
    const next = { call: "send" as const, chatId: "a", chatType: "private" as const };
    const waiting = governor.acquire(next).then(() => sentAt.push(time.now()));
    await new Promise((resolve) => setImmediate(resolve));
    time.advance(500);
    await governor.answered(slow); // answered 1.5 s after its take
    await time.run();
    await waiting;
    expect(sentAt).toEqual([2_500]);
  });

  it("counts its calls from as far ahead as its event loop runs behind, half a window or more, so another gateway's next call waits that much more", async () => {
    const time = virtualTime();
    const store = createMemoryQuotaStore({ now: time.now });
    let lag = 600;
    const behind = instantPlatform(createSendGovernor({ quotas, store, now: time.now, sleep: time.sleep, marginMs: () => 0, lagMs: () => lag }));
    const onTime = instantPlatform(createSendGovernor({ quotas, store, now: time.now, sleep: time.sleep, marginMs: () => 0 }));
    await behind.acquire({ call: "send", chatId: "q", chatType: "private" });
    lag = 0;
    expect(await nextSendAt(onTime, time, "q")).toBe(1_600);
  });

  it("counts its calls from their take while its event loop runs behind less than half a window: the late answer moves them", async () => {
    const time = virtualTime();
    const store = createMemoryQuotaStore({ now: time.now });
    const behind = createSendGovernor({ quotas, store, now: time.now, sleep: time.sleep, marginMs: () => 0, lagMs: () => 250 });
    const onTime = instantPlatform(createSendGovernor({ quotas, store, now: time.now, sleep: time.sleep, marginMs: () => 0 }));
    const call = { call: "send" as const, chatId: "q", chatType: "private" as const };
    await behind.acquire(call);
    // The call sat in the loop: its answer comes 250 ms after the take, and counts it from then.
    time.advance(250);
    await behind.answered(call);
    expect(await nextSendAt(onTime, time, "q")).toBe(1_250);
    // Had it been answered at once, the next could have gone a window after the take.
    const quick = createSendGovernor({ quotas, store, now: time.now, sleep: time.sleep, marginMs: () => 0, lagMs: () => 250 });
    const other = { call: "send" as const, chatId: "r", chatType: "private" as const };
    const takenAt = time.now();
    await quick.acquire(other);
    await quick.answered(other);
    const after: number[] = [];
    const following = onTime.acquire({ call: "send", chatId: "r", chatType: "private" }).then(() => after.push(time.now()));
    await time.run();
    await following;
    expect(after).toEqual([takenAt + 1_000]);
  });

  it("gives up on a take never answered after 30 s: a caller's slip does not close a budget for good", async () => {
    const { time, raw: governor } = setup();
    await governor.acquire({ call: "send", chatId: "z", chatType: "private" });
    const sentAt: number[] = [];
    const waiting = governor.acquire({ call: "send", chatId: "z", chatType: "private" }).then(() => sentAt.push(time.now()));
    await time.run();
    await waiting;
    expect(sentAt).toHaveLength(1);
    expect(sentAt[0]).toBeGreaterThan(30_000);
    expect(sentAt[0]).toBeLessThanOrEqual(32_000);
  });
});

describe("send governor on long windows", () => {
  it("keeps a group's minute for its finals while several replies stream into it: a busy group streams no drafts, a quiet one does", async () => {
    const { time, governor } = setup();
    const draft = async (chatId: string, replyId: string) => {
      time.advance(1_000); // past the chat's own second
      return governor.tryAcquire({ call: "edit", chatId, chatType: "group", messageId: replyId, replyId });
    };
    // group: 4 a minute, half kept for finals. A reply's first draft waits a moment (replies asked
    // for together are all known by then); alone in the group, its drafts take the other half.
    expect([await draft("-1", "r1"), await draft("-1", "r1"), await draft("-1", "r1"), await draft("-1", "r1")]).toEqual(["low", "taken", "taken", "low"]);
    // Four replies asked for at once in another group: not one draft spends the minute their finals need.
    const burst = ["a", "b", "c", "d"];
    const outcomes: string[] = [];
    for (let round = 0; round < 3; round++) for (const replyId of burst) outcomes.push(await draft("-2", replyId));
    expect(outcomes.every((outcome) => outcome === "low")).toBe(true);
    // Their finals go out at once, all four in the minute, and end the streams.
    const sentAt: number[] = [];
    const finals = burst.map((replyId) => governor.acquire({ call: "send", chatId: "-2", chatType: "group", replyId }).then(() => sentAt.push(time.now())));
    await time.run();
    await Promise.all(finals);
    expect(Math.max(...sentAt) - Math.min(...sentAt)).toBeLessThan(60_000);
    // A new reply alone in the group streams again once there is room.
    time.advance(60_000);
    expect([await draft("-2", "e"), await draft("-2", "e")]).toEqual(["low", "taken"]);
  });

  it("counts a reply as streaming from its first draft's arrival, shown or not: the one reply that asks first finds the minute kept", async () => {
    const { time, governor } = setup();
    for (const replyId of ["a", "b", "c", "d"]) governor.streaming({ call: "send", chatId: "-3", chatType: "group", replyId });
    time.advance(1_000);
    // Only "a" ever asks to show a draft (the chat's lane showed it first): the other three still need their finals.
    expect(await governor.tryAcquire({ call: "send", chatId: "-3", chatType: "group", replyId: "a" })).toBe("low");
    // Alone in a group, a reply streams once settled.
    governor.streaming({ call: "send", chatId: "-4", chatType: "group", replyId: "z" });
    time.advance(1_000);
    expect(await governor.tryAcquire({ call: "send", chatId: "-4", chatType: "group", replyId: "z" })).toBe("taken");
  });

  it("keeps a group's minute when a hand-over split its replies between two gateways, each seeing one", async () => {
    const time = virtualTime();
    const store = createMemoryQuotaStore({ now: time.now });
    const [a, b] = [0, 1].map(() => instantPlatform(createSendGovernor({ quotas, store, now: time.now, sleep: time.sleep, marginMs: () => 0 })));
    const draft = (governor: SendGovernor, replyId: string, chatId = "-9") => governor.tryAcquire({ call: "send", chatId, chatType: "group", replyId });
    for (const [governor, replyId] of [[a!, "ra"], [b!, "rb"]] as const) governor.streaming({ call: "send", chatId: "-9", chatType: "group", replyId });
    expect([await draft(a!, "ra"), await draft(b!, "rb")]).toEqual(["low", "low"]); // settling, and counted in the store
    time.advance(1_000);
    expect([await draft(a!, "ra"), await draft(b!, "rb")]).toEqual(["low", "low"]);
    // A gateway alone with its reply in a quiet group streams.
    a!.streaming({ call: "send", chatId: "-10", chatType: "group", replyId: "solo" });
    await draft(a!, "solo", "-10");
    time.advance(1_000);
    expect(await draft(a!, "solo", "-10")).toBe("taken");
  });

  it("keeps a call of a short window for each reply streaming into it: five replies in a channel of 5 per 5 s stream nothing, two share what is left", async () => {
    const time = virtualTime();
    const store = createMemoryQuotaStore({ now: time.now });
    const channel = defineQuotas({ scopes: { channel: { per: "chat", limit: 5, windowMs: 5_000 } } });
    const governor = instantPlatform(createSendGovernor({ quotas: channel, store, now: time.now, sleep: time.sleep, marginMs: () => 0 }));
    const draft = (chatId: string, replyId: string) => governor.tryAcquire({ call: "edit", chatId, chatType: "group", messageId: replyId, replyId });
    const busy = ["a", "b", "c", "d", "e"];
    for (const replyId of busy) expect(await draft("busy", replyId)).toBe("low"); // the first drafts wait a moment
    time.advance(1_000);
    expect(await Promise.all(busy.map((replyId) => draft("busy", replyId)))).toEqual(["low", "low", "low", "low", "low"]);
    for (const replyId of ["x", "y"]) await draft("pair", replyId);
    time.advance(1_000);
    // Two replies: 5 - max(half, 2) = 3 calls for their drafts in the window.
    expect([await draft("pair", "x"), await draft("pair", "y"), await draft("pair", "x"), await draft("pair", "y")]).toEqual(["taken", "taken", "taken", "low"]);
  });
});
