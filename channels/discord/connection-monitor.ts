/**
 * Watches the gateway connection of a discord.js Client: counts every reconnect, resume, identify
 * and invalidated session, and after `maxFailedResumes` resumes in a row that did not come back
 * makes the next attempt a fresh IDENTIFY. An outage is logged twice, when the connection is lost
 * and when it is back (with the attempts it took), not at every attempt: discord.js retries every
 * half second while Discord cannot be reached. `onConnectionChange` hears the same two moments.
 *
 * What discord.js 14 (@discordjs/ws) does by itself: a dropped socket or a close code that allows it
 * is followed by a RESUME on resume_gateway_url; INVALID_SESSION `false`, close codes 4007/4009 and a
 * resume URL that cannot be reached by a fresh IDENTIFY; INVALID_SESSION `true` by another RESUME
 * at once. It never gives up on resuming: a session that keeps failing to resume (the socket dies
 * at every RESUME, or INVALID_SESSION `true` over and over) is resumed forever, and the events of
 * that time are lost to the bot without a word. Hence the cap here. The session is dropped the way
 * @discordjs/ws drops it itself (its stored session info emptied), so the shard's own reconnect
 * identifies; the process and the Client stay.
 *
 * discord.js 14.28 no longer emits `invalidated`; INVALID_SESSION shows only as a debug line, which
 * is what this reads for it.
 */
import { type Client, Events } from "discord.js";
import type { Logger } from "pino";

export interface ConnectionStats {
  /** Connections lost and retried (each shardReconnecting). */
  reconnects: number;
  resumes: number;
  /** READYs after an IDENTIFY, the first one included. */
  identifies: number;
  invalidSessions: number;
  /** Fresh identifies this monitor forced after failed resumes. */
  forcedIdentifies: number;
}

interface ShardState {
  /** A RESUME is under way (a reconnect with a session, or INVALID_SESSION `true`). */
  resuming: boolean;
  failedResumes: number;
}

const invalidSessionLine = /Invalid session; will attempt to resume: (true|false)/;

export interface MonitorOptions {
  logger: Logger;
  maxFailedResumes?: number;
  /** The connection was lost (false) or is back (true); once per outage each. */
  onConnectionChange?: (connected: boolean, reason?: string) => void;
}

export function monitorConnection(client: Client, options: MonitorOptions) {
  const monitor = new ConnectionMonitor(client, options);
  const listeners = [
    [Events.ShardReconnecting, monitor.onReconnecting],
    [Events.ShardResume, monitor.onResume],
    [Events.ShardReady, monitor.onReady],
    [Events.ShardDisconnect, monitor.onDisconnect],
    [Events.ShardError, monitor.onError],
    [Events.Debug, monitor.onDebug],
  ] as const;
  for (const [event, listener] of listeners) client.on(event, listener as (...args: unknown[]) => void);
  return {
    stats: (): ConnectionStats => ({ ...monitor.stats }),
    dispose(): void {
      for (const [event, listener] of listeners) client.off(event, listener as (...args: unknown[]) => void);
    },
  };
}

/** The monitor's state and its answer to each gateway event; `monitorConnection` wires the listeners. */
class ConnectionMonitor {
  readonly stats: ConnectionStats = { reconnects: 0, resumes: 0, identifies: 0, invalidSessions: 0, forcedIdentifies: 0 };
  /** Reconnect attempts of the outage under way; 0 while connected. */
  private outageAttempts = 0;
  private readonly maxFailedResumes: number;
  private readonly shards = new Map<number, ShardState>();
  private readonly logger: Logger;

  constructor(
    private readonly client: Client,
    private readonly options: MonitorOptions,
  ) {
    this.logger = options.logger;
    this.maxFailedResumes = options.maxFailedResumes ?? 3;
  }

