/** `/usage` at the gateway: answered there when it can read the budgets, else queued for a worker like `/status`. */
import pino from "pino";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { createMemoryBus } from "../../../src/bus/memory-bus.js";
import type { MessageBus } from "../../../src/bus/message-bus.js";
import type { InboundMessage } from "../../../src/bus/message.js";
import { createAdmission } from "../../../src/gateway/admission.js";
import type { PlatformEvent } from "../../../src/gateway/channel.js";

let bus: MessageBus;
beforeEach(() => {
  bus = createMemoryBus();
});
afterEach(async () => {
  await bus.close();
});

function event(id: string, text: string, chatId = "-500"): PlatformEvent {
  return {
    eventId: id,
    chatId,
    chatType: "group",
    senderId: "42",
    senderIsBot: false,
    text,
    mentionsBot: true,
    repliesToBot: false,
    platformMessageId: `p${id}`,
    media: [],
    receivedAt: 0,
  };
}

function gate(usage?: (scope: { person: string; chat: string }) => Promise<string>, linked: Record<string, string> = {}) {
  const replies: string[] = [];
  const admission = createAdmission({
    channel: "telegram",
    bus,
    store: { pairing: { isApproved: async () => true } as never },
    adapter: { typing: async () => undefined },
    reply: async (reply) => void replies.push(reply.text),
    policy: { allowFrom: ["42"], groupPolicy: "mention" },
    logger: pino({ level: "silent" }),
    ...(usage ? { usage } : {}),
    linkedPerson: (speakerId) => linked[speakerId],
  });
  return { admission, replies };
}

async function queued(): Promise<InboundMessage[]> {
  const claims = await bus.claimSessions({ timeoutMs: 10, max: 10 });
  return claims.flatMap((claim) => claim.messages);
}

describe("/usage at the gateway", () => {
  it("answers with the person's and the chat's spend, once per event, and queues nothing", async () => {
    const asked: Array<{ person: string; chat: string }> = [];
    const { admission, replies } = gate(async (scope) => {
      asked.push(scope);
      return "You (telegram:42): 10 tokens of 100 tokens used";
    });
    expect(await admission.handle(event("1", "/usage"))).toBe("command:usage");
    expect(await admission.handle(event("1", "/usage"))).toBe("duplicate");
    expect(asked).toEqual([{ person: "telegram:42", chat: "telegram:-500" }]);
    expect(replies).toEqual(["You (telegram:42): 10 tokens of 100 tokens used"]);
    expect(await queued()).toEqual([]);
  });

  it("queues /usage for a worker when the gateway cannot read the budgets", async () => {
    const { admission, replies } = gate();
    expect(await admission.handle(event("2", "/usage"))).toBe("published");
    expect(replies).toEqual([]);
    expect((await queued()).map((message) => message.content)).toEqual(["/usage"]);
  });
});

describe("a person whose accounts memory.identities links", () => {
  it("is one person for /usage and on every message (metadata.person), whichever account speaks", async () => {
    const asked: string[] = [];
    const { admission } = gate(async (scope) => {
      asked.push(scope.person);
      return "spent";
    }, { "telegram:42": "alice" });
    await admission.handle(event("3", "/usage"));
    expect(asked).toEqual(["alice"]);
    expect(await admission.handle(event("4", "hello"))).toBe("published");
    const [message] = await queued();
    expect(message?.metadata?.person).toBe("alice");
  });

  it("leaves an unlinked account to itself, and never takes a person from the platform event", async () => {
    const { admission } = gate(undefined, { "telegram:7": "bob" });
    await admission.handle({ ...event("5", "hello"), metadata: { person: "mallory" } });
    const [message] = await queued();
    expect(message?.metadata?.person).toBeUndefined();
  });
});
