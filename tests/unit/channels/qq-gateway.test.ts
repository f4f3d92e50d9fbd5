/**
 * The QQ adapter's gateway session against the fake QQ gateway: identify with the intents, the
 * heartbeat, resume after a drop or op 7 (the events missed arrive), a new session after op 9, a
 * refused secret failing the start, and the events normalized: group @, C2C, guild @ and plain
 * channel messages, guild DMs; a redelivered event taken once.
 */
import { afterEach, describe, expect, it } from "vitest";
import { ChannelError } from "../../../src/errors.js";
import { APP_SECRET, type Cleanup, alice, bob, qqAdapter, recorder, startQQ } from "./qq-support.js";

const cleanups: Cleanup[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

describe("QQ gateway session", () => {
  it("identifies with its intents, beats, and resumes after a drop with the events it missed", async () => {
    const qq = await startQQ(cleanups, { heartbeatIntervalMs: 40 });
    const { adapter } = qqAdapter(cleanups, qq);
    const { events, sink } = recorder();
    await adapter.start(sink);
    expect(qq.gateway.sessions).toHaveLength(1);
    expect(qq.gateway.sessions[0]!.intents).toBe((1 << 25) | (1 << 30) | (1 << 12));
    await qq.waitFor(() => qq.gateway.heartbeats >= 3, { what: "heartbeats" });
    qq.gateway.drop();
    qq.dispatch(qq.c2c({ from: alice, text: "sent while away" }));
    await qq.waitFor(() => events.length === 1, { what: "the missed event" });
    expect(events[0]!.text).toBe("sent while away");
    expect(qq.gateway.sessions[0]!.resumes).toBe(1);
    expect(qq.gateway.identifies).toBe(1);
    expect(adapter.resumes).toBe(1);
  });

  it("ends a socket whose heartbeat QQ stopped acknowledging and resumes on a new one", async () => {
    const qq = await startQQ(cleanups, { heartbeatIntervalMs: 30 });
    const { adapter, logLines } = qqAdapter(cleanups, qq);
    await adapter.start(recorder().sink);
    qq.gateway.ackHeartbeats = false;
    await qq.waitFor(() => qq.gateway.sessions[0]!.resumes === 1, { what: "the resume on a new socket" });
    qq.gateway.ackHeartbeats = true;
    expect(logLines.some((line) => line.includes("heartbeat not acknowledged"))).toBe(true);
    expect(qq.gateway.identifies).toBe(1);
  });

  it("reconnects and resumes when QQ sends op 7, and identifies anew after op 9", async () => {
    const qq = await startQQ(cleanups);
    const { adapter } = qqAdapter(cleanups, qq);
    const { events, sink } = recorder();
    await adapter.start(sink);
    qq.gateway.reconnect();
    await qq.waitFor(() => qq.gateway.sessions[0]!.resumes === 1 && qq.gateway.live === 1, { what: "the resume" });
    qq.gateway.invalidate();
    await qq.waitFor(() => qq.gateway.identifies === 2 && qq.gateway.live === 1, { what: "a new session" });
    qq.dispatch(qq.c2c({ from: alice, text: "on the new session" }));
    await qq.waitFor(() => events.length === 1, { what: "the event" });
    expect(adapter.reconnects).toBe(2);
  });

  it("fails the start when QQ refuses the AppSecret, naming it and without it in the text", async () => {
    const qq = await startQQ(cleanups);
    const { adapter } = qqAdapter(cleanups, qq, { appSecret: "wrongSecret0123456789abcdefghijk" });
    const error = await adapter.start(recorder().sink).catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(ChannelError);
    expect((error as ChannelError).kind).toBe("auth");
    expect((error as ChannelError).message).toMatch(/AppID and AppSecret/);
    expect((error as ChannelError).message).not.toContain("wrongSecret0123456789abcdefghijk");
    expect((error as ChannelError).message).not.toContain(APP_SECRET);
  });

  it("normalizes group, C2C and guild events, and takes an event delivered twice once", async () => {
    const qq = await startQQ(cleanups);
    const { adapter } = qqAdapter(cleanups, qq);
    const { events, sink } = recorder();
    await adapter.start(sink);
    const guild = { guild: "5000000001", channel: "5100000001" };
    qq.dispatch(qq.groupAt({ group: "GROUPOPENID1", from: alice, text: "@分析团队 看看" }), 2);
    qq.dispatch(qq.c2c({ from: bob, text: "one to one" }));
    qq.dispatch(qq.channel({ ...guild, from: alice, text: "hello <@!77> there", atBot: true }));
    qq.dispatch(qq.channel({ ...guild, from: bob, text: "among ourselves", all: true }));
    await qq.waitFor(() => events.length === 4, { what: "four events" });
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(events.map((event) => [event.chatId, event.chatType, event.senderId, event.text, event.mentionsBot])).toEqual([
      ["group:GROUPOPENID1", "group", alice.openid, "@分析团队 看看", true],
      [`user:${bob.openid}`, "private", bob.openid, "one to one", false],
      [`channel:${guild.channel}`, "group", alice.guildId, "hello <@!77> there", true],
      [`channel:${guild.channel}`, "group", bob.guildId, "among ourselves", false],
    ]);
    expect(events[2]!.senderName).toBe("Alice");
    expect(adapter.botUsername?.()).toBe(qq.bot.username);
  });
});
