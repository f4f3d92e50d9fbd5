/**
 * `npm run bench -- quotas`: 300 chats (100 of them in 5 busy groups) each stream a long reply at
 * once on Telegram, Discord and Feishu, through two gateways over one Redis (both leading every
 * account, as during a hand-over), against fake platforms that enforce the published limits with
 * real 429 answers. Each gateway (./quota-gateway-process.ts) and the platforms
 * (./quota-fakes-process.ts) run in a process of their own. Prints per platform: 429s
 * the platform sent, finals shown once (no draft left), the time from the finals' publishing to the
 * last one shown, and beside it the least time the limits allow for the finals alone
 * (BENCH_QUOTA_CHATS and BENCH_QUOTA_GROUPED change the sizes, BENCH_QUOTA_DRAFTS the drafts each
 * reply streams before its final: 6, 0 for finals alone; BENCH_QUOTA_TRACE=1 prints the calls'
 * arrivals per second and a busy group's calls).
 */
import { randomUUID } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { Redis } from "ioredis";
import { type Conversation, type FakeEndpoints, type Gateway, PLATFORMS, type Platform, finalsBoundMs, openBus, streamReplies } from "../tests/support/quota-harness.js";
import { type IpcChild, startIpcChild } from "./ipc-child.js";

const redisUrl = process.env.REDIS_URL ?? "redis://127.0.0.1:6379";

interface Watched {
  doneAt: Partial<Record<Platform, number>>;
  answered429: Record<Platform, number>;
  problems: string[];
  busyGroupGapMs: number;
}

export async function benchQuotas(): Promise<void> {
  const chats = Number(process.env.BENCH_QUOTA_CHATS ?? 300);
  const grouped = Number(process.env.BENCH_QUOTA_GROUPED ?? 100);
  const drafts = Number(process.env.BENCH_QUOTA_DRAFTS ?? 6);
  const groups = 5;
  const length = 1_800;
  const prefix = `countbot-bench-quotas-${randomUUID()}`;
  const root = await mkdtemp(path.join(tmpdir(), "countbot-bench-quotas-"));
  const fakes = await startIpcChild(new URL("./quota-fakes-process.ts", import.meta.url), "the fake platforms");
  const gateways: IpcChild[] = [];
  const publisher = openBus(redisUrl, prefix);
  try {
    const endpoints = fakes.ready.endpoints as FakeEndpoints;
    const { conversations } = (await fakes.call("plan", { chats, grouped, groups })) as { conversations: Conversation[] };
    for (const index of [0, 1]) {
      const gateway = await startIpcChild(new URL("./quota-gateway-process.ts", import.meta.url), `gateway ${index}`);
      gateways.push(gateway);
      await gateway.call("start", { fakes: endpoints, redisUrl, prefix, dataDir: path.join(root, `gateway-${index}`) });
    }
    // Published as the workers would, from outside the gateways.
    const finalsAt = await streamReplies(publisher.bus, conversations, { drafts, draftEveryMs: 500, length });
    const watched = (await fakes.call("watch", { finalsAt, length })) as unknown as Watched;
    console.log(`\nquotas: ${chats} chats (${grouped} in ${groups} groups) per platform, a ${length}-character reply each, ${gateways.length} gateways over Redis, each gateway and the platforms in a process of their own`);
    console.log("platform   429s  finals shown once  time to last final  limits allow  ratio");
    for (const platform of PLATFORMS) {
      const bound = finalsBoundMs(platform, conversations, 1);
      const done = watched.doneAt[platform];
      const took = done === undefined ? Number.NaN : done - finalsAt;
      const shown = conversations.length - watched.problems.filter((problem) => problem.startsWith(`${platform} `)).length;
      const ratio = bound > 0 ? (took / bound).toFixed(2) : "-";
      console.log(`${platform.padEnd(10)} ${String(watched.answered429[platform]).padStart(4)}  ${`${shown}/${conversations.length}`.padStart(17)}  ${`${(took / 1000).toFixed(1)} s`.padStart(18)}  ${`${(bound / 1000).toFixed(1)} s`.padStart(12)}  ${ratio.padStart(5)}`);
    }
    console.log(`telegram: a busy group's calls arrived ${(watched.busyGroupGapMs / 1000).toFixed(2)} s apart on average, where its limit allows one a second (a chat's calls go one at a time, each 1 s after the previous one's answer)`);
    const counters = await Promise.all(gateways.map(async (gateway) => (await gateway.call("counters")).counters as Gateway["counters"]));
    console.log(`governor: sends deferred ${counters.map((counter) => counter.deferred).join(" + ")}, drafts left out ${counters.map((counter) => counter.draftsSkipped).join(" + ")}, 429s seen ${counters.map((counter) => counter.rateLimited).join(" + ")}`);
    if (watched.problems.length > 0) console.log(`problems: ${watched.problems.slice(0, 5).join("; ")}`);
  } finally {
    await Promise.all(gateways.map((gateway) => gateway.close()));
    await publisher.close();
    await fakes.close();
    const redis = new Redis(redisUrl);
    const keys = await redis.keys(`{${prefix}*`);
    if (keys.length > 0) await redis.del(...keys);
    await redis.quit();
    await rm(root, { recursive: true, force: true });
  }
}
