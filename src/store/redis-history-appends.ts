/**
 * History appends on the Redis store, batched: the turns a worker saves in one moment (one turn of
 * the event loop) reach Redis in one append-history-many-4.lua call, which reads the clock and the
 * worker's liveness and writes its replay marker once for all of them. A worker running many turns
 * at once saves several in the same moment under load, which is when Redis's work per message
 * matters; alone, an append costs about what it did with a script of its own.
 *
 * Each append keeps its own outcome: one whose lease was lost is refused (an Error whose message
 * starts with LEASE_LOST, as the script's own error reply was) and nothing of it is written. The
 * call failing fails every append of it. A process's appends to one session are serialized by the
 * store, so one session never has two appends in a batch.
 */
import { randomUUID } from "node:crypto";
import type { RedisClient } from "../redis/client.js";
import { type LuaScript, runScript } from "../redis/scripts.js";

/** At most this many entries per call; a batch is cut before the append that would pass it. */
const MOST_ENTRIES_PER_CALL = 5_000;

interface PendingAppend {
  sessionKey: string;
  token: string;
  entries: string[];
  resolve: () => void;
  reject: (error: unknown) => void;
}

export interface HistoryAppendsOptions {
  redis: RedisClient;
  script: LuaScript;
  keys: { sessions: string; own: string; workers: string; write(id: string): string; sessionPrefix: string };
  /** What the script gets as "now": the injected clock, or "" for Redis's own. */
  now: () => number | string;
}

export class HistoryAppends {
  private pending: PendingAppend[] = [];

  constructor(private readonly options: HistoryAppendsOptions) {}

  /** Appends `entries` (JSON) with the next batch; `token` "" for an unfenced write. */
  append(sessionKey: string, token: string, entries: string[]): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      if (this.pending.length === 0) setImmediate(() => void this.flush());
      this.pending.push({ sessionKey, token, entries, resolve, reject });
    });
  }

  private async flush(): Promise<void> {
    const batch = this.take();
    if (this.pending.length > 0) setImmediate(() => void this.flush());
    const { redis, script, keys, now } = this.options;
    const appends = batch.flatMap((append) => [append.sessionKey, append.token, append.entries.length, ...append.entries]);
    let outcomes: unknown[];
    try {
      outcomes = (await runScript(redis, script, [keys.sessions, keys.own, keys.workers, keys.write(randomUUID())], [now(), keys.sessionPrefix, ...appends])) as unknown[];
    } catch (error) {
      for (const append of batch) append.reject(error);
      return;
    }
    batch.forEach((append, index) => {
      const outcome = outcomes[index];
      if (typeof outcome === "number") return append.resolve();
      append.reject(new Error(typeof outcome === "string" && outcome.startsWith("LEASE_LOST") ? outcome : `unexpected reply to a history append: ${String(outcome)}`));
    });
  }

  /** The next batch: at least one append, then as many as fit under MOST_ENTRIES_PER_CALL. */
  private take(): PendingAppend[] {
    let entries = 0;
    let count = 0;
    while (count < this.pending.length && (count === 0 || entries + this.pending[count]!.entries.length <= MOST_ENTRIES_PER_CALL)) {
      entries += this.pending[count]!.entries.length;
      count += 1;
    }
    return this.pending.splice(0, count);
  }
}
