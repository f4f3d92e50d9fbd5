/**
 * One channel run by the gateway: the adapter (platform API), admission (who may talk, when the
 * bot answers), the dispatcher (how replies go out, admission's own included), the send governor
 * (the platform's budgets of this bot account, shared by every gateway over Redis), and, for a
 * platform account, a leader lease so that among several gateways exactly one connects it and
 * delivers its replies. A channel without an account (the web page) runs on every gateway.
 *
 * Channels fail alone: a platform that cannot be connected (unreachable, a refused token) does not
 * fail start(); it is `down` and tried again with capped exponential back-off and jitter while the
 * other channels serve, and a refused token is tried only rarely (Discord bans a bot after 10,000
 * invalid requests in 10 minutes). Its health (channel-health.ts) says what is going on, with one
 * log line per change.
 */
import type { Logger } from "pino";
import { type ElectLeader, type Leadership, soleLeader } from "../bus/leader.js";
import type { GatewayBus } from "../bus/message-bus.js";
import { ChannelError } from "../errors.js";
import type { Metrics } from "../metrics.js";
import { sleep } from "../sleep.js";
import { SpanKind, inSpan } from "../tracing.js";
import type { Store } from "../store/store.js";
import { createAdmission } from "./admission.js";
import type { VoiceIntake } from "./voice-intake.js";
import type { AdmissionPolicy, ChannelAdapter, ChannelInstance, PlatformEvent } from "./channel.js";
import { type ChannelHealth, HealthTracker } from "./channel-health.js";
import { createDispatcher } from "./dispatcher.js";
import { backoffDelay } from "./kit/retry.js";
import { type QuotaStore, createMemoryQuotaStore } from "./quota-store.js";
import { type SendGovernor, createSendGovernor } from "./send-governor.js";
import { eventLoopLagMs } from "./event-loop-lag.js";

export interface ChannelRuntime {
  readonly name: string;
  /** Whether this process runs the channel now (holds its account's lease, or needs none). */
  readonly leading: boolean;
  /** The platform's budgets of this account, when the platform declared them. */
  readonly governor?: SendGovernor;
  /** How the channel is doing in this process. */
  health(): ChannelHealth;
  /** Applies a new admission policy at once (a config reload), connected or not. */
  updatePolicy(policy: AdmissionPolicy): void;
  start(): Promise<void>;
  stop(): Promise<void>;
}

/** Pauses between attempts to connect a platform. */
export interface ReconnectSchedule {
  /** After the first failure; doubled after each one, up to `maxDelayMs`. Default 1 s and 60 s. */
  baseDelayMs: number;
  maxDelayMs: number;
  /** The same for a platform that refused the credentials (kind `auth`). Default 5 min and 1 h. */
  authBaseDelayMs: number;
  authMaxDelayMs: number;
  /** Share of each pause drawn at random. Default 0.2. */
  jitter: number;
}

export interface ChannelRuntimeOptions {
  /** What the channel's plugin built. */
  channel: ChannelInstance;
  bus: GatewayBus;
  store: Pick<Store, "pairing">;
  logger: Logger;
  /** Leader election of the deployment; absent: this process always leads. */
  elect?: ElectLeader;
  /** How long start() waits for the channel to connect (or to learn that another process leads) before going on. Default 3 s. */
  leaderWaitMs?: number;
  /** Where the account's budgets are kept (Redis, for every gateway of the bot). Default: in this process. */
  quotaStore?: (channel: string, account: string) => QuotaStore;
  reconnect?: Partial<ReconnectSchedule>;
  /** Counts events by what admission did, what the dispatcher delivered, and what the governor held back. */
  metrics?: Pick<Metrics, "inbound" | "outbound" | "deliveryRetried"> & Partial<Pick<Metrics, "rateLimited" | "sendDeferred" | "draftSkipped">>;
  now?: () => number;
  random?: () => number;
  /** Answers `/usage` at the gateway (see AdmissionOptions.usage). */
  usage?: (scope: { person: string; chat: string }) => Promise<string>;
  /** Transcribes voice notes at admission (see AdmissionOptions.voice). */
  voice?: VoiceIntake;
  /** The name `memory.identities` links a speaker under (admission's `linkedPerson`). */
  linkedPerson?: (speakerId: string) => string | undefined;
}

