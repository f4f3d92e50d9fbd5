/**
 * The bus conformance suite on a Redis Cluster of three shards (the test's own, on loopback): the
 * bus's keys share the hash tag `{prefix}`, so each script touches one slot, and the cluster client
 * routes it there. Partitioned (`redis.partitions`), each partition's keys share `{prefix:p<k>}`,
 * and the partitions' slots spread over the shards. The client is the one the bus gets in
 * production: connectRedis's cluster client with auto-pipelining.
 */
import { randomUUID } from "node:crypto";
import type { Cluster } from "ioredis";
import { afterAll, beforeAll } from "vitest";
import { createRedisBus } from "../../src/bus/redis-bus.js";
import { createRedisBusOf } from "../../src/bus/partitioned-bus.js";
import type { RedisClient } from "../../src/redis/client.js";
import { runBusSuite } from "./bus.suite.js";
import { type OwnCluster, startRedisCluster } from "../support/redis-cluster.js";

let cluster: OwnCluster;
let client: Cluster;

beforeAll(async () => {
  cluster = await startRedisCluster(3);
  client = cluster.connectAsCountbot();
}, 60_000);

afterAll(async () => {
  client?.disconnect();
  await cluster?.stop();
});

runBusSuite("redis cluster", async (options) => {
  const prefix = `countbot-test-${randomUUID()}`;
  const redis: RedisClient = client;
  const bus = createRedisBus({ ...options, redis, prefix, redeliveryDelayMs: 20 });
  return {
    bus,
    cleanup: async () => {
      await bus.close();
      await cluster.deleteKeys(prefix);
    },
  };
});

runBusSuite("redis cluster, 6 partitions", async (options) => {
  const prefix = `countbot-test-${randomUUID()}`;
  const redis: RedisClient = client;
  const bus = createRedisBusOf({ ...options, redis, prefix, redeliveryDelayMs: 20, partitions: 6 });
  return {
    bus,
    cleanup: async () => {
      await bus.close();
      await cluster.deleteKeys(prefix);
    },
  };
});
