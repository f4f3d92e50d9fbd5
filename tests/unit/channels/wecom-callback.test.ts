/**
 * The WeCom application callback: WeCom's crypto as the fake server does it (its own
 * implementation) opened by the channel's (WeCom's `@wecom/crypto` package), and the order of the
 * checks: the signature before anything of the body is decrypted or parsed.
 */
import pino from "pino";
import { describe, expect, it, vi } from "vitest";
import { createCallbackHandler } from "../../../channels/wecom/callback-handler.js";
import { openEnvelope, signatureMatches } from "../../../channels/wecom/callback-crypto.js";
import { encryptedField, parseAppMessage } from "../../../channels/wecom/callback-xml.js";
import type { AppMessage } from "../../../channels/wecom/callback-xml.js";
import { newEncodingAESKey, wecomDecrypt, wecomEncrypt, wecomSignature } from "../../support/wecom-callback-crypto.js";

const CORP = "ww0123456789abcdef";
const TOKEN = "wecom-callback-token";
const KEY = newEncodingAESKey();
const silent = pino({ level: "silent" });

const messageXml = (text: string) =>
  `<xml><ToUserName><![CDATA[${CORP}]]></ToUserName><FromUserName><![CDATA[alice]]></FromUserName><CreateTime>${Math.floor(Date.now() / 1000)}</CreateTime><MsgType><![CDATA[text]]></MsgType><Content><![CDATA[${text}]]></Content><MsgId>7412345678901234567</MsgId><AgentID>1000002</AgentID></xml>`;

function signed(encrypted: string, overrides: { token?: string; timestamp?: string } = {}) {
  const timestamp = overrides.timestamp ?? String(Math.floor(Date.now() / 1000));
  const nonce = "n0nce";
  return new URLSearchParams({ msg_signature: wecomSignature(overrides.token ?? TOKEN, timestamp, nonce, encrypted), timestamp, nonce });
}

const envelope = (encrypted: string) => Buffer.from(`<xml><ToUserName><![CDATA[${CORP}]]></ToUserName><Encrypt><![CDATA[${encrypted}]]></Encrypt><AgentID><![CDATA[1000002]]></AgentID></xml>`);

function handler(overrides: Partial<Parameters<typeof createCallbackHandler>[0]> = {}) {
  const taken: AppMessage[] = [];
  const open = vi.fn(openEnvelope);
  const parse = vi.fn(parseAppMessage);
  const handle = createCallbackHandler({ corpId: CORP, token: TOKEN, encryptKey: KEY, accepting: () => true, handle: async (message) => void taken.push(message), logger: silent, open, parse, ...overrides });
  return { handle, taken, open, parse };
}

describe("WeCom callback crypto", () => {
  it("opens what WeCom's side encrypted and the other way round, for this corp only", () => {
    const encrypted = wecomEncrypt(KEY, "你好, WeCom", CORP);
    expect(openEnvelope(KEY, encrypted, CORP)).toBe("你好, WeCom");
    expect(() => openEnvelope(KEY, encrypted, "wwanothercorp")).toThrow(/another corp/);
    expect(() => openEnvelope(newEncodingAESKey(), encrypted, CORP)).toThrow();
    expect(() => openEnvelope(KEY, "not*base64", CORP)).toThrow(/AES blocks/);
    expect(signatureMatches(TOKEN, "1", "2", encrypted, wecomSignature(TOKEN, "1", "2", encrypted))).toBe(true);
    expect(signatureMatches(TOKEN, "1", "2", encrypted, wecomSignature("other", "1", "2", encrypted))).toBe(false);
    // The test side's strict decrypt reads what the package would write.
    expect(wecomDecrypt(KEY, wecomEncrypt(KEY, "x".repeat(100), CORP))).toEqual({ message: "x".repeat(100), receiveId: CORP });
  });

  it("takes the Encrypt field by its pattern alone, and parses the decrypted message with MsgId as text", () => {
    expect(encryptedField("<xml><Encrypt><![CDATA[abc+/=]]></Encrypt></xml>")).toBe("abc+/=");
    expect(encryptedField("<xml><Encrypt>abc</Encrypt></xml>")).toBe("abc");
    expect(encryptedField("<xml><Encrypt><![CDATA[<b>]]></Encrypt></xml>")).toBeUndefined();
    const parsed = parseAppMessage(messageXml("hi"));
    expect(parsed).toMatchObject({ success: true, data: { FromUserName: "alice", MsgId: "7412345678901234567", Content: "hi", MsgType: "text" } });
    expect(parseAppMessage("<xml><MsgType>text</MsgType></xml>")).toMatchObject({ success: false, error: expect.stringMatching(/^message\.(ToUserName|FromUserName)/) });
  });
});

