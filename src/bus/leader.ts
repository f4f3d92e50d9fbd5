/**
 * Leader election per platform account: among the gateways, one holds the lease for
 * `telegram:<bot>` (say) and runs that connector; the others wait and take over within a TTL if it
 * dies. In one process (memory) the caller always leads: {@link soleLeader}.
 *
 * The lease has no fencing token, so two processes may lead at once for a while: a leader that
 * stalled past its TTL (a long GC pause, a frozen VM, a partition) goes on until its next renew
 * fails, up to TTL/3 later, and only then does onLost stop its connector. That overlap is harmless
 * because no delivery step trusts there to be one leader:
 * - Outbound, nothing sent twice: each chunk of a final is marked with SET NX
 *   `sent:<outId>#<chunk>` (bus.markDelivered) just before it goes out, so whichever leader marks
 *   a chunk first sends it and the other skips it.
 * - Outbound, nothing lost: the consumer group of `out:<channel>` hands each entry to one
 *   consumer, and an entry left pending by either leader is re-claimed by the other (XAUTOCLAIM)
 *   and acknowledged only once delivered.
 * - Inbound, nothing queued twice: both may poll the platform and publish the same update; the
 *   `seen:<channel>:<platformEventId>` SET NX in the enqueue script drops the second.
 * What an overlap can cost: two replies of one chat handed to different leaders inside the
 * window may land out of order, and a draft may be shown by both (drafts are not deduped).
 * tests/unit/leader.test.ts runs two dispatchers on one channel at once to check the above.
 */
import { randomUUID } from "node:crypto";
import type { RedisClient } from "../redis/client.js";
import { loadScript, runScript } from "../redis/scripts.js";

const scriptsDirectory = new URL("./lua/", import.meta.url);
const renewScript = loadScript(scriptsDirectory, "renew-leader-1.lua");
const resignScript = loadScript(scriptsDirectory, "resign-leader-1.lua");

export interface Leadership {
  /** Resolves once this process leads `name`; null when stopped first. */
  acquired: Promise<boolean>;
  /** Whether this process leads right now. */
  readonly leading: boolean;
  /** Called when the lease is lost (a long pause, Redis trouble): stop the connector. */
  onLost(handler: () => void): void;
  resign(): Promise<void>;
}

/** Stands for the lease `name`: how the composition root hands leader election to the gateway and jobs. */
export type ElectLeader = (name: string) => Leadership;

export interface LeaderOptions {
  name: string;
  ttlMs?: number;
  /** Redis to elect through. */
  redis: RedisClient;
  /** The `{prefix}` of the deployment's keys. */
  prefix?: string;
}

/** One process, no one to share with: it always leads, at once. */
export const soleLeader: ElectLeader = () => ({ acquired: Promise.resolve(true), leading: true, onLost: () => undefined, resign: async () => undefined });

export function electLeader(options: LeaderOptions): Leadership {
  const { redis } = options;
  const key = `{${options.prefix ?? "countbot"}}:leader:${options.name}`;
  const ttlMs = options.ttlMs ?? 15_000;
  const holder = randomUUID();
  const lostHandlers: Array<() => void> = [];
  let leading = false;
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  let resolveAcquired!: (value: boolean) => void;
  const acquired = new Promise<boolean>((resolve) => (resolveAcquired = resolve));

  const attempt = async () => {
    if (stopped) return;
    let held = false;
    try {
      held = (await runScript(redis, renewScript, [key], [holder, ttlMs])) === 1;
    } catch {
      held = false;
    }
    if (held && !leading) {
      leading = true;
      resolveAcquired(true);
    } else if (!held && leading) {
      leading = false;
      for (const handler of lostHandlers) handler();
    }
    // Renew at a third of the TTL; followers retry at the same pace.
    timer = setTimeout(() => void attempt(), Math.max(100, Math.floor(ttlMs / 3)));
    timer.unref();
  };
  void attempt();

  return {
    acquired,
    get leading() {
      return leading;
    },
    onLost: (handler) => void lostHandlers.push(handler),
    async resign() {
      stopped = true;
      if (timer) clearTimeout(timer);
      resolveAcquired(false);
      if (leading) await runScript(redis, resignScript, [key], [holder]).catch(() => undefined);
      leading = false;
    },
  };
}
