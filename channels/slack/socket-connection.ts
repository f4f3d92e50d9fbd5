/**
 * Socket Mode through the official SDK (`@slack/socket-mode`'s SocketModeClient): it asks
 * `apps.connections.open` (with the app-level token) for a WebSocket URL, waits for Slack's
 * `hello`, answers pings and pings Slack, and hands on each envelope (`events_api`,
 * `slash_commands`, `interactive`) with its `envelope_id`. Each envelope is taken (handed to the
 * inbound queue, which never waits) and then acknowledged at once, well inside Slack's 3 s: an
 * envelope Slack does not see acknowledged comes again with `retry_attempt`, and dedupes.
 *
 * What is added around the SDK:
 * - `apps.connections.open` goes to the configured API root (`clientOptions.slackApiUrl`);
 * - reconnecting: the SDK's own reconnect calls start() again and leaves its failure unhandled
 *   (a rejected promise nobody awaits ends a Node process), so it is off and reconnects are made
 *   here, with back-off, one at a time, never after stop(); Slack's `disconnect` envelope (it
 *   recycles connections every few hours) closes the socket and is one of them;
 * - start() fails when Slack refuses the app token, or `hello` does not come in time;
 * - the SDK logs through pino, its text scrubbed.
 */
import { type LogLevel, SocketModeClient } from "@slack/socket-mode";
import type { Logger } from "pino";
import { ChannelError, errorMessage } from "../../src/errors.js";
import { type Scrub, backoffDelay } from "../../src/gateway/kit/index.js";
import { toChannelError } from "./slack-errors.js";

export type EnvelopeType = "events_api" | "slash_commands" | "interactive";

export interface SocketConnectionOptions {
  appToken: string;
  apiUrl: string;
  /** Takes one envelope's payload; must not wait for the sink (the envelope is acknowledged after it returns). */
  onEnvelope(type: string, body: unknown, retryAttempt: number | undefined): void;
  onConnection?(change: { connected: boolean; reason?: string }): void;
  scrub: Scrub;
  logger: Logger;
  /** How long start() waits for `hello`. Default 20 s. */
  connectTimeoutMs?: number;
}

export interface SocketConnection {
  start(): Promise<void>;
  stop(): Promise<void>;
  /** Connections opened after the first. */
  readonly reconnects: number;
}

interface SlackEventArgs {
  ack(response?: Record<string, unknown>): Promise<void>;
  type: string;
  body: unknown;
  envelope_id?: string;
  retry_num?: number;
}

/** The SDK's logger interface, onto pino; the SDK's debug lines stay at trace. */
export function slackLogger(logger: Logger, scrub: Scrub) {
  const line = (parts: unknown[]) => scrub(parts.map((part) => (part instanceof Error ? part.message : typeof part === "string" ? part : JSON.stringify(part))).join(" "));
  let level = "info" as LogLevel;
  return {
    debug: (...parts: unknown[]) => logger.trace(line(parts)),
    info: (...parts: unknown[]) => logger.debug(line(parts)),
    warn: (...parts: unknown[]) => logger.warn(line(parts)),
    error: (...parts: unknown[]) => logger.warn(line(parts)),
    setLevel: (next: LogLevel) => void (level = next),
    getLevel: () => level,
    setName: () => undefined,
  };
}

/** Takes an envelope, then acknowledges it: one that cannot be read is acknowledged too, or Slack would send it for ever. */
function take({ ack, type, body, envelope_id: envelopeId, retry_num: retryAttempt }: SlackEventArgs, onEnvelope: SocketConnectionOptions["onEnvelope"], log: Logger): void {
  try {
    onEnvelope(type, body, retryAttempt);
  } catch (error) {
    log.warn({ envelopeId, type, error: errorMessage(error) }, "slack envelope not understood; acknowledged and skipped");
  }
  ack().catch((error: unknown) => log.warn({ envelopeId, type, error: errorMessage(error) }, "slack envelope not acknowledged; Slack will send it again"));
}

/** Starts the client; resolves on Slack's hello, rejects when it refused or the hello did not come in time. */
async function helloWithin(client: SocketModeClient, timeoutMs: number): Promise<void> {
  let deadline: NodeJS.Timeout | undefined;
  try {
    await Promise.race([
      client.start(),
      new Promise<never>((_, reject) => {
        deadline = setTimeout(() => reject(new ChannelError(`slack socket mode: no hello within ${timeoutMs} ms`, "slack", { kind: "network" })), timeoutMs);
      }),
    ]);
  } finally {
    clearTimeout(deadline);
  }
}

export function createSocketConnection(options: SocketConnectionOptions): SocketConnection {
  const log = options.logger.child({ channel: "slack", mode: "socket" });
  const clientOptions = { slackApiUrl: options.apiUrl, retryConfig: { retries: 2, minTimeout: 200, maxTimeout: 2_000 }, timeout: 15_000 };
  const client = new SocketModeClient({ appToken: options.appToken, logger: slackLogger(log, options.scrub), autoReconnectEnabled: false, clientOptions });
  let stopped = true;
  let opened = 0;
  let failures = 0;
  let down = false;
  let attempting = false;
  let timer: NodeJS.Timeout | undefined;

  client.on("slack_event", (envelope: SlackEventArgs) => take(envelope, options.onEnvelope, log));

  client.on("disconnected", () => {
    // Before the first hello, start() itself reports the failure.
    if (stopped || opened === 0) return;
    if (!down) {
      down = true;
      options.onConnection?.({ connected: false, reason: "the Socket Mode connection closed" });
    }
    reconnectSoon();
  });

  async function open(): Promise<void> {
    await helloWithin(client, options.connectTimeoutMs ?? 20_000);
    opened += 1;
    failures = 0;
    if (down) options.onConnection?.({ connected: true });
    down = false;
    if (opened > 1) log.info({ reconnects: opened - 1 }, "slack socket mode reconnected");
  }

  function reconnectSoon(): void {
    if (stopped || timer || attempting) return;
    const delayMs = failures === 0 ? 0 : backoffDelay(failures, 1_000, 60_000);
    timer = setTimeout(() => void ((timer = undefined), attempt()), delayMs).unref();
  }

  async function attempt(): Promise<void> {
    if (stopped || attempting) return;
    attempting = true;
    try {
      await open();
    } catch (error) {
      failures += 1;
      if (!stopped) log.warn({ error: toChannelError(error, "apps.connections.open", options.scrub).message, failures }, "slack socket mode connection failed; trying again");
    } finally {
      attempting = false;
    }
    if (failures > 0) reconnectSoon();
  }

  return {
    get reconnects() {
      return Math.max(0, opened - 1);
    },
    async start() {
      stopped = false;
      try {
        await open();
      } catch (error) {
        stopped = true;
        await client.disconnect().catch(() => undefined);
        throw toChannelError(error, "apps.connections.open", options.scrub);
      }
      log.info("slack socket mode connection open");
    },
    async stop() {
      stopped = true;
      clearTimeout(timer);
      timer = undefined;
      await client.disconnect().catch((error: unknown) => log.debug({ error: errorMessage(error) }, "slack socket mode disconnect failed"));
    },
  };
}
