/**
 * The Feishu webhook: verified before anything else (signature in constant time, timestamp window,
 * decryption, the verification token), the challenge answered, and a forged, unsigned, stale or
 * wrongly encrypted request refused with 401 and nothing handed on.
 */
import { afterEach, describe, expect, it } from "vitest";
import { createWebhookHandler } from "../../../channels/feishu/webhook-handler.js";
import pino from "pino";
import { signedRequest } from "../../support/feishu-webhook-signer.js";
import type { FakeUser } from "../../support/fake-feishu-server.js";
import { type Cleanup, ENCRYPT_KEY, feishuAdapter, startFeishu } from "./feishu-support.js";

const cleanups: Cleanup[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

const alice: FakeUser = { openId: "ou_alice000000000000000000000000001", name: "Alice" };
const P2P = "oc_p2p0000000000000000000000000001";
const TOKEN = "verification-token-1";

async function webhookAdapter(overrides: { verificationToken?: string } = {}) {
  const feishu = await startFeishu(cleanups);
  const context = await feishuAdapter(cleanups, feishu, { mode: "webhook", encryptKey: ENCRYPT_KEY, ...overrides });
  await context.adapter.start(context.sink);
  const deliver = (payload: unknown, sign: Parameters<typeof signedRequest>[1] = { encryptKey: ENCRYPT_KEY }) => {
    const request = signedRequest(payload, sign);
    return context.adapter.webhook({ headers: request.headers, rawBody: Buffer.from(request.rawBody) });
  };
  return { feishu, deliver, ...context };
}

describe("Feishu webhook", () => {
  it("takes a signed, encrypted event and a signed plaintext one", async () => {
    const { feishu, deliver, events } = await webhookAdapter();
    const encrypted = await deliver(feishu.event({ chatId: P2P, chatType: "p2p", sender: alice, text: "encrypted hello" }));
    const plaintext = await deliver(feishu.event({ chatId: P2P, chatType: "p2p", sender: alice, text: "plain hello" }), { encryptKey: ENCRYPT_KEY, encrypt: false });
    expect([encrypted.status, plaintext.status]).toEqual([200, 200]);
    expect(events.map((event) => event.text)).toEqual(["encrypted hello", "plain hello"]);
  });

  it("answers the url_verification challenge, encrypted or carrying the verification token", async () => {
    const { deliver } = await webhookAdapter({ verificationToken: TOKEN });
    const challenge = { type: "url_verification", challenge: "c-123", token: TOKEN };
    expect(await deliver(challenge, { encryptKey: ENCRYPT_KEY, signKey: null })).toEqual({ status: 200, body: { challenge: "c-123" } });
    expect(await deliver(challenge, { encryptKey: ENCRYPT_KEY, encrypt: false, signKey: null })).toEqual({ status: 200, body: { challenge: "c-123" } });
    const forged = await deliver({ ...challenge, token: "guessed" }, { encryptKey: ENCRYPT_KEY, encrypt: false, signKey: null });
    expect(forged.status).toBe(401);
  });

  it("refuses forged, unsigned, stale and wrongly encrypted requests with 401, handing nothing on", async () => {
    const { feishu, deliver, events, adapter } = await webhookAdapter();
    const event = () => feishu.event({ chatId: P2P, chatType: "p2p", sender: alice, text: "must not pass" });
    const answers = [
      await deliver(event(), { encryptKey: ENCRYPT_KEY, signKey: "a-guessed-key" }),
      await deliver(event(), { encryptKey: ENCRYPT_KEY, signKey: null }),
      await deliver(event(), { encryptKey: ENCRYPT_KEY, encrypt: false, signKey: null }),
      await deliver(event(), { encryptKey: ENCRYPT_KEY, timestamp: Math.floor(Date.now() / 1000) - 3_600 }),
      // Signed with the right key but encrypted with another: the SDK's adapter would throw "bad decrypt".
      await deliver(event(), { encryptKey: ENCRYPT_KEY, encryptWith: "another-encrypt-key" }),
    ];
    expect(answers.map((answer) => answer.status)).toEqual([401, 401, 401, 401, 401]);
    // A body changed after signing.
    const request = signedRequest(event(), { encryptKey: ENCRYPT_KEY, encrypt: false });
    const tampered = await adapter.webhook({ headers: request.headers, rawBody: Buffer.from(request.rawBody.replace("must not pass", "must pass")) });
    expect(tampered.status).toBe(401);
    expect(events).toEqual([]);
  });

  it("checks the verification token of events when one is configured", async () => {
    const { feishu, deliver, events } = await webhookAdapter({ verificationToken: TOKEN });
    const withToken = feishu.event({ chatId: P2P, chatType: "p2p", sender: alice, text: "with token" });
    withToken.header.token = TOKEN;
    const without = feishu.event({ chatId: P2P, chatType: "p2p", sender: alice, text: "without token" });
    expect((await deliver(withToken)).status).toBe(200);
    expect((await deliver(without)).status).toBe(401);
    expect(events.map((item) => item.text)).toEqual(["with token"]);
  });

  it("answers 500 when the event could not be handed on, so Feishu delivers it again", async () => {
    const { feishu, adapter } = await webhookAdapter();
    await adapter.stop();
    const failing = await feishuAdapter(cleanups, feishu, { mode: "webhook", encryptKey: ENCRYPT_KEY });
    let fail = true;
    await failing.adapter.start(async (event) => {
      if (fail) throw new Error("bus down");
      return failing.sink(event);
    });
    const envelope = feishu.event({ chatId: P2P, chatType: "p2p", sender: alice, text: "retry me" });
    const request = () => {
      const signed = signedRequest(envelope, { encryptKey: ENCRYPT_KEY });
      return failing.adapter.webhook({ headers: signed.headers, rawBody: Buffer.from(signed.rawBody) });
    };
    expect((await request()).status).toBe(500);
    fail = false;
    expect((await request()).status).toBe(200);
    expect(failing.events.map((event) => event.text)).toEqual(["retry me"]);
  });

  it("compares signatures whatever their length, and needs an encrypt key at all", () => {
    const handler = createWebhookHandler({ encryptKey: ENCRYPT_KEY, accepting: () => true, handle: async () => undefined, logger: pino({ level: "silent" }) });
    const timestamp = String(Math.floor(Date.now() / 1000));
    return Promise.all(
      ["", "00", "z".repeat(200)].map(async (signature) => {
        const answer = await handler({ headers: { "x-lark-signature": signature, "x-lark-request-timestamp": timestamp, "x-lark-request-nonce": "n" }, rawBody: Buffer.from("{}") });
        expect(answer.status).toBe(401);
      }),
    ).then(() => expect(() => createWebhookHandler({ encryptKey: "", accepting: () => true, handle: async () => undefined, logger: pino({ level: "silent" }) })).toThrow());
  });
});
