/**
 * The cluster client CountBot makes (connectRedis with redis.cluster) against a Redis Cluster of
 * the test's own. With auto-pipelining on (the bus's connection), ioredis groups a tick's commands
 * by the node of each command's first key; a command whose key it cannot find (XGROUP: the key
 * follows the subcommand) was grouped by its subcommand's slot, sent in a pipeline to the wrong
 * shard, and its MOVED came back raw whenever another write shared that pipeline: a gateway on a
 * fresh cluster then failed to start ("a channel failed to start: MOVED 15949 ...").
 */
import { randomUUID } from "node:crypto";
import type { Cluster } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type OwnCluster, startRedisCluster } from "../../support/redis-cluster.js";

let cluster: OwnCluster;
let redis: Cluster;

beforeAll(async () => {
  cluster = await startRedisCluster(3);
  redis = cluster.connectAsCountbot();
  await redis.ping();
}, 60_000);

afterAll(async () => {
  redis?.disconnect();
  await cluster?.stop();
});

/** The shard (its address) that owns `key`'s slot. */
async function shardOf(key: string): Promise<string | undefined> {
  const slot = Number(await redis.call("CLUSTER", "KEYSLOT", key));
  return redis.slots[slot]?.join(",");
}

/** A key of this test whose slot the shard of `other` owns (`same`), or another shard. */
async function keyBeside(other: string, same: boolean): Promise<string> {
  const shard = await shardOf(other);
  for (let attempt = 0; attempt < 1_000; attempt += 1) {
    const key = `{countbot-test-${randomUUID()}}:key`;
    if (((await shardOf(key)) === shard) === same) return key;
  }
  throw new Error("no key found for the wanted shard");
}

describe("the cluster client with auto-pipelining", () => {
  it("creates a stream's consumer group on the stream's shard while other writes leave in the same tick", async () => {
    // The stream on another shard than the one ioredis took the subcommand's slot for; a write to
    // that one in the same tick.
    const stream = await keyBeside("CREATE", false);
    const beside = await keyBeside("CREATE", true);
    const [created, set] = await Promise.all([redis.xgroup("CREATE", stream, "delivery", "0", "MKSTREAM"), redis.set(beside, "1")]);
    expect([created, set]).toEqual(["OK", "OK"]);
    const groups = (await redis.xinfo("GROUPS", stream)) as unknown[][];
    expect(groups.map((group) => group[1])).toEqual(["delivery"]);
    await Promise.all([redis.del(stream), redis.del(beside)]);
  });
});
