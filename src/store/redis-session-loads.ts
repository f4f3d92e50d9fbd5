/**
 * Session loads on the Redis store, batched: the sessions a worker loads in one moment (one turn of
 * the event loop) are read in one load-sessions-many-1.lua call, each session's meta and history in
 * one step. A worker starting many turns at once loads many sessions in the same moment under load,
 * which is when Redis's work per message matters; alone, a load costs what it did with a script of
 * its own. The call failing fails every load of it.
 */
import type { RedisClient } from "../redis/client.js";
import { type LuaScript, runScript } from "../redis/scripts.js";

/** At most this many sessions per call (their whole histories come back in one reply). */
const MOST_SESSIONS_PER_CALL = 100;

/** A session as stored: its meta's field/value list (empty when unknown), its history's entries, and its score in `sessions` (its last change; null when unknown). */
export type StoredSession = [metaFields: string[], history: string[], updatedAt: string | null];

interface PendingLoad {
  key: string;
  resolve: (session: StoredSession) => void;
  reject: (error: unknown) => void;
}

export interface SessionLoadsOptions {
  redis: RedisClient;
  script: LuaScript;
  /** What every session's keys start with (`<prefix><key>:meta`). */
  sessionPrefix: string;
  /** ZSET session key → updatedAt. */
  sessions: string;
}

export class SessionLoads {
  private pending: PendingLoad[] = [];

  constructor(private readonly options: SessionLoadsOptions) {}

  load(key: string): Promise<StoredSession> {
    return new Promise((resolve, reject) => {
      if (this.pending.length === 0) setImmediate(() => this.flush());
      this.pending.push({ key, resolve, reject });
    });
  }

  private flush(): void {
    const batch = this.pending;
    this.pending = [];
    const { redis, script, sessionPrefix, sessions } = this.options;
    for (let start = 0; start < batch.length; start += MOST_SESSIONS_PER_CALL) {
      const slice = batch.slice(start, start + MOST_SESSIONS_PER_CALL);
      runScript(redis, script, [sessions], [sessionPrefix, ...slice.map((load) => load.key)]).then(
        (reply) => {
          const parts = reply as Array<Array<string | null>>;
          const scores = parts[2 * slice.length] ?? [];
          slice.forEach((load, index) => load.resolve([parts[2 * index] as string[], parts[2 * index + 1] as string[], scores[index] ?? null]));
        },
        (error: unknown) => slice.forEach((load) => load.reject(error)),
      );
    }
  }
}
