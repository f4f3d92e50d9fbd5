/**
 * One channel run by the gateway: the adapter (platform API), admission (who may talk, when the
 * bot answers), the dispatcher (how replies go out, admission's own included), and, for a platform
 * account, a leader lease so that among several gateways exactly one connects it and delivers its
 * replies. A channel without an account (the web page) runs on every gateway.
 */
import type { Logger } from "pino";
import { type ElectLeader, type Leadership, soleLeader } from "../bus/leader.js";
import type { GatewayBus } from "../bus/message-bus.js";
import type { Store } from "../store/store.js";
import { createAdmission } from "./admission.js";
import type { Metrics } from "../metrics.js";
import type { AdmissionPolicy, ChannelInstance } from "./channel.js";
import { createDispatcher } from "./dispatcher.js";

export interface ChannelRuntime {
  readonly name: string;
  /** Whether this process runs the channel now (holds its account's lease, or needs none). */
  readonly leading: boolean;
  /** Applies a new admission policy at once (a config reload), connected or not. */
  updatePolicy(policy: AdmissionPolicy): void;
  start(): Promise<void>;
  stop(): Promise<void>;
}

export interface ChannelRuntimeOptions {
  /** What the channel's plugin built. */
  channel: ChannelInstance;
  bus: GatewayBus;
  store: Pick<Store, "pairing">;
  logger: Logger;
  /** Leader election of the deployment; absent: this process always leads. */
  elect?: ElectLeader;
  /** How long start() waits to learn whether this process leads before going on. Default 3 s. */
  leaderWaitMs?: number;
  /** Counts events by what admission did, and what the dispatcher delivered. */
  metrics?: Pick<Metrics, "inbound" | "outbound" | "deliveryRetried">;
}

export function createChannelRuntime(options: ChannelRuntimeOptions): ChannelRuntime {
  const { channel, bus, store } = options;
  const { adapter } = channel;
  const logger = options.logger.child({ channel: adapter.name });
  const dispatcher = createDispatcher({
    bus,
    adapter,
    logger,
    showNotices: channel.showNotices,
    annotateSends: channel.annotateSends,
    showTransientNotices: channel.showTransientNotices,
    metrics: options.metrics,
  });
  const admission = createAdmission({
    channel: adapter.name,
    bus,
    store,
    adapter,
    reply: (reply) => dispatcher.reply(reply),
    policy: channel.policy,
    logger,
    botUsername: adapter.botUsername && (() => adapter.botUsername?.()),
    newId: channel.inboundIdOf,
  });
  // A platform account is led by one gateway at a time; a channel without one runs everywhere.
  const elect = channel.account === undefined ? soleLeader : (options.elect ?? soleLeader);
  let leadership: Leadership | undefined;
  let running = false;
  let stopped = false;

  const begin = async () => {
    if (running || stopped) return;
    running = true;
    try {
      await adapter.start(async (event) => {
        const outcome = await admission.handle(event);
        logger.debug({ chatId: event.chatId, outcome }, "inbound event");
        options.metrics?.inbound(adapter.name, outcome);
        return outcome;
      });
    } catch (error) {
      running = false;
      throw error;
    }
    await dispatcher.start();
    logger.info("channel connected");
  };

  const end = async () => {
    if (!running) return;
    running = false;
    // The dispatcher first: replies still queued for a chat go out through the adapter.
    await dispatcher.stop();
    await adapter.stop();
  };

  /** Stands for the lease; resolves once this process connected the channel, or knows it follows. */
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
    const connected = current.acquired.then(async (leading) => {
      if (!leading) return "following" as const;
      await begin();
      return "connected" as const;
    });
    connected.catch((error: unknown) => logger.error({ err: error }, "channel failed to start"));
    return connected;
  };

  return {
    name: adapter.name,
    get leading() {
      return running;
    },
    updatePolicy(policy) {
      admission.setPolicy(policy);
    },
    async start() {
      if (channel.account !== undefined && options.elect) logger.info("standing for the leader lease of this account");
      // Leading at once (one process, or a free lease): a channel that cannot connect (a token the
      // platform refuses) fails the start. Another gateway leading: go on and wait in the background.
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
