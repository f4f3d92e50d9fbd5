/**
 * Inbound publishes on the Redis bus, batched: the messages a gateway accepts in one moment (one
 * turn of the event loop) reach Redis in one enqueue-many-2.lua call, which reads the clock, readies
 * the sessions and wakes the workers once for all of them. Under load a gateway accepts several in
 * the same moment, which is when Redis's work per message matters; alone, a message costs what it
 * did with a script of its own.
 *
 * Each message keeps its own outcome (queued, or a duplicate of an earlier one) and its own replay
 * safety: its dedupe marker holds its id, so the batch resent after a lost reply finds every
 * message of it queued already. The call failing fails every publish of it, as their own calls
 * would have; a caller that retries publishes with the same id.
 */
import { BusError } from "../errors.js";
import type { RedisClient } from "../redis/client.js";
import { type LuaScript, runScript } from "../redis/scripts.js";
import type { InboundMessage } from "./message.js";
import type { BusKeys } from "./redis-keys.js";

/** At most this many messages per call (the script unpacks the readied sessions in one ZADD). */
const MOST_PER_CALL = 500;

/** One message to queue: what the script needs of it. */
export interface InboxEntry {
  sessionKey: string;
  messageId: string;
  /** The message as the mailbox keeps it (JSON). */
  json: string;
  /** Its dedupe marker: of the platform event, or of the message id when it has none. */
  marker: string;
  markerTtlMs: number;
}

interface Pending extends InboxEntry {
  resolve: (queued: boolean) => void;
  reject: (error: unknown) => void;
}

export interface RedisInboxOptions {
  redis: RedisClient;
  keys: BusKeys;
  script: LuaScript;
  /** What the scripts get as "now": the injected clock, or "" for Redis's own. */
  clock: () => string;
  debounceMs: number;
}

export class RedisInbox {
  private pending: Pending[] = [];

  constructor(private readonly options: RedisInboxOptions) {}

  /** Queues the message with the next batch: true when queued (or queued already by this same message), false for a duplicate. */
  enqueue(entry: InboxEntry): Promise<boolean> {
    return new Promise<boolean>((resolve, reject) => {
      if (this.pending.length === 0) setImmediate(() => void this.flush());
      this.pending.push({ ...entry, resolve, reject });
    });
  }

  private async flush(): Promise<void> {
    const batch = this.pending.splice(0, MOST_PER_CALL);
    if (this.pending.length > 0) setImmediate(() => void this.flush());
    const { redis, keys, script, clock, debounceMs } = this.options;
    const messages = batch.flatMap((entry) => [entry.marker, entry.markerTtlMs, entry.messageId, entry.sessionKey, entry.json]);
    let outcomes: unknown[];
    try {
      outcomes = (await runScript(redis, script, [keys.ready, keys.wake], [clock(), debounceMs, keys.mailboxPrefix, ...messages])) as unknown[];
    } catch (error) {
      for (const entry of batch) entry.reject(error);
      return;
    }
    batch.forEach((entry, index) => entry.resolve(outcomes[index] === 1));
  }
}

/** A publish refused at once: Redis is away. */
export function unavailable(status: string): BusError {
  return new BusError(`Redis is not reachable (connection ${status}); nothing was stored`, "unavailable");
}

/** The publish, or BusError "unavailable" when Redis does not confirm it in time (it may still land: retry with the same id). */
export function confirmedWithin<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => reject(new BusError(`Redis did not confirm the message within ${ms} ms`, "unavailable")), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

/** The message as its mailbox keeps it: JSON with the id first (the claim script reads it without decoding the rest). */
export function mailboxJson(message: InboundMessage): string {
  const { id, ...rest } = message;
  return JSON.stringify({ id, ...rest });
}
