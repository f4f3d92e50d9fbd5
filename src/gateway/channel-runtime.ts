/**
 * One platform account run by the gateway: the adapter (platform API), admission (who may talk,
 * when the bot answers), the dispatcher (how replies go out), and a leader lease so that among
 * several gateways exactly one polls the platform and delivers its replies.
 */
import type { Logger } from "pino";
import type { RedisClient } from "../redis/client.js";
import { electLeader } from "../bus/leader.js";
import type { MessageBus } from "../bus/message-bus.js";
import type { Store } from "../store/store.js";
import { type AdmissionPolicy, createAdmission } from "./admission.js";
import { createDispatcher } from "./dispatcher.js";
import type { ChannelAdapter, PlatformEvent } from "./channel.js";

export interface ChannelRuntime {
  readonly name: string;
  start(): Promise<void>;
  stop(): Promise<void>;
}

export interface ChannelRuntimeOptions {
  adapter: ChannelAdapter;
  /** Names the platform account for the leader lease (never the token itself). */
  account: string;
  policy: AdmissionPolicy;
  bus: MessageBus;
  store: Store;
  logger: Logger;
  redis?: RedisClient;
  prefix?: string;
  botUsername?: () => string | undefined;
  isPrivateChat?: (chatId: string) => boolean;
  /** Passed to admission: the id of the inbound message made of an event. Default a random UUID. */
  inboundIdOf?: (event: PlatformEvent) => string;
  /** Passed to the dispatcher: send tool-call notices to the chat. Default false. */
  showNotices?: boolean;
  /** Passed to the dispatcher: tell the adapter what each send is (SendOptions.outbound). Default false. */
  annotateSends?: boolean;
}

export function createChannelRuntime(options: ChannelRuntimeOptions): ChannelRuntime {
  const { adapter, bus, store } = options;
  const logger = options.logger.child({ channel: adapter.name });
  const admission = createAdmission({
    channel: adapter.name,
    bus,
    store,
    adapter,
    policy: options.policy,
    logger,
    botUsername: options.botUsername,
    newId: options.inboundIdOf,
  });
  const dispatcher = createDispatcher({
    bus,
    adapter,
    logger,
    isPrivateChat: options.isPrivateChat,
    showNotices: options.showNotices,
    annotateSends: options.annotateSends,
  });
  let leadership: ReturnType<typeof electLeader> | undefined;
  let running = false;
  let stopped = false;

  const begin = async () => {
    if (running || stopped) return;
    running = true;
    await adapter.start(async (event) => {
      const outcome = await admission.handle(event);
      logger.debug({ chatId: event.chatId, outcome }, "inbound event");
      return outcome;
    });
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

  const elect = () => {
    if (stopped) return;
    const current = electLeader({ name: `${adapter.name}:${options.account}`, redis: options.redis, prefix: options.prefix });
    leadership = current;
    current.onLost(() => {
      logger.error("lost the leader lease of this account: stopping the connector and standing for election again");
      void end()
        .then(() => current.resign())
        .then(elect);
    });
    // Another gateway may lead: wait in the background, never block this gateway's start-up.
    void current.acquired.then((leading) => (leading ? begin() : undefined)).catch((error: unknown) => logger.error({ err: error }, "channel failed to start"));
  };

  return {
    name: adapter.name,
    async start() {
      if (options.redis) logger.info("standing for the leader lease of this account");
      elect();
    },
    async stop() {
      stopped = true;
      await end();
      await leadership?.resign();
    },
  };
}
