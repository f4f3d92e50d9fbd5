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
  const { logger } = options;
  /** Reconnect attempts of the outage under way; 0 while connected. */
  let outageAttempts = 0;
  const maxFailedResumes = options.maxFailedResumes ?? 3;
  const stats: ConnectionStats = { reconnects: 0, resumes: 0, identifies: 0, invalidSessions: 0, forcedIdentifies: 0 };
  const shards = new Map<number, ShardState>();
  const stateOf = (shardId: number) => {
    let state = shards.get(shardId);
    if (!state) shards.set(shardId, (state = { resuming: false, failedResumes: 0 }));
    return state;
  };

  /** Empties the shard's session, so the reconnect under way identifies instead of resuming. */
  function forgetSession(shardId: number): void {
    // `sessionInfo` is what @discordjs/ws asks discord.js for before it resumes (private in the typings).
    const shard = client.ws.shards.get(shardId) as unknown as { sessionInfo?: unknown } | undefined;
    if (!shard || !("sessionInfo" in shard)) {
      logger.error({ channel: "discord", shardId }, "discord gateway: cannot drop the session (discord.js changed); resuming goes on");
      return;
    }
    shard.sessionInfo = null;
    stats.forcedIdentifies += 1;
  }

  /** A resume is about to start; the one before it, if any, failed. */
  function resumeStarting(shardId: number, cause: string): void {
    const state = stateOf(shardId);
    if (state.resuming) state.failedResumes += 1;
    state.resuming = true;
    if (state.failedResumes < maxFailedResumes) return;
    logger.warn({ channel: "discord", shardId, failedResumes: state.failedResumes, cause, ...stats }, "discord gateway: resumes keep failing; identifying afresh (events missed meanwhile are lost)");
    forgetSession(shardId);
    state.resuming = false;
    state.failedResumes = 0;
  }

  function healthy(shardId: number, how: string, fields: Record<string, unknown> = {}): void {
    const state = stateOf(shardId);
    state.resuming = false;
    state.failedResumes = 0;
    const attempts = outageAttempts;
    outageAttempts = 0;
    if (attempts === 0) return logger.debug({ channel: "discord", shardId, ...fields, ...stats }, `discord gateway session ${how}`);
    logger.info({ channel: "discord", shardId, attempts, ...fields, ...stats }, `discord gateway connection back (session ${how})`);
    options.onConnectionChange?.(true);
  }

  const onReconnecting = (shardId: number) => {
    stats.reconnects += 1;
    outageAttempts += 1;
    const fields = { channel: "discord", shardId, ...stats, failedResumes: stateOf(shardId).failedResumes };
    if (outageAttempts === 1) {
      logger.warn(fields, "discord gateway connection lost; reconnecting");
      options.onConnectionChange?.(false, "the Discord gateway connection was lost; reconnecting");
    } else {
      logger.debug(fields, "discord gateway still reconnecting");
    }
    resumeStarting(shardId, "reconnect");
  };
  const onResume = (shardId: number, replayed: number) => {
    stats.resumes += 1;
    healthy(shardId, "resumed", { replayed });
  };
  const onReady = (shardId: number) => {
    stats.identifies += 1;
    healthy(shardId, "ready");
  };
  const onDisconnect = (event: { code: number }, shardId: number) => {
    logger.error({ channel: "discord", shardId, code: event.code, ...stats }, "discord gateway closed for good; not reconnecting");
  };
  const onError = (error: Error, shardId: number) => {
    // Each failed attempt of an outage errors too: only the first is worth a line.
    logger[outageAttempts > 1 ? "debug" : "warn"]({ channel: "discord", shardId, error: error.message }, "discord gateway connection error");
  };
  const onDebug = (line: string) => {
    const invalid = invalidSessionLine.exec(line);
    if (!invalid) return;
    const shardId = Number(/Shard (\d+)/.exec(line)?.[1] ?? 0);
    const resumable = invalid[1] === "true";
    stats.invalidSessions += 1;
    logger.warn({ channel: "discord", shardId, resumable, ...stats }, "discord gateway session invalidated");
    // Runs before @discordjs/ws reads the session for its RESUME: forgetting it here turns that into an IDENTIFY.
    if (resumable) resumeStarting(shardId, "invalid session");
    else Object.assign(stateOf(shardId), { resuming: false, failedResumes: 0 });
  };

  client.on(Events.ShardReconnecting, onReconnecting);
  client.on(Events.ShardResume, onResume);
  client.on(Events.ShardReady, onReady);
  client.on(Events.ShardDisconnect, onDisconnect);
  client.on(Events.ShardError, onError);
  client.on(Events.Debug, onDebug);

  return {
    stats: (): ConnectionStats => ({ ...stats }),
    dispose(): void {
      client.off(Events.ShardReconnecting, onReconnecting);
      client.off(Events.ShardResume, onResume);
      client.off(Events.ShardReady, onReady);
      client.off(Events.ShardDisconnect, onDisconnect);
      client.off(Events.ShardError, onError);
      client.off(Events.Debug, onDebug);
    },
  };
}
