/**
 * Session loads on the Redis store, batched and incremental.
 *
 * Batched: the sessions a worker loads in one moment (one turn of the event loop) are read in one
 * load-sessions-many-1.lua call, each session's meta and history in one step. A worker starting
 * many turns at once loads many sessions in the same moment under load, which is when Redis's work
 * per message matters; alone, a load costs what it did with a script of its own. The call failing
 * fails every load of it.
 *
 * Incremental: a turn reads its session's whole history, and most of it is what the last load of
 * that session here read. A history is only appended to between rewrites (compact, reset, which
 * change the session's stamp), so this process keeps the entries it parsed per session, and a load
 * asks Redis only for the entries past those, with the stamp they were read under; a rewrite (or
 * any doubt) brings the whole history back. Another worker's appends come with the rest. Bounded
 * by the entries' size (the session used longest ago goes first): a worker serving more chats than
 * fit reads some whole, as before.
 */
import type { RedisClient } from "../redis/client.js";
import { type LuaScript, runScript } from "../redis/scripts.js";
import type { HistoryEntry } from "./store.js";

/** At most this many sessions per call (their histories come back in one reply). */
const MOST_SESSIONS_PER_CALL = 100;
/** The parsed entries kept across loads, by the size of their stored text. */
const HELD_BYTES = 32 * 1024 * 1024;

/** A session as loaded: its meta's field/value list (empty when unknown), its history, and its score in `sessions` (its last change; null when unknown). */
export interface LoadedSession {
  metaFields: string[];
  history: HistoryEntry[];
  updatedAt: string | null;
}

/** What this process holds of a session's history: the stamp it was read under, how many stored entries, what they parsed to. */
export interface Held {
  stamp: string;
  count: number;
  entries: HistoryEntry[];
  bytes: number;
}

interface PendingLoad {
  key: string;
  held?: Held;
  resolve: (session: LoadedSession) => void;
  reject: (error: unknown) => void;
}

export interface SessionLoadsOptions {
  redis: RedisClient;
  script: LuaScript;
  /** What every session's keys start with (`<prefix><key>:meta`). */
  sessionPrefix: string;
  /** ZSET session key → updatedAt. */
  sessions: string;
  /** Stored entry texts to entries (an invalid text is reported, by its index in the history, and left out); the first text is entry `from`. */
  parse: (key: string, texts: string[], from: number) => HistoryEntry[];
  /** Entries held across loads; one per process, shared by its partitions' loads. */
  held: HeldHistories;
}

/** The histories a process holds, least recently loaded first, within HELD_BYTES. */
export class HeldHistories {
  private readonly sessions = new Map<string, Held>();
  private bytes = 0;

  constructor(private readonly limitBytes = HELD_BYTES) {}

  /** What is held of the session (a load keeps what it read again afterwards, which makes it the newest). */
  take(key: string): Held | undefined {
    return this.sessions.get(key);
  }

  keep(key: string, held: Held): void {
    this.drop(key);
    if (held.count === 0 || held.bytes > this.limitBytes / 4) return;
    this.sessions.set(key, held);
    this.bytes += held.bytes;
    for (const [oldest, entry] of this.sessions) {
      if (this.bytes <= this.limitBytes) break;
      this.sessions.delete(oldest);
      this.bytes -= entry.bytes;
    }
  }

  drop(key: string): void {
    const held = this.sessions.get(key);
    if (!held) return;
    this.sessions.delete(key);
    this.bytes -= held.bytes;
  }
}

export class SessionLoads {
  private pending: PendingLoad[] = [];

  constructor(private readonly options: SessionLoadsOptions) {}

  load(key: string): Promise<LoadedSession> {
    return new Promise((resolve, reject) => {
      if (this.pending.length === 0) setImmediate(() => this.flush());
      this.pending.push({ key, held: this.options.held.take(key), resolve, reject });
    });
  }

  private flush(): void {
    const batch = this.pending;
    this.pending = [];
    const { redis, script, sessionPrefix, sessions } = this.options;
    for (let start = 0; start < batch.length; start += MOST_SESSIONS_PER_CALL) {
      const slice = batch.slice(start, start + MOST_SESSIONS_PER_CALL);
      const args = slice.flatMap((load) => [load.key, load.held?.stamp ?? "", load.held?.count ?? 0]);
      runScript(redis, script, [sessions], [sessionPrefix, ...args]).then(
        (reply) => {
          const parts = reply as unknown[];
          const scores = (parts[4 * slice.length] ?? []) as Array<string | null>;
          slice.forEach((load, index) => {
            try {
              const [metaFields, texts, from, stamp] = parts.slice(4 * index, 4 * index + 4) as [string[], string[], number, string];
              load.resolve({ metaFields, history: this.history(load, texts, Number(from), stamp), updatedAt: scores[index] ?? null });
            } catch (error) {
              load.reject(error);
            }
          });
        },
        (error: unknown) => slice.forEach((load) => load.reject(error)),
      );
    }
  }

  /** The session's whole history: what was held and the rest, or what came whole; held for the next load. */
  private history(load: PendingLoad, texts: string[], from: number, stamp: string): HistoryEntry[] {
    const { held } = load;
    if (from > 0 && (held === undefined || from !== held.count || stamp !== held.stamp)) {
      this.options.held.drop(load.key);
      throw new Error(`session ${load.key}: Redis sent its history from entry ${from}, which this process does not hold`);
    }
    const fresh = this.options.parse(load.key, texts, from);
    const bytes = texts.reduce((sum, text) => sum + text.length, 0);
    const whole = from > 0 ? { entries: [...held!.entries, ...fresh], bytes: held!.bytes + bytes } : { entries: fresh, bytes };
    this.options.held.keep(load.key, { stamp, count: from + texts.length, entries: whole.entries, bytes: whole.bytes });
    // The caller may change what it gets: copies, not what is held.
    return whole.entries.map((entry) => ({ ...entry }));
  }
}
