/**
 * Long-lived signals (a worker's stop signal, a turn's cancel signal) must not collect a listener
 * per model call or per idle wait: that leaked ~2 KB per call before the fix.
 */
import { getEventListeners } from "node:events";
import { randomUUID } from "node:crypto";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createRedisBus } from "../../../src/bus/redis-bus.js";
import { createOpenAICompatibleProvider } from "../../../src/providers/openai-compatible.js";
import { type FakeOpenAIServer, startFakeOpenAI } from "../../support/fake-openai-server.js";
import { deleteKeys, redisUrl } from "../../support/redis.js";

let server: FakeOpenAIServer;
beforeAll(async () => {
  server = await startFakeOpenAI({ script: () => ({ text: "ok" }) });
});
afterAll(async () => {
  await server.close();
});

describe("signal listeners", () => {
  it("a finished model call leaves no listener on the caller's signal", async () => {
    const provider = createOpenAICompatibleProvider({ name: "openai", apiKey: "sk-test", baseURL: server.url });
    const caller = new AbortController();
    for (let index = 0; index < 5; index += 1) {
      for await (const part of provider.stream({ model: "m", messages: [{ role: "user", content: "hi" }], signal: caller.signal })) void part;
    }
    expect(getEventListeners(caller.signal, "abort")).toHaveLength(0);
  });

  it("an idle Redis claim wait leaves no listener on the worker's stop signal", async () => {
    const redis = new Redis(redisUrl, { maxRetriesPerRequest: null });
    const prefix = `countbot-signal-${randomUUID()}`;
    const bus = createRedisBus({ redis, prefix });
    const stopping = new AbortController();
    for (let index = 0; index < 3; index += 1) expect(await bus.claimSession({ timeoutMs: 30, signal: stopping.signal })).toBeNull();
    expect(getEventListeners(stopping.signal, "abort")).toHaveLength(0);
    await bus.close();
    await deleteKeys(redis, prefix);
    await redis.quit();
  });
});
