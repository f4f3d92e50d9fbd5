/**
 * Channels fail alone: a platform that cannot be connected does not fail start(); it is `down`,
 * tried again with back-off until it connects, a refused token on a slow schedule, and the log has
 * one line per change of state, not one per attempt. A connection that drops shows `degraded`.
 */
import { Writable } from "node:stream";
import pino from "pino";
import { afterEach, describe, expect, it, vi } from "vitest";
import { createMemoryBus } from "../../../src/bus/memory-bus.js";
import { ChannelError } from "../../../src/errors.js";
import type { ChannelAdapter, EventSink } from "../../../src/gateway/channel.js";
import { type ChannelRuntime, createChannelRuntime } from "../../../src/gateway/channel-runtime.js";

/** A platform whose start fails while `failure` is set. */
class FlakyPlatform implements ChannelAdapter {
  readonly name = "flaky";
  readonly capabilities = { maxMessageLength: 100, streaming: "none" as const, draftIntervalMs: 10, minSendIntervalMs: 0 };
  failure: ChannelError | undefined;
  attempts = 0;
  private listener: ((change: { connected: boolean; reason?: string }) => void) | undefined;

  async start(_sink: EventSink): Promise<void> {
    this.attempts += 1;
    if (this.failure) throw this.failure;
  }
  async stop(): Promise<void> {}
  async send(): Promise<{ platformMessageId: string }> {
    return { platformMessageId: "1" };
  }
  async edit(): Promise<void> {}
  async typing(): Promise<void> {}
  watchConnection(listener: (change: { connected: boolean; reason?: string }) => void) {
    this.listener = listener;
    return () => (this.listener = undefined);
  }
  connection(connected: boolean): void {
    this.listener?.({ connected, reason: connected ? undefined : "socket closed" });
  }
}

function logged() {
  const lines: Array<{ msg: string; state?: string; level: number }> = [];
  const stream = new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const line of chunk.toString("utf8").split("\n").filter(Boolean)) lines.push(JSON.parse(line) as (typeof lines)[number]);
      done();
    },
  });
  return { logger: pino({ level: "info" }, stream), lines };
}

const runtimes: ChannelRuntime[] = [];
afterEach(async () => {
  for (const runtime of runtimes.splice(0)) await runtime.stop();
});

function start(platform: FlakyPlatform, schedule = { baseDelayMs: 5, maxDelayMs: 20, authBaseDelayMs: 60_000, authMaxDelayMs: 60_000 }) {
  const { logger, lines } = logged();
  const runtime = createChannelRuntime({
    channel: { adapter: platform, policy: { allowFrom: [], groupPolicy: "mention" } },
    bus: createMemoryBus(),
    store: { pairing: {} as never },
    logger,
    reconnect: { ...schedule, jitter: 0 },
  });
  runtimes.push(runtime);
  return { runtime, lines };
}

describe("channel runtime health", () => {
  it("starts without the platform, retries with back-off, connects when it comes back, and logs each change once", async () => {
    const platform = new FlakyPlatform();
    platform.failure = new ChannelError("connect ECONNREFUSED 127.0.0.1:9", "flaky", { kind: "network" });
    const { runtime, lines } = start(platform);
    await runtime.start();
    expect(runtime.health()).toMatchObject({ name: "flaky", state: "down", lastError: { kind: "network", message: "connect ECONNREFUSED 127.0.0.1:9" } });
    expect(runtime.health().retryAt).toBeGreaterThan(runtime.health().since - 1);
    await vi.waitFor(() => expect(platform.attempts).toBeGreaterThanOrEqual(5));
    platform.failure = undefined;
    await vi.waitFor(() => expect(runtime.health().state).toBe("up"));
    expect(runtime.leading).toBe(true);
    const changes = lines.filter((line) => line.state !== undefined).map((line) => `${line.state}: ${line.msg}`);
    expect(changes).toEqual(["down: channel down; retrying with back-off", "up: channel connected"]);
  });

  it("reports a refused token as such and tries it again only on the slow schedule", async () => {
    const platform = new FlakyPlatform();
    platform.failure = new ChannelError("telegram getMe failed: 401 Unauthorized", "flaky", { kind: "auth" });
    const { runtime, lines } = start(platform);
    await runtime.start();
    expect(runtime.health()).toMatchObject({ state: "down", lastError: { kind: "auth" } });
    expect(runtime.health().retryAt! - runtime.health().lastError!.at).toBeGreaterThanOrEqual(60_000);
    expect(platform.attempts).toBe(1);
    expect(lines.find((line) => line.state === "down")?.msg).toBe("channel down: the platform refused the credentials; retrying rarely");
  });

  it("shows a dropped connection as degraded until it is back", async () => {
    const platform = new FlakyPlatform();
    const { runtime, lines } = start(platform);
    await runtime.start();
    expect(runtime.health().state).toBe("up");
    platform.connection(false);
    platform.connection(false);
    expect(runtime.health()).toMatchObject({ state: "degraded", lastError: { message: "socket closed" } });
    platform.connection(true);
    expect(runtime.health().state).toBe("up");
    expect(lines.filter((line) => line.state !== undefined).map((line) => line.state)).toEqual(["up", "degraded", "up"]);
  });
});
