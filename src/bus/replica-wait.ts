/**
 * `redis.acceptAfterReplicas`: a write counts once N replicas have it (WAIT), so a failover to one
 * of them cannot lose it. WAIT covers every write the connection made before it, so one WAIT serves
 * every caller whose write was sent before it went out; a caller arriving while one is in flight
 * takes the next one (its write may have left after the WAIT in flight).
 */
import { BusError } from "../errors.js";
import type { RedisClient } from "../redis/client.js";

export interface ReplicaWait {
  /** Resolves once `replicas` replicas have every write of the connection so far; else BusError "unavailable". */
  (): Promise<void>;
}

export function replicaWait(redis: Pick<RedisClient, "wait">, replicas: number, timeoutMs: number): ReplicaWait {
  if (replicas <= 0) return () => Promise.resolve();
  let inFlight: Promise<void> | undefined;
  let next: Promise<void> | undefined;
  const send = (): Promise<void> => {
    const waiting = redis.wait(replicas, timeoutMs).then((confirmed) => {
      if (confirmed < replicas) {
        throw new BusError(`only ${confirmed} of ${replicas} replicas confirmed the write within ${timeoutMs} ms (redis.acceptAfterReplicas): retry with the same id`, "unavailable");
      }
    });
    inFlight = waiting;
    void waiting
      .catch(() => undefined)
      .finally(() => {
        if (inFlight === waiting) inFlight = undefined;
      });
    return waiting;
  };
  return () => {
    if (!inFlight) return send();
    next ??= inFlight
      .catch(() => undefined)
      .then(() => {
        next = undefined;
        return send();
      });
    return next;
  };
}
