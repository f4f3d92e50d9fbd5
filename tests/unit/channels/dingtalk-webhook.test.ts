/**
 * The DingTalk HTTP callback: the signature and the hour's window checked before the body is read,
 * then the message taken through the adapter (the fake signs as DingTalk does).
 */
import pino from "pino";
import { afterEach, describe, expect, it } from "vitest";
import { createCallbackHandler, signatureOf } from "../../../channels/dingtalk/webhook-handler.js";
import { signCallback } from "../../support/dingtalk-messages.js";
import { APP_SECRET, type Cleanup, alice, dingtalkAdapter, startDingTalk } from "./dingtalk-support.js";

const cleanups: Cleanup[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

const NOW = 1_750_000_000_000;
const HOUR = 60 * 60_000;

function handler(taken: unknown[], accepting = true) {
  return createCallbackHandler({
    appSecret: APP_SECRET,
    accepting: () => accepting,
    handle: async (message) => void taken.push(message),
    logger: pino({ level: "silent" }),
    now: () => NOW,
  });
}

const body = { msgId: "msg1", msgtype: "text", conversationId: "cid1", conversationType: "1", senderId: "$:LWCP_v1:$a", senderStaffId: "a1", text: { content: "hi" } };
const request = (headers: Record<string, string>, raw: unknown = body) => ({ headers, rawBody: Buffer.from(typeof raw === "string" ? raw : JSON.stringify(raw)) });
const signed = (timestamp: number, secret = APP_SECRET) => ({ timestamp: String(timestamp), sign: signCallback(String(timestamp), secret) });

describe("DingTalk HTTP callback", () => {
  it("signs as DingTalk documents it: Base64 HMAC-SHA256 of timestamp and secret", () => {
    // Computed apart with `printf '1577262236757\nthis is secret' | openssl dgst -sha256 -hmac 'this is secret' -binary | base64`.
    expect(signatureOf("1577262236757", "this is secret")).toBe("hmPWwU+7lVdm3ZZz0r9tSfx0L4Q26jWOZr9+Gs6EZQM=");
    expect(signCallback("1577262236757", "this is secret")).toBe("hmPWwU+7lVdm3ZZz0r9tSfx0L4Q26jWOZr9+Gs6EZQM=");
  });

  it("takes a signed message within the hour, URL-encoded signature included", async () => {
    const taken: unknown[] = [];
    const handle = handler(taken);
    expect(await handle(request(signed(NOW - HOUR + 1_000)))).toEqual({ status: 200, body: {} });
    const encoded = signed(NOW);
    expect((await handle(request({ ...encoded, sign: encodeURIComponent(encoded.sign) }))).status).toBe(200);
    expect(taken).toHaveLength(2);
  });

  it("refuses before reading the body: no signature, a wrong one, another app's, a stale or future timestamp", async () => {
    const taken: unknown[] = [];
    const handle = handler(taken);
    const garbage = "{not json";
    const answers = await Promise.all([
      handle(request({}, garbage)),
      handle(request({ timestamp: String(NOW), sign: "AAAA" }, garbage)),
      handle(request(signed(NOW, "another-app-secret"), garbage)),
      handle(request(signed(NOW - HOUR - 1_000), garbage)),
      handle(request(signed(NOW + HOUR + 1_000), garbage)),
      handle(request({ timestamp: "soon", sign: signCallback("soon", APP_SECRET) }, garbage)),
    ]);
    expect(answers.map((answer) => [answer.status, (answer.body as { error: string }).error])).toEqual([
      [401, "bad signature"],
      [401, "bad signature"],
      [401, "bad signature"],
      [401, "stale request"],
      [401, "stale request"],
      [401, "stale request"],
    ]);
    expect(taken).toEqual([]);
  });

  it("names the bad field of a signed body, and answers 503 while stopped", async () => {
    const taken: unknown[] = [];
    expect(await handler(taken)(request(signed(NOW), { ...body, conversationType: "3" }))).toMatchObject({ status: 400, body: { error: expect.stringContaining("conversationType") } });
    expect(await handler(taken)(request(signed(NOW), "[]"))).toMatchObject({ status: 400 });
    expect(await handler(taken, false)(request(signed(NOW)))).toMatchObject({ status: 503 });
    expect(taken).toEqual([]);
  });

  it("runs the adapter in HTTP mode: a signed message reaches the sink once, a forged one never", async () => {
    const dingtalk = await startDingTalk(cleanups);
    const context = await dingtalkAdapter(cleanups, dingtalk, { mode: "http" });
    const message = dingtalk.message({ sender: alice, text: "by callback" });
    expect((await context.adapter.webhook({ headers: signed(Date.now()), rawBody: Buffer.from(JSON.stringify(message)) })).status).toBe(503);
    await context.adapter.start(context.sink);
    expect(dingtalk.gatewayCalls).toBe(0);
    const post = (sign: Record<string, string>, payload: unknown) => context.adapter.webhook({ headers: sign, rawBody: Buffer.from(JSON.stringify(payload)) });
    expect((await post(signed(Date.now()), message)).status).toBe(200);
    expect((await post(signed(Date.now()), message)).status).toBe(200);
    expect((await post(signed(Date.now(), "forged"), dingtalk.message({ sender: alice, text: "forged" }))).status).toBe(401);
    expect(context.events.map((event) => event.text)).toEqual(["by callback"]);
  });
});
