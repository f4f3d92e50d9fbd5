/** The Events API over HTTP: Slack's `v0` signature checked before the body is read, then URL checks, events and slash commands. */
import pino from "pino";
import { describe, expect, it } from "vitest";
import type { EventCallback, SlashCommand } from "../../../channels/slack/payloads.js";
import { createCallbackHandler, signatureOf } from "../../../channels/slack/webhook-handler.js";
import { signRequest } from "../../support/slack-events.js";

const SECRET = "8f742231b10e8888abcd99yyyzzz85a5";
const NOW = 1_531_420_618_000;

function rig(accepting = true) {
  const events: Array<{ callback: EventCallback; retry: number | undefined }> = [];
  const commands: SlashCommand[] = [];
  const handler = createCallbackHandler({
    signingSecret: SECRET,
    accepting: () => accepting,
    onEvent: (callback, retry) => void events.push({ callback, retry }),
    onCommand: (command) => (commands.push(command), { response_type: "ephemeral", text: "ok" }),
    logger: pino({ level: "silent" }),
    now: () => NOW,
  });
  const post = (body: string, headers: Record<string, string>) => handler({ headers: { "content-type": "application/json", ...headers }, rawBody: Buffer.from(body) });
  const signed = (body: string, extra: Record<string, string> = {}, secret = SECRET, timestamp = String(NOW / 1000)) => post(body, { ...signRequest(body, secret, timestamp), ...extra });
  return { events, commands, handler, post, signed };
}

const event = JSON.stringify({ type: "event_callback", event_id: "Ev01", event_time: NOW / 1000, event: { type: "message", channel: "D1", user: "U1", text: "hi", ts: "1.000001" } });

describe("Slack request signing", () => {
  it("computes Slack's documented example signature", () => {
    // The example of Slack's "Verifying requests from Slack" page.
    const body = "token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c";
    expect(signatureOf("1531420618", body, SECRET)).toBe("v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503");
  });

  it("refuses a forged, unsigned or stale request before reading its body", async () => {
    const { events, post, signed } = rig();
    expect((await signed(event, {}, "another-secret")).status).toBe(401);
    expect((await post(event, {})).status).toBe(401);
    // Not JSON, and still a 401: the signature is checked first.
    expect(await post("{not json", { "x-slack-signature": "v0=deadbeef", "x-slack-request-timestamp": String(NOW / 1000) })).toEqual({ status: 401, body: { error: "bad signature" } });
    expect(await signed(event, {}, SECRET, String(NOW / 1000 - 301))).toEqual({ status: 401, body: { error: "stale request" } });
    expect((await signed(event, {}, SECRET, String(NOW / 1000 + 301))).status).toBe(401);
    expect(events).toEqual([]);
  });

  it("answers the URL check, takes an event with its retry count, and names a bad body", async () => {
    const { events, signed } = rig();
    expect(await signed(JSON.stringify({ type: "url_verification", challenge: "abc123" }))).toEqual({ status: 200, body: { challenge: "abc123" } });
    expect((await signed(event, { "x-slack-retry-num": "2" })).status).toBe(200);
    expect(events.map((item) => [item.callback.event_id, item.retry])).toEqual([["Ev01", 2]]);
    const bad = await signed(JSON.stringify({ type: "event_callback", event: { type: "message" } }));
    expect(bad.status).toBe(400);
    expect(JSON.stringify(bad.body)).toMatch(/event_id|type/);
    expect((await signed("{not json")).status).toBe(400);
  });

  it("takes a signed slash command form, and answers 503 while stopped, but for the URL check", async () => {
    const { commands, handler } = rig();
    const form = new URLSearchParams({ command: "/team", text: "Analysts look", user_id: "U1", channel_id: "C1", trigger_id: "t.1" }).toString();
    const answer = await handler({ headers: { "content-type": "application/x-www-form-urlencoded", ...signRequest(form, SECRET, String(NOW / 1000)) }, rawBody: Buffer.from(form) });
    expect(answer.status).toBe(200);
    expect(commands).toMatchObject([{ command: "/team", text: "Analysts look", channel_id: "C1" }]);
    const stopped = rig(false);
    expect((await stopped.signed(event)).status).toBe(503);
    // The console's URL check, though, is answered by a gateway that does not lead.
    expect(await stopped.signed(JSON.stringify({ type: "url_verification", challenge: "c1" }))).toEqual({ status: 200, body: { challenge: "c1" } });
  });
});
