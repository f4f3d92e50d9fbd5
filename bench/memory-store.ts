/**
 * Long-term memory through the file store (MEMORY.md, what one process uses) and through Redis
 * (what gateways and workers share): reads and appends per second over 200 chats, in one run, and
 * the ratio Redis / file. A turn reads memory once; the model may append a few times.
 */
import { randomUUID } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { Redis } from "ioredis";
import { type MemoryStore, createFileMemoryStore } from "../src/memory/memory.js";
import { createRedisMemoryStore } from "../src/memory/redis-memory.js";

const CHATS = 200;
const APPENDS = 2_000;
const READS = 10_000;

async function measure(store: MemoryStore): Promise<{ appends: number; reads: number }> {
  let started = performance.now();
  for (let index = 0; index < APPENDS; index += 1) await store.append(`bench:${index % CHATS}`, `fact ${index}: the user likes short answers`);
  const appends = APPENDS / ((performance.now() - started) / 1000);
  started = performance.now();
  // Eight turns at once, as a worker runs many chats side by side.
  const lanes = Array.from({ length: 8 }, async (_, lane) => {
    for (let index = lane; index < READS; index += 8) await store.read(`bench:${index % CHATS}`);
  });
  await Promise.all(lanes);
  const reads = READS / ((performance.now() - started) / 1000);
  return { appends, reads };
}

export async function benchMemoryStore(): Promise<void> {
  const workspace = await mkdtemp(path.join(tmpdir(), "countbot-bench-memory-"));
  const redis = new Redis(process.env.REDIS_URL ?? "redis://127.0.0.1:6379");
  const prefix = `countbot-bench-${randomUUID()}`;
  try {
    const file = await measure(createFileMemoryStore({ workspace, scope: "chat" }));
    const shared = await measure(createRedisMemoryStore({ redis, prefix, scope: "chat" }));
    console.log("memory store (200 chats; 2,000 appends, then 10,000 reads 8 at a time)");
    console.log(`  file  (MEMORY.md)  appends/s ${file.appends.toFixed(0).padStart(7)}   reads/s ${file.reads.toFixed(0).padStart(7)}`);
    console.log(`  redis              appends/s ${shared.appends.toFixed(0).padStart(7)}   reads/s ${shared.reads.toFixed(0).padStart(7)}`);
    console.log(`  ratio redis/file   appends ${(shared.appends / file.appends).toFixed(2)}   reads ${(shared.reads / file.reads).toFixed(2)}`);
  } finally {
    const keys = await redis.keys(`{${prefix}}*`);
    if (keys.length > 0) await redis.del(...keys);
    await redis.quit();
    await rm(workspace, { recursive: true, force: true });
  }
}
