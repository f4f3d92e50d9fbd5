/** The `redis` section: one Redis, Sentinel or Cluster, the key prefix, leases, and what an accepted message means under replication. */
import { z } from "zod";

export const RedisSchema = z
  .strictObject({
    url: z.string().optional().describe("redis:// URL. Unset: single process, in-memory bus, file store."),
    prefix: z.string().regex(/^[\w:.-]+$/, "letters, digits, _ : . - only").default("countbot").describe("Key prefix; all keys live under the hash tag {prefix}."),
    leaseTtlMs: z
      .number()
      .int()
      .min(1_000)
      .max(600_000)
      .optional()
      .describe(
        "Over Redis (default 2000), a worker's liveness, which its leases on chats live by: renewed every third of it, one command per worker however many chats it holds. A crashed worker's chats move to another worker after at most this long plus half a second; a worker stalled longer than this loses its chats (fenced: it cannot reply for them). In one process, without Redis, a turn's lease (default 30000: no other worker could take it over).",
      ),
    connectTimeoutMs: z.number().int().min(100).max(600_000).default(5_000).describe("At start-up, a process that cannot reach Redis within this long exits with the reason."),
    evictionPolicy: z.enum(["warn", "refuse"]).default("warn").describe("When Redis' maxmemory-policy is not noeviction (it may silently drop queued messages): log a loud warning, or refuse to start."),
    sentinels: z
      .array(z.strictObject({ host: z.string().min(1), port: z.number().int().min(1).max(65_535) }))
      .min(1)
      .optional()
      .describe(
        "Redis Sentinel nodes: the primary is asked of them (by `sentinelMaster`) and followed through a failover. `redis.url` still switches Redis on and gives the password, user and database; its host and port are not used then.",
      ),
    cluster: z
      .array(z.strictObject({ host: z.string().min(1), port: z.number().int().min(1).max(65_535) }))
      .min(1)
      .optional()
      .describe(
        "Redis Cluster seed nodes (any few; the rest are discovered). Every script touches keys of one hash tag (src/redis/keys.ts), so the bus, the store, memory and BullMQ work on a cluster. `redis.url` still switches Redis on and gives the password and user; its host and port are not used then. Not with `sentinels`.",
      ),
    partitions: z
      .number()
      .int()
      .min(1)
      .max(1_024)
      .default(1)
      .describe(
        "Partitions of the bus and of the sessions' history: each chat lives in one (by its key), under a hash tag of its own (`{prefix:p<k>}`), with its own ready queue, leases and reply streams. On a Redis Cluster they spread over the shards (a few per shard); on one Redis 1 is the cheapest. Every process of a deployment uses the same number: Redis remembers it, and a process started with another refuses to start (what is queued or stored under one layout is not found under another).",
      ),
    sentinelMaster: z.string().min(1).default("mymaster").describe("The name the sentinels monitor the primary under (`sentinel monitor <name> ...`)."),
    acceptAfterReplicas: z
      .number()
      .int()
      .min(0)
      .max(16)
      .default(0)
      .describe(
        "Replicas that must have a message (WAIT) before it counts as accepted (the platform or the HTTP 202 is answered), and a reply's delivery mark before the reply goes out. 0: accepted once the primary has it, so a failover can lose what the primary had not yet replicated (asynchronous replication: usually well under a second). 1 or more: nothing accepted is lost and no reply sent twice by a failover, for one replica round trip more per message (WAITs of messages arriving together are shared). Not with `cluster`: WAIT confirms one node's writes, not those of the shard each message went to.",
      ),
    acceptTimeoutMs: z.number().int().min(10).max(60_000).default(2_000).describe("How long a message waits for `acceptAfterReplicas` replicas; past it the message is refused as unavailable (the platform or client retries it, and the retry is recognised)."),
  })
  .prefault({});
