/**
 * The WeCom access token shared by every gateway over the chat event log: against real Redis (the
 * log every gateway shares) and in memory, one gettoken for many askers, a refusal fetched anew
 * once, a failed fetch not holding the others off.
 */
import { randomUUID } from "node:crypto";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createSharedToken } from "../../../channels/wecom/shared-token.js";
import { createMemoryChatEventLog } from "../../../src/gateway/kit/index.js";
import type { ChatEventLog } from "../../../src/gateway/kit/index.js";
import { createRedisChatEventLog } from "../../../src/store/redis-chat-event-log.js";
import { deleteKeys, redisUrl } from "../../support/redis.js";

let redis: Redis;
const prefix = `countbot-wecom-token-${randomUUID()}`;

beforeAll(() => {
  redis = new Redis(redisUrl);
});
afterAll(async () => {
  await deleteKeys(redis, prefix);
  await redis.quit();
});

function fetcher() {
  let calls = 0;
  let release: () => void = () => undefined;
  const gate = new Promise<void>((resolve) => (release = resolve));
  return {
    get calls() {
      return calls;
    },
    release,
    fetchToken: async () => {
      calls += 1;
      await gate;
      return { token: `token-${calls}`, expiresInS: 7_200 };
    },
  };
}

for (const kind of ["redis", "memory"] as const) {
  describe(`shared WeCom token (${kind})`, () => {
    const logOf = (): ChatEventLog => (kind === "redis" ? createRedisChatEventLog({ redis, prefix, channel: "wecom" }) : shared);
    let shared: ChatEventLog;

    it("fetches once for many askers in several gateways, and they all get it", async () => {
      shared = createMemoryChatEventLog();
      const key = `token-${randomUUID()}`;
      const source = fetcher();
      // Each "gateway" has its own log client and its own token cache: only the log is shared.
      const gateways = Array.from({ length: 4 }, () => createSharedToken({ log: logOf(), key, fetchToken: source.fetchToken, pollMs: 20 }));
      const asked = gateways.flatMap((gateway) => [gateway.get(), gateway.get()]);
      await new Promise((resolve) => setTimeout(resolve, 100));
      source.release();
      expect(new Set(await Promise.all(asked))).toEqual(new Set(["token-1"]));
      expect(source.calls).toBe(1);
      // A gateway started later reads it from the log.
      const later = createSharedToken({ log: logOf(), key, fetchToken: source.fetchToken });
      expect(await later.get()).toBe("token-1");
      expect(source.calls).toBe(1);
      await Promise.all([...gateways, later].map((gateway) => gateway.close()));
    });

    it("fetches a refused token anew once, whichever gateway learns of it", async () => {
      shared = createMemoryChatEventLog();
      const key = `token-${randomUUID()}`;
      const source = fetcher();
      source.release();
      const [first, second] = [createSharedToken({ log: logOf(), key, fetchToken: source.fetchToken, pollMs: 20 }), createSharedToken({ log: logOf(), key, fetchToken: source.fetchToken, pollMs: 20 })];
      expect(await first.get()).toBe("token-1");
      expect(await second.get()).toBe("token-1");
      await first.invalidate("token-1");
      expect(await first.get()).toBe("token-2");
      // The other gateway still holds token-1 in memory until WeCom refuses it there too.
      await second.invalidate("token-1");
      expect(await second.get()).toBe("token-2");
      expect(source.calls).toBe(2);
    });

    it("waits for another gateway's claim, and fetches itself once that claim lapsed (its holder died)", async () => {
      shared = createMemoryChatEventLog();
      const key = `token-${randomUUID()}`;
      const log = logOf();
      let clock = 5_000_000;
      await log.append(key, JSON.stringify({ kind: "claim", by: "a-gateway-that-died", until: clock + 15_000 }));
      const source = fetcher();
      source.release();
      const token = createSharedToken({ log, key, fetchToken: source.fetchToken, pollMs: 10, now: () => clock });
      const asked = token.get();
      // The clock stands still: however long this takes, the claim holds and nobody fetches.
      for (let turn = 0; turn < 5; turn++) await new Promise((resolve) => setTimeout(resolve, 15));
      expect(source.calls).toBe(0);
      clock += 15_001;
      expect(await asked).toBe("token-1");
      expect(source.calls).toBe(1);
    });

    it("refreshes a token before it expires, and a failed fetch lets the next asker try", async () => {
      shared = createMemoryChatEventLog();
      const key = `token-${randomUUID()}`;
      let clock = 1_000_000;
      let calls = 0;
      let fail = true;
      const token = createSharedToken({
        log: logOf(),
        key,
        now: () => clock,
        marginMs: 300_000,
        fetchToken: async () => {
          calls += 1;
          if (fail) throw new Error("gettoken refused");
          return { token: `t${calls}`, expiresInS: 7_200 };
        },
      });
      await expect(token.get()).rejects.toThrow("gettoken refused");
      fail = false;
      expect(await token.get()).toBe("t2");
      clock += 7_200_000 - 300_000 - 1;
      expect(await token.get()).toBe("t2");
      clock += 2;
      expect(await token.get()).toBe("t3");
    });
  });
}