describe("WeCom callback handler", () => {
  it("answers the URL verification with the decrypted echostr", async () => {
    const { handle } = handler();
    const echostr = wecomEncrypt(KEY, "echo-1234", CORP);
    const query = signed(echostr);
    query.set("echostr", echostr);
    expect(await handle({ method: "GET", query, rawBody: Buffer.alloc(0) })).toEqual({ status: 200, body: "echo-1234" });
    const forged = signed(echostr, { token: "guessed" });
    forged.set("echostr", echostr);
    expect((await handle({ method: "GET", query: forged, rawBody: Buffer.alloc(0) })).status).toBe(401);
  });

  it("takes a signed message and answers an empty 200 without waiting for it to be handled", async () => {
    let release: () => void = () => undefined;
    const held = new Promise<void>((resolve) => (release = resolve));
    const taken: AppMessage[] = [];
    const { handle } = handler({ handle: async (message) => (taken.push(message), held) });
    const encrypted = wecomEncrypt(KEY, messageXml("hello"), CORP);
    expect(await handle({ method: "POST", query: signed(encrypted), rawBody: envelope(encrypted) })).toEqual({ status: 200, body: "" });
    expect(taken.map((message) => message.Content)).toEqual(["hello"]);
    release();
  });

  it("refuses a forged signature before decrypting or parsing anything", async () => {
    const { handle, taken, open, parse } = handler();
    const encrypted = wecomEncrypt(KEY, messageXml("forged"), CORP);
    const forged = await handle({ method: "POST", query: signed(encrypted, { token: "guessed-token" }), rawBody: envelope(encrypted) });
    expect(forged).toEqual({ status: 401, body: "bad signature" });
    // Signed by someone else over another text than the body's: refused the same way.
    const swapped = await handle({ method: "POST", query: signed(wecomEncrypt(KEY, messageXml("other"), CORP)), rawBody: envelope(encrypted) });
    expect(swapped.status).toBe(401);
    const stale = await handle({ method: "POST", query: signed(encrypted, { timestamp: String(Math.floor(Date.now() / 1000) - 7_200) }), rawBody: envelope(encrypted) });
    expect(stale).toEqual({ status: 401, body: "stale timestamp" });
    expect(open).not.toHaveBeenCalled();
    expect(parse).not.toHaveBeenCalled();
    expect(taken).toEqual([]);
  });

  it("refuses a signed envelope for another corp, says what is wrong with a bad message, and 503 while stopped", async () => {
    const { handle, taken, parse } = handler();
    const foreign = wecomEncrypt(KEY, messageXml("for someone else"), "wwanothercorp");
    expect(await handle({ method: "POST", query: signed(foreign), rawBody: envelope(foreign) })).toMatchObject({ status: 401, body: expect.stringMatching(/another corp/) });
    expect(parse).not.toHaveBeenCalled();
    const broken = wecomEncrypt(KEY, "<xml><MsgType>text</MsgType></xml>", CORP);
    expect((await handle({ method: "POST", query: signed(broken), rawBody: envelope(broken) })).status).toBe(400);
    expect((await handle({ method: "POST", query: new URLSearchParams(), rawBody: Buffer.from("<xml/>") })).status).toBe(400);
    const stopped = handler({ accepting: () => false });
    const encrypted = wecomEncrypt(KEY, messageXml("later"), CORP);
    expect((await stopped.handle({ method: "POST", query: signed(encrypted), rawBody: envelope(encrypted) })).status).toBe(503);
    expect(taken).toEqual([]);
  });
});
