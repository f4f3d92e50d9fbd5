/**
 * The terminal channel on the shared runtime (admission, dispatcher) over the in-process bus. No
 * Redis: this process always holds the leader lease.
 */
import type { Logger } from "pino";
import { type CliChannel, cliChannelInstance } from "../../channels/cli/cli-channel.js";
import type { MessageBus } from "../bus/message-bus.js";
import { type ChannelRuntime, createChannelRuntime } from "../gateway/channel-runtime.js";
import type { Store } from "../store/store.js";

export interface CliRuntimeOptions {
  bus: MessageBus;
  store: Store;
  logger: Logger;
}

export function createCliRuntime(channel: CliChannel, options: CliRuntimeOptions): ChannelRuntime {
  return createChannelRuntime({ channel: cliChannelInstance(channel), bus: options.bus, store: options.store, logger: options.logger });
}
