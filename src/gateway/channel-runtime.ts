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
import { type Admission, createAdmission } from "./admission.js";
import type { VoiceIntake } from "./voice-intake.js";
import type { AdmissionOutcome, AdmissionPolicy, ChannelAdapter, ChannelInstance, PlatformEvent } from "./channel.js";
import { type ChannelHealth, HealthTracker } from "./channel-health.js";
import { type Dispatcher, type DispatcherOptions, createDispatcher } from "./dispatcher.js";
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
  return new GatewayChannelRuntime(options);
}

/**
 * One channel's parts, and its life: standing for the account's lease (`stand`), connecting with
 * back-off while it leads (`connect`, `begin`), and letting go when it stops or loses the lease (`end`).
 */
class GatewayChannelRuntime implements ChannelRuntime {
  readonly name: string;
  readonly governor: SendGovernor | undefined;
  private readonly channel: ChannelInstance;
  private readonly adapter: ChannelAdapter;
  private readonly logger: Logger;
  private readonly now: () => number;
  private readonly schedule: ReconnectSchedule;
  private readonly tracker: HealthTracker;
  private readonly dispatcher: Dispatcher;
  private readonly admission: Admission;
  /** A platform account is led by one gateway at a time; a channel without one runs everywhere. */
  private readonly elect: ElectLeader;
  private leadership: Leadership | undefined;
  private running = false;
  private stopped = false;
  /** The platform connection dropped (the adapter said so): deliveries do not mark the channel up. */
  private connectionLost = false;
  private unwatch: (() => void) | undefined;
  /** Aborted when the channel stops or loses the lead: ends the reconnect loop's pause. */
  private attempts = new AbortController();

  constructor(private readonly options: ChannelRuntimeOptions) {
    this.channel = options.channel;
    this.adapter = options.channel.adapter;
    this.name = this.adapter.name;
    this.logger = options.logger.child({ channel: this.adapter.name });
    this.now = options.now ?? Date.now;
    this.schedule = { ...defaultSchedule, ...options.reconnect };
    this.tracker = new HealthTracker(this.adapter.name, this.logger, this.now);
    this.governor = this.createGovernor();
    this.dispatcher = this.createDispatcher();
    this.admission = this.createAdmission();
    this.elect = this.channel.account === undefined ? soleLeader : (options.elect ?? soleLeader);
  }

  /** Whether this process runs the channel now. */
  get leading(): boolean {
    return this.running;
  }

  health(): ChannelHealth {
    return this.tracker.snapshot();
  }

  updatePolicy(policy: AdmissionPolicy): void {
    this.admission.setPolicy(policy);
  }

  async start(): Promise<void> {
    if (this.channel.account !== undefined && this.options.elect) this.logger.info("standing for the leader lease of this account");
    const first = this.stand();
    const waited = new Promise<"waiting">((resolve) => setTimeout(() => resolve("waiting"), this.options.leaderWaitMs ?? 3_000).unref());
    await Promise.race([first, waited]);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await this.end();
    await this.leadership?.resign();
  }

  private createGovernor(): SendGovernor | undefined {
    const { channel, options, adapter, now } = this;
    if (!channel.quotas) return undefined;
    return createSendGovernor({
      quotas: channel.quotas,
      store: (options.quotaStore ?? (() => createMemoryQuotaStore({ now })))(adapter.name, channel.account ?? "local"),
      now,
      onDeferred: () => options.metrics?.sendDeferred?.(adapter.name),
      lagMs: () => eventLoopLagMs(),
    });
  }

  private createDispatcher(): Dispatcher {
    const { channel, adapter } = this;
    return createDispatcher({
      bus: this.options.bus,
      adapter,
      logger: this.logger,
      showNotices: channel.showNotices,
      annotateSends: channel.annotateSends,
      showTransientNotices: channel.showTransientNotices,
      teamProgress: channel.teamProgress,
      governor: this.governor,
      metrics: this.deliveryMetrics(),
    });
  }

  /** The dispatcher's counts, which also tell the channel's health how deliveries go. */
  private deliveryMetrics(): NonNullable<DispatcherOptions["metrics"]> {
    const { metrics } = this.options;
    const health = this.tracker;
    return {
      outbound: (name, kind) => {
        health.countOut();
        if (health.current === "degraded" && !this.connectionLost) health.up();
        metrics?.outbound(name, kind);
      },
      deliveryRetried: (name, reason) => {
        if (reason === "network") health.degraded(new ChannelError("deliveries fail: the platform does not answer", this.adapter.name, { kind: "network" }));
        metrics?.deliveryRetried(name, reason);
      },
      rateLimited: (name) => metrics?.rateLimited?.(name),
      draftSkipped: (name) => metrics?.draftSkipped?.(name),
    };
  }

