/**
 * One suite every platform adapter passes, against its fake platform server driven through the
 * real SDK (as the storage suites run one suite against every store). A platform supplies a
 * driver: how to start its fake and an adapter on it, how a user says something there (with a
 * structured mention of the bot, the platform's own way), what a chat shows, and how the platform
 * refuses a call. Everything else is asserted here, the same for every platform:
 *
 * - send returns the platform's id and edit changes what that message shows;
 * - platform refusals map to ChannelError kinds (rate-limit with `retryAfterMs`, formatting,
 *   forbidden, not-found, network), and no error text holds a credential;
 * - an idempotency key shows a message once where the platform takes one;
 * - events reach the sink in per-chat order, and a failing sink gets the event again;
 * - stop() drains: it resolves only after the event in hand was handed over;
 * - on the shared runtime, mention gating, pairing and allowlists behave alike.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import pino from "pino";
import { afterEach, describe, expect, it } from "vitest";
import { createMemoryBus } from "../../src/bus/memory-bus.js";
import { ChannelError, type ChannelErrorKind } from "../../src/errors.js";
import { createChannelRuntime } from "../../src/gateway/channel-runtime.js";
import type { AdmissionOutcome, AdmissionPolicy, ChannelAdapter, ChannelInstance, PlatformEvent, SendOptions } from "../../src/gateway/kit/index.js";
import { createFileStore } from "../../src/store/file-store.js";

/** The refusals every platform can answer, as the suite names them. */
export type FailureKind = "rate-limit" | "formatting" | "forbidden" | "not-found" | "network";

export interface AdapterRig {
  adapter: ChannelAdapter;
  /** Credentials no error message may hold. */
  secrets: string[];
  /** Sender ids (as the adapter reports them) of the owner and a stranger. */
  owner: string;
  stranger: string;
  /** Chat ids, as the adapter reports them: the owner's and the stranger's private chats, and a group both are in. */
  ownerChat: string;
  strangerChat: string;
  group: string;
  /** A user writes. `mention`: the bot is addressed the platform's structured way. Resolves once the platform has the message. */
  say(from: "owner" | "stranger", where: "private" | "group", text: string, options?: { mention?: boolean }): Promise<void>;
  /** The bot's messages in a chat as they show now, oldest first. */
  shown(chatId: string): string[];
  /**
   * The next `operation` is refused the way this platform refuses for `kind`, the refusal's text
   * echoing a credential where the platform lets it say anything. False: the platform never
   * refuses that way (Discord has no markup to refuse).
   */
  failNext(operation: "send" | "edit", kind: FailureKind): boolean;
  /** Whether the platform takes an idempotency key (Discord's nonce, Feishu's uuid). */
  idempotent: boolean;
  /**
   * What a send needs for the platform to let its message be edited, where not every message can
   * be (DingTalk edits only the card a streamed reply opens: a draft's key). Default: nothing.
   */
  editableSend?: Partial<SendOptions>;
  /**
   * False for a platform whose bots cannot edit what they sent (QQ): edit must refuse with a
   * ChannelError and change nothing, and only sends are refused on demand. Default true.
   */
  editable?: boolean;
  /** Waits for a condition on the fake's clock of events. */
  waitFor<T>(predicate: () => T | undefined | null | false, what: string): Promise<T>;
  close(): Promise<void>;
}

export interface AdapterDriver {
  name: string;
  /** A fresh fake platform and an adapter on it, not started. */
  rig(): Promise<AdapterRig>;
}

const failureKinds: FailureKind[] = ["rate-limit", "formatting", "forbidden", "not-found", "network"];

