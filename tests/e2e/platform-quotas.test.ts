/**
 * Platform quotas end to end: fake Telegram, Discord and Feishu enforce their published limits
 * with their real 429 answers; two gateways over one Redis (both leading every account, as during
 * a hand-over) stream replies into 30 chats of each platform at once, 10 of them in 2 busy groups.
 * No platform answers 429, and every chat shows its final once, with no draft left behind. The same
 * burst sent without the governor is refused, so the fakes' limits bite.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { randomUUID } from "node:crypto";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Fakes, type Gateway, deliveryProblems, planConversations, rateLimitedAnswers, startGateway, startLimitedFakes, streamReplies } from "../support/quota-harness.js";
import { redisUrl } from "../support/redis.js";

const prefix = `countbot-quotas-${randomUUID()}`;
let fakes: Fakes;
let root: string;
const gateways: Gateway[] = [];

beforeAll(async () => {
  root = await mkdtemp(path.join(tmpdir(), "countbot-quotas-"));
  fakes = await startLimitedFakes();
});
afterAll(async () => {
  await Promise.all(gateways.map((gateway) => gateway.close()));
  await fakes.close();
  const redis = new Redis(redisUrl);
  const keys = await redis.keys(`{${prefix}*`);
  if (keys.length > 0) await redis.del(...keys);
  await redis.quit();
  await rm(root, { recursive: true, force: true });
});

describe("platform quotas", () => {
  it("the fakes refuse a burst over a chat's budget with the platform's 429", async () => {
    fakes.telegram.addChat({ id: 99, type: "private", first_name: "Burst" });
    const answers = await Promise.all(
      [1, 2, 3].map((index) =>
        fetch(`${fakes.telegram.apiRoot}/bot4242:quota-token/sendMessage`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ chat_id: 99, text: `burst ${index}` }) }).then(
          async (response) => ({ status: response.status, body: (await response.json()) as { parameters?: { retry_after?: number } } }),
        ),
      ),
    );
    expect(answers.map((answer) => answer.status).sort()).toEqual([200, 429, 429]);
    expect(answers.find((answer) => answer.status === 429)!.body.parameters?.retry_after).toBeGreaterThanOrEqual(1);
    expect(fakes.telegram.rateLimited).toBe(2);
  });

  it("two gateways stream 30 chats per platform at once: no 429, every final shown once, no draft left", async () => {
    const before = rateLimitedAnswers(fakes);
    const conversations = planConversations(fakes, 30, 10, 2);
    for (const index of [0, 1]) gateways.push(await startGateway({ fakes, redisUrl, prefix, dataDir: path.join(root, `gateway-${index}`) }));
    for (const gateway of gateways) expect(gateway.runtimes.map((runtime) => runtime.health().state)).toEqual(["up", "up", "up"]);
    const length = 1_800;
    await streamReplies(gateways[0]!.bus, conversations, { drafts: 4, draftEveryMs: 300, length });
    const deadline = Date.now() + 120_000;
    while (deliveryProblems(fakes, conversations, length).length > 0 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 250));
    expect(deliveryProblems(fakes, conversations, length)).toEqual([]);
    const after = rateLimitedAnswers(fakes);
    expect({ telegram: after.telegram - before.telegram, discord: after.discord - before.discord, feishu: after.feishu - before.feishu }).toEqual({ telegram: 0, discord: 0, feishu: 0 });
    expect(gateways.reduce((sum, gateway) => sum + gateway.counters.rateLimited, 0)).toBe(0);
    // The busy groups' budgets made the governors hold sends back, and both gateways delivered.
    expect(gateways.reduce((sum, gateway) => sum + gateway.counters.deferred, 0)).toBeGreaterThan(0);
    for (const gateway of gateways) expect(gateway.runtimes.reduce((sum, runtime) => sum + runtime.health().messagesOut, 0)).toBeGreaterThan(0);
  }, 180_000);
});