  private createAdmission(): Admission {
    const { options, adapter, governor } = this;
    return createAdmission({
      channel: adapter.name,
      bus: options.bus,
      store: options.store,
      adapter: governor ? governedTyping(adapter, governor) : adapter,
      reply: (reply) => this.dispatcher.reply(reply),
      policy: this.channel.policy,
      // Admission binds the channel itself: handed this runtime's child, its lines carried it twice.
      logger: options.logger,
      botUsername: adapter.botUsername && (() => adapter.botUsername?.()),
      newId: this.channel.inboundIdOf,
      ...(options.usage ? { usage: options.usage } : {}),
      ...(options.voice ? { voice: options.voice } : {}),
      ...(options.linkedPerson ? { linkedPerson: options.linkedPerson } : {}),
    });
  }

  /** Starts the adapter (its events through admission), watches its connection, then the dispatcher. */
  private async begin(): Promise<void> {
    if (this.running || this.stopped) return;
    this.running = true;
    try {
      await this.adapter.start((event) => this.admit(event));
    } catch (error) {
      this.running = false;
      throw error;
    }
    this.connectionLost = false;
    this.unwatch = this.adapter.watchConnection?.((change) => {
      this.connectionLost = !change.connected;
      if (change.connected) this.tracker.up();
      else this.tracker.degraded(new ChannelError(change.reason ?? "the platform connection dropped; reconnecting", this.adapter.name, { kind: "network" }));
    });
    await this.dispatcher.start();
  }

  /** One platform event through admission, traced and counted. */
  private async admit(event: PlatformEvent): Promise<AdmissionOutcome> {
    const { adapter } = this;
    // The trace of a message starts here: what admission publishes carries this span.
    const outcome = await inSpan(`inbound ${adapter.name}`, { kind: SpanKind.SERVER, attributes: inboundAttributes(adapter.name, event) }, async (span) => {
      const result = await this.admission.handle(event);
      span.setAttribute("countbot.outcome", result);
      return result;
    });
    this.logger.debug({ chatId: event.chatId, outcome }, "inbound event");
    this.tracker.countIn();
    this.options.metrics?.inbound(adapter.name, outcome);
    return outcome;
  }

  private async end(): Promise<void> {
    this.attempts.abort();
    if (!this.running) return;
    this.running = false;
    this.unwatch?.();
    this.unwatch = undefined;
    // The dispatcher first: replies still queued for a chat go out through the adapter.
    await this.dispatcher.stop();
    await this.adapter.stop();
  }

  /** Connects, and while that fails, tries again with back-off until it works or the channel stops. */
  private async connect(signal: AbortSignal): Promise<void> {
    this.tracker.starting();
    for (let failures = 0; !signal.aborted && !this.stopped; ) {
      try {
        await this.begin();
        this.tracker.up();
        return;
      } catch (error) {
        failures += 1;
        const delayMs = this.reconnectDelay(failures, error instanceof ChannelError && error.kind === "auth");
        this.tracker.down(error, this.now() + delayMs);
        this.logger.debug({ failures, delayMs, err: error }, "channel could not connect");
        await sleep(delayMs, signal).catch(() => undefined);
      }
    }
  }

  /** The pause after `failures` failed attempts: capped exponential back-off with jitter, long for a refused token. */
  private reconnectDelay(failures: number, auth: boolean): number {
    const { schedule } = this;
    const base = auth ? backoffDelay(failures, schedule.authBaseDelayMs, schedule.authMaxDelayMs) : backoffDelay(failures, schedule.baseDelayMs, schedule.maxDelayMs);
    return Math.round(base * (1 - schedule.jitter + 2 * schedule.jitter * (this.options.random ?? Math.random)()));
  }

  /** Stands for the lease; resolves once this process connected the channel (or first failed to), or knows it follows. */
  private stand(): Promise<"connected" | "following"> {
    if (this.stopped) return Promise.resolve("following");
    const current = this.elect(`${this.adapter.name}:${this.channel.account ?? "local"}`);
    this.leadership = current;
    current.onLost(() => {
      this.logger.error("lost the leader lease of this account: stopping the connector and standing for election again");
      void this.end()
        .then(() => current.resign())
        .then(() => this.stand());
    });
    const standingBy = setTimeout(() => this.tracker.standby(), 1_000);
    standingBy.unref?.();
    return current.acquired.then((leading) => {
      clearTimeout(standingBy);
      if (!leading) return "following" as const;
      this.attempts = new AbortController();
      const connecting = this.connect(this.attempts.signal);
      // The first attempt's outcome is enough for start(): later ones go on in the background.
      return Promise.race([connecting, untilLeftStarting(this.tracker)]).then(() => "connected" as const);
    });
  }
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