  readonly onReconnecting = (shardId: number): void => {
    this.stats.reconnects += 1;
    this.outageAttempts += 1;
    const fields = { channel: "discord", shardId, ...this.stats, failedResumes: this.stateOf(shardId).failedResumes };
    if (this.outageAttempts === 1) {
      this.logger.warn(fields, "discord gateway connection lost; reconnecting");
      this.options.onConnectionChange?.(false, "the Discord gateway connection was lost; reconnecting");
    } else {
      this.logger.debug(fields, "discord gateway still reconnecting");
    }
    this.resumeStarting(shardId, "reconnect");
  };

  readonly onResume = (shardId: number, replayed: number): void => {
    this.stats.resumes += 1;
    this.healthy(shardId, "resumed", { replayed });
  };

  readonly onReady = (shardId: number): void => {
    this.stats.identifies += 1;
    this.healthy(shardId, "ready");
  };

  readonly onDisconnect = (event: { code: number }, shardId: number): void => {
    this.logger.error({ channel: "discord", shardId, code: event.code, ...this.stats }, "discord gateway closed for good; not reconnecting");
  };

  readonly onError = (error: Error, shardId: number): void => {
    // Each failed attempt of an outage errors too: only the first is worth a line.
    this.logger[this.outageAttempts > 1 ? "debug" : "warn"]({ channel: "discord", shardId, error: error.message }, "discord gateway connection error");
  };

  readonly onDebug = (line: string): void => {
    const invalid = invalidSessionLine.exec(line);
    if (!invalid) return;
    const shardId = Number(/Shard (\d+)/.exec(line)?.[1] ?? 0);
    const resumable = invalid[1] === "true";
    this.stats.invalidSessions += 1;
    this.logger.warn({ channel: "discord", shardId, resumable, ...this.stats }, "discord gateway session invalidated");
    // Runs before @discordjs/ws reads the session for its RESUME: forgetting it here turns that into an IDENTIFY.
    if (resumable) this.resumeStarting(shardId, "invalid session");
    else Object.assign(this.stateOf(shardId), { resuming: false, failedResumes: 0 });
  };

  private stateOf(shardId: number): ShardState {
    let state = this.shards.get(shardId);
    if (!state) this.shards.set(shardId, (state = { resuming: false, failedResumes: 0 }));
    return state;
  }

  /** Empties the shard's session, so the reconnect under way identifies instead of resuming. */
  private forgetSession(shardId: number): void {
    // `sessionInfo` is what @discordjs/ws asks discord.js for before it resumes (private in the typings).
    const shard = this.client.ws.shards.get(shardId) as unknown as { sessionInfo?: unknown } | undefined;
    if (!shard || !("sessionInfo" in shard)) {
      this.logger.error({ channel: "discord", shardId }, "discord gateway: cannot drop the session (discord.js changed); resuming goes on");
      return;
    }
    shard.sessionInfo = null;
    this.stats.forcedIdentifies += 1;
  }

  /** A resume is about to start; the one before it, if any, failed. */
  private resumeStarting(shardId: number, cause: string): void {
    const state = this.stateOf(shardId);
    if (state.resuming) state.failedResumes += 1;
    state.resuming = true;
    if (state.failedResumes < this.maxFailedResumes) return;
    this.logger.warn({ channel: "discord", shardId, failedResumes: state.failedResumes, cause, ...this.stats }, "discord gateway: resumes keep failing; identifying afresh (events missed meanwhile are lost)");
    this.forgetSession(shardId);
    state.resuming = false;
    state.failedResumes = 0;
  }

  private healthy(shardId: number, how: string, fields: Record<string, unknown> = {}): void {
    const state = this.stateOf(shardId);
    state.resuming = false;
    state.failedResumes = 0;
    const attempts = this.outageAttempts;
    this.outageAttempts = 0;
    if (attempts === 0) return this.logger.debug({ channel: "discord", shardId, ...fields, ...this.stats }, `discord gateway session ${how}`);
    this.logger.info({ channel: "discord", shardId, attempts, ...fields, ...this.stats }, `discord gateway connection back (session ${how})`);
    this.options.onConnectionChange?.(true);
  }
}
