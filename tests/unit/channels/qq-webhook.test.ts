/**
 * The QQ webhook: the Ed25519 key from the AppSecret as QQ derives it (QQ's own documented example),
 * every request verified before its body is read, the address validation (op 13) answered only to
 * a signed request, events handed on and acknowledged with op 12.
 */
import pino from "pino";
import { describe, expect, it } from "vitest";
import { createCallbackHandler, keyOfSecret, signWith } from "../../../channels/qq/webhook-handler.js";
import { qqSign } from "../../support/qq-events.js";

const SECRET = "qqWebhookUnitSecret0123456789abc";
const silent = pino({ level: "silent" });

function handler(overrides: { accepting?: boolean; fail?: boolean; now?: number } = {}) {
  const handled: Array<{ type: string; eventId: string | undefined; data: unknown }> = [];
  const handle = createCallbackHandler({
    appSecret: SECRET,
    accepting: () => overrides.accepting ?? true,
    handle: async (type, eventId, data) => {
      if (overrides.fail) throw new Error("the bus is away");
      handled.push({ type, eventId, data });
    },
    logger: silent,
    now: () => overrides.now ?? Date.now(),
    toleranceSeconds: 600,
  });
  return { handle, handled };
}

function signed(body: string, options: { secret?: string; timestamp?: string } = {}) {
  const timestamp = options.timestamp ?? String(Math.floor(Date.now() / 1000));
  return { headers: { "x-signature-timestamp": timestamp, "x-signature-ed25519": qqSign(options.secret ?? SECRET, `${timestamp}${body}`) }, rawBody: Buffer.from(body) };
}

const event = JSON.stringify({ op: 0, s: 3, t: "C2C_MESSAGE_CREATE", id: "C2C_MESSAGE_CREATE:abc", d: { id: "msg1", content: "hi", author: { user_openid: "U1" } } });

describe("QQ webhook", () => {
  it("derives the key QQ derives: QQ's documented validation example", () => {
    const { privateKey } = keyOfSecret("DG5g3B4j9X2KOErG");
    expect(signWith(privateKey, "1725442341Arq0D5A61EgUu4OxUvOp")).toBe(
      "87befc99c42c651b3aac0278e71ada338433ae26fcb24307bdc5ad38c1adc2d01bcfcadc0842edac85e85205028a1132afe09280305f13aa6909ffc2d652c706",
    );
  });

  it("answers a signed address validation with the signature of event_ts + plain_token", async () => {
    const { handle } = handler();
    const answer = await handle(signed(JSON.stringify({ op: 13, d: { plain_token: "tokenXYZ", event_ts: "1700000000" } })));
    expect(answer).toEqual({ status: 200, body: { plain_token: "tokenXYZ", signature: qqSign(SECRET, "1700000000tokenXYZ") } });
  });

  it("signs nothing for a stranger: an unsigned or forged validation is refused", async () => {
    const { handle } = handler();
    const body = JSON.stringify({ op: 13, d: { plain_token: "chosen", event_ts: "by-the-attacker" } });
    expect((await handle({ headers: {}, rawBody: Buffer.from(body) })).status).toBe(401);
    expect((await handle(signed(body, { secret: "anotherSecret0123456789abcdefghi" }))).status).toBe(401);
  });

  it("refuses a forged signature before reading the body, and a stale timestamp", async () => {
    const { handle, handled } = handler();
    expect((await handle(signed(event, { secret: "anotherSecret0123456789abcdefghi" }))).status).toBe(401);
    expect((await handle(signed("{not json", { secret: "anotherSecret0123456789abcdefghi" }))).status).toBe(401);
    const tampered = signed(event);
    expect((await handle({ ...tampered, rawBody: Buffer.from(event.replace('"hi"', '"ho"')) })).status).toBe(401);
    expect((await handle(signed(event, { timestamp: String(Math.floor(Date.now() / 1000) - 3_600) }))).status).toBe(401);
    expect(handled).toEqual([]);
    // Signed but not JSON: now the body is read, and named.
    expect(await handle(signed("{not json"))).toEqual({ status: 400, body: { error: "body: expected JSON" } });
  });

  it("hands a signed message event on and acknowledges it with op 12", async () => {
    const { handle, handled } = handler();
    expect(await handle(signed(event))).toEqual({ status: 200, body: { op: 12, d: 0 } });
    expect(handled).toEqual([{ type: "C2C_MESSAGE_CREATE", eventId: "C2C_MESSAGE_CREATE:abc", data: { id: "msg1", content: "hi", author: { user_openid: "U1" } } }]);
    // Another kind of event is acknowledged and not handed on.
    expect((await handle(signed(JSON.stringify({ op: 0, t: "GUILD_CREATE", id: "x", d: {} })))).status).toBe(200);
    expect(handled).toHaveLength(1);
  });

  it("answers 503 while stopped and 500 when the event could not be taken, so QQ tries again", async () => {
    expect((await handler({ accepting: false }).handle(signed(event))).status).toBe(503);
    expect((await handler({ fail: true }).handle(signed(event))).status).toBe(500);
  });
});