export function adapterConformance(driver: AdapterDriver): void {
  const cleanups: Array<() => Promise<void>> = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });

  async function rigged(): Promise<AdapterRig> {
    const rig = await driver.rig();
    cleanups.push(() => rig.close());
    return rig;
  }

  async function started(rig: AdapterRig, sink: (event: PlatformEvent) => Promise<AdmissionOutcome>): Promise<void> {
    await rig.adapter.start(sink);
    cleanups.push(() => rig.adapter.stop());
  }

  const recorder = () => {
    const events: PlatformEvent[] = [];
    return { events, sink: async (event: PlatformEvent): Promise<AdmissionOutcome> => (events.push(event), "published") };
  };

  function caught(promise: Promise<unknown>): Promise<unknown> {
    return promise.then(
      () => undefined,
      (error: unknown) => error,
    );
  }

  describe(`${driver.name} adapter conformance`, () => {
    it("send returns the platform's id and edit changes what that message shows", async () => {
      const rig = await rigged();
      await started(rig, recorder().sink);
      const first = await rig.adapter.send(rig.ownerChat, "first text", { format: "plain", ...rig.editableSend });
      const second = await rig.adapter.send(rig.ownerChat, "second text", { format: "plain" });
      expect(first.platformMessageId).toEqual(expect.any(String));
      expect(second.platformMessageId).not.toBe(first.platformMessageId);
      if (rig.editable === false) {
        const refused = await caught(rig.adapter.edit(rig.ownerChat, first.platformMessageId, "first text, edited", { format: "plain" }));
        expect(refused).toBeInstanceOf(ChannelError);
        expect(rig.shown(rig.ownerChat)).toEqual(["first text", "second text"]);
        return;
      }
      await rig.adapter.edit(rig.ownerChat, first.platformMessageId, "first text, edited", { format: "plain" });
      expect(rig.shown(rig.ownerChat)).toEqual(["first text, edited", "second text"]);
    });

    it("maps the platform's refusals to ChannelError kinds, rate limits with a wait, and no credential in any message", async () => {
      const rig = await rigged();
      await started(rig, recorder().sink);
      const { platformMessageId } = await rig.adapter.send(rig.ownerChat, "to be edited", { format: "plain", ...rig.editableSend });
      const seen: Array<[string, ChannelErrorKind | undefined]> = [];
      for (const operation of ["send", "edit"] as const) {
        for (const kind of failureKinds) {
          if (!rig.failNext(operation, kind)) continue;
          const call = operation === "send" ? rig.adapter.send(rig.ownerChat, "refused", { format: "plain" }) : rig.adapter.edit(rig.ownerChat, platformMessageId, "refused", { format: "plain" });
          const error = await caught(call);
          // Refused markup an adapter may recover from itself (Feishu falls back from a card to
          // plain text): then the text must show. Otherwise it reports the refusal.
          if (kind === "formatting" && error === undefined) {
            expect(rig.shown(rig.ownerChat), `${operation} formatting recovered`).toContain("refused");
            seen.push([`${operation} ${kind}`, "formatting"]);
            continue;
          }
          expect(error, `${operation} ${kind}`).toBeInstanceOf(ChannelError);
          const channelError = error as ChannelError;
          seen.push([`${operation} ${kind}`, channelError.kind]);
          if (kind === "rate-limit") expect(channelError.retryAfterMs, `${operation} rate-limit wait`).toBeGreaterThan(0);
          for (const secret of rig.secrets) {
            expect(channelError.message).not.toContain(secret);
            expect(String(channelError.stack)).not.toContain(secret);
          }
        }
      }
      expect(seen.length).toBeGreaterThanOrEqual(rig.editable === false ? 5 : 8);
      for (const [what, kind] of seen) expect(kind, what).toBe(what.split(" ")[1]);
    });

    it("shows a message sent twice with one idempotency key once, where the platform takes a key", async () => {
      const rig = await rigged();
      await started(rig, recorder().sink);
      await rig.adapter.send(rig.ownerChat, "once only", { format: "plain", idempotencyKey: "reply-1#0" });
      await rig.adapter.send(rig.ownerChat, "once only", { format: "plain", idempotencyKey: "reply-1#0" });
      await rig.adapter.send(rig.ownerChat, "another", { format: "plain", idempotencyKey: "reply-1#1" });
      const shown = rig.shown(rig.ownerChat);
      if (rig.idempotent) expect(shown).toEqual(["once only", "another"]);
      else expect(shown).toEqual(["once only", "once only", "another"]);
    });

    it("hands a chat's events to the sink in order, one at a time", async () => {
      const rig = await rigged();
      const order: string[] = [];
      let inSink = 0;
      let overlapped = false;
      await started(rig, async (event) => {
        inSink += 1;
        if (inSink > 1) overlapped = true;
        // The first event takes a while: a later one must not overtake it.
        if (event.text === "message 1") for (let turn = 0; turn < 50; turn++) await new Promise((resolve) => setImmediate(resolve));
        order.push(event.text);
        inSink -= 1;
        return "published";
      });
      for (let index = 1; index <= 5; index++) await rig.say("owner", "private", `message ${index}`);
      await rig.waitFor(() => order.length === 5, "five events");
      expect(order).toEqual(["message 1", "message 2", "message 3", "message 4", "message 5"]);
      expect(overlapped).toBe(false);
    });

    it("gives an event the sink failed to take to the sink again", async () => {
      const rig = await rigged();
      const received: string[] = [];
      let failed = false;
      await started(rig, async (event) => {
        received.push(event.text);
        if (!failed) {
          failed = true;
          throw new Error("the bus is briefly away");
        }
        return "published";
      });
      await rig.say("owner", "private", "take me");
      await rig.waitFor(() => received.length >= 2, "the event again");
      expect(received.slice(0, 2)).toEqual(["take me", "take me"]);
    });

    it("stop() resolves only after the event in hand was handed over", async () => {
      const rig = await rigged();
      let release: () => void = () => undefined;
      const gate = new Promise<void>((resolve) => (release = resolve));
      let entered = false;
      let finished = false;
      await rig.adapter.start(async () => {
        entered = true;
        await gate;
        finished = true;
        return "published";
      });
      await rig.say("owner", "private", "slow one");
      await rig.waitFor(() => entered, "the sink entered");
      let stopped = false;
      const stopping = rig.adapter.stop().then(() => (stopped = true));
      for (let turn = 0; turn < 20; turn++) await new Promise((resolve) => setImmediate(resolve));
      expect(stopped).toBe(false);
      release();
      await stopping;
      expect(finished).toBe(true);
    });

    it("on the shared runtime: a stranger is paired, a group answers only when addressed, the owner is let in", async () => {
      const rig = await rigged();
      const root = await mkdtemp(path.join(tmpdir(), "countbot-adapter-suite-"));
      const store = createFileStore({ dataDir: path.join(root, "data") });
      const bus = createMemoryBus();
      cleanups.push(async () => {
        await bus.close();
        await store.close();
        await rm(root, { recursive: true, force: true });
      });
      const outcomes: Array<[string, string]> = [];
      const policy: AdmissionPolicy = { allowFrom: [rig.owner], groupPolicy: "mention", pairing: true, rateLimit: false };
      const channel: ChannelInstance = { adapter: rig.adapter, policy };
      const runtime = createChannelRuntime({
        channel,
        bus,
        store,
        logger: pino({ level: "silent" }),
        metrics: { inbound: (_channel, outcome) => void outcomes.push(["event", outcome]), outbound: () => undefined, deliveryRetried: () => undefined },
      });
      await runtime.start();
      cleanups.push(() => runtime.stop());

      const outcome = async (count: number) => (await rig.waitFor(() => outcomes[count - 1], `outcome #${count}`))[1];
      await rig.say("stranger", "private", "hello?");
      expect(await outcome(1)).toBe("pairing");
      const pairingText = await rig.waitFor(() => rig.shown(rig.strangerChat).at(-1), "the pairing message");
      expect(pairingText).toMatch(/pair/i);
      await rig.say("owner", "group", "chatting among ourselves");
      expect(await outcome(2)).toBe("ignored:not-addressed");
      await rig.say("owner", "group", "a question for you", { mention: true });
      expect(await outcome(3)).toBe("published");
      await rig.say("stranger", "group", "me too", { mention: true });
      expect(await outcome(4)).toBe("ignored:not-allowed");
      await rig.say("owner", "private", "a direct question");
      expect(await outcome(5)).toBe("published");
      const claim = await bus.claimSession({ timeoutMs: 1_000 });
      const claimed = [claim];
      const next = await bus.claimSession({ timeoutMs: 1_000 });
      claimed.push(next);
      const contents = claimed.flatMap((item) => item?.messages.map((message) => message.content) ?? []).sort();
      expect(contents).toEqual(["a direct question", "a question for you"]);
    });
  });
}