const defaultSchedule: ReconnectSchedule = { baseDelayMs: 1_000, maxDelayMs: 60_000, authBaseDelayMs: 300_000, authMaxDelayMs: 3_600_000, jitter: 0.2 };

export function createChannelRuntime(options: ChannelRuntimeOptions): ChannelRuntime {
  const { channel, bus, store } = options;
  const { adapter } = channel;
  const logger = options.logger.child({ channel: adapter.name });
  const now = options.now ?? Date.now;
  const schedule = { ...defaultSchedule, ...options.reconnect };
  const health = new HealthTracker(adapter.name, logger, now);
  const metrics = options.metrics;
  const governor = channel.quotas
    ? createSendGovernor({
        quotas: channel.quotas,
        store: (options.quotaStore ?? (() => createMemoryQuotaStore({ now })))(adapter.name, channel.account ?? "local"),
        now,
        onDeferred: () => metrics?.sendDeferred?.(adapter.name),
        lagMs: () => eventLoopLagMs(),
      })
    : undefined;
  const dispatcher = createDispatcher({
    bus,
    adapter,
    logger,
    showNotices: channel.showNotices,
    annotateSends: channel.annotateSends,
    showTransientNotices: channel.showTransientNotices,
    teamProgress: channel.teamProgress,
    governor,
    metrics: {
      outbound: (name, kind) => {
        health.countOut();
        if (health.current === "degraded" && !connectionLost) health.up();
        metrics?.outbound(name, kind);
      },
      deliveryRetried: (name, reason) => {
        if (reason === "network") health.degraded(new ChannelError("deliveries fail: the platform does not answer", adapter.name, { kind: "network" }));
        metrics?.deliveryRetried(name, reason);
      },
      rateLimited: (name) => metrics?.rateLimited?.(name),
      draftSkipped: (name) => metrics?.draftSkipped?.(name),
    },
  });
  const admission = createAdmission({
    channel: adapter.name,
    bus,
    store,
    adapter: governor ? governedTyping(adapter, governor) : adapter,
    reply: (reply) => dispatcher.reply(reply),
    policy: channel.policy,
    // Admission binds the channel itself: handed this runtime's child, its lines carried it twice.
    logger: options.logger,
    botUsername: adapter.botUsername && (() => adapter.botUsername?.()),
    newId: channel.inboundIdOf,
    ...(options.usage ? { usage: options.usage } : {}),
    ...(options.voice ? { voice: options.voice } : {}),
    ...(options.linkedPerson ? { linkedPerson: options.linkedPerson } : {}),
  });
  // A platform account is led by one gateway at a time; a channel without one runs everywhere.
  const elect = channel.account === undefined ? soleLeader : (options.elect ?? soleLeader);
  let leadership: Leadership | undefined;
  let running = false;
  let stopped = false;
  let connectionLost = false;
  let unwatch: (() => void) | undefined;
  /** Aborted when the channel stops or loses the lead: ends the reconnect loop's pause. */
  let attempts = new AbortController();

  const begin = async () => {
    if (running || stopped) return;
    running = true;
    try {
      await adapter.start(async (event) => {
        // The trace of a message starts here: what admission publishes carries this span.
        const outcome = await inSpan(`inbound ${adapter.name}`, { kind: SpanKind.SERVER, attributes: inboundAttributes(adapter.name, event) }, async (span) => {
          const result = await admission.handle(event);
          span.setAttribute("countbot.outcome", result);
          return result;
        });
        logger.debug({ chatId: event.chatId, outcome }, "inbound event");
        health.countIn();
        metrics?.inbound(adapter.name, outcome);
        return outcome;
      });
    } catch (error) {
      running = false;
      throw error;
    }
    connectionLost = false;
    unwatch = adapter.watchConnection?.((change) => {
      connectionLost = !change.connected;
      if (change.connected) health.up();
      else health.degraded(new ChannelError(change.reason ?? "the platform connection dropped; reconnecting", adapter.name, { kind: "network" }));
    });
    await dispatcher.start();
  };

  const end = async () => {
    attempts.abort();
    if (!running) return;
    running = false;
    unwatch?.();
    unwatch = undefined;
    // The dispatcher first: replies still queued for a chat go out through the adapter.
    await dispatcher.stop();
    await adapter.stop();
  };

  /** Connects, and while that fails, tries again with back-off until it works or the channel stops. */
  const connect = async (signal: AbortSignal): Promise<void> => {
    health.starting();
    for (let failures = 0; !signal.aborted && !stopped; ) {
      try {
        await begin();
        health.up();
        return;
      } catch (error) {
        failures += 1;
        const auth = error instanceof ChannelError && error.kind === "auth";
        const base = auth ? backoffDelay(failures, schedule.authBaseDelayMs, schedule.authMaxDelayMs) : backoffDelay(failures, schedule.baseDelayMs, schedule.maxDelayMs);
        const delayMs = Math.round(base * (1 - schedule.jitter + 2 * schedule.jitter * (options.random ?? Math.random)()));
        health.down(error, now() + delayMs);
        logger.debug({ failures, delayMs, err: error }, "channel could not connect");
        await sleep(delayMs, signal).catch(() => undefined);
      }
    }
  };

  /** Stands for the lease; resolves once this process connected the channel (or first failed to), or knows it follows. */
  const stand = (): Promise<"connected" | "following"> => {
    if (stopped) return Promise.resolve("following");
    const current = elect(`${adapter.name}:${channel.account ?? "local"}`);
    leadership = current;
    current.onLost(() => {
      logger.error("lost the leader lease of this account: stopping the connector and standing for election again");
      void end()
        .then(() => current.resign())
        .then(stand);
    });
    const standingBy = setTimeout(() => health.standby(), 1_000);
    standingBy.unref?.();
    return current.acquired.then((leading) => {
      clearTimeout(standingBy);
      if (!leading) return "following" as const;
      attempts = new AbortController();
      const connecting = connect(attempts.signal);
      // The first attempt's outcome is enough for start(): later ones go on in the background.
      return Promise.race([connecting, untilLeftStarting(health)]).then(() => "connected" as const);
    });
  };

  return {
    name: adapter.name,
    get leading() {
      return running;
    },
    governor,
    health: () => health.snapshot(),
    updatePolicy(policy) {
      admission.setPolicy(policy);
    },
    async start() {
      if (channel.account !== undefined && options.elect) logger.info("standing for the leader lease of this account");
      const first = stand();
      const waited = new Promise<"waiting">((resolve) => setTimeout(() => resolve("waiting"), options.leaderWaitMs ?? 3_000).unref());
      await Promise.race([first, waited]);
    },
    async stop() {
      stopped = true;
      await end();
      await leadership?.resign();
    },
  };
}

/** Resolves once the channel is no longer `starting` (it connected, or failed once and is retrying). */
async function untilLeftStarting(health: HealthTracker): Promise<void> {
  while (health.current === "starting") await health.changed();
}

/** "typing…" only when the platform's budgets have room above what finals need. */
function governedTyping(adapter: ChannelAdapter, governor: SendGovernor): Pick<ChannelAdapter, "typing"> {
  return {
    async typing(chatId) {
      const call = { call: "typing" as const, chatId };
      if ((await governor.tryAcquire(call)) !== "taken") return;
      await adapter.typing(chatId).finally(() => governor.answered(call).catch(() => undefined));
    },
  };
}

/** What an inbound span says of an event: where it came from, never what it says. */
function inboundAttributes(channel: string, event: PlatformEvent): Record<string, string> {
  return { "countbot.channel": channel, "countbot.chat_type": event.chatType, "countbot.session": `${channel}:${event.chatId}`, "countbot.event_id": event.eventId };
}
