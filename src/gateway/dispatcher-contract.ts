/**
 * What the dispatcher (dispatcher.ts) is given and what it offers: its options, the gateway's own
 * replies, and the Dispatcher interface the channel runtime drives.
 */
import type { Logger } from "pino";
import type { ChatType } from "../bus/message.js";
import type { GatewayBus } from "../bus/message-bus.js";
import type { Metrics } from "../metrics.js";
import type { ChannelAdapter } from "./channel.js";
import type { TeamProgressSetting } from "./group-settings.js";
import type { SendGovernor } from "./send-governor.js";

export interface DispatcherOptions {
  bus: GatewayBus;
  adapter: ChannelAdapter;
  logger: Logger;
  /** Clock, for pacing and draft throttling. Default Date.now. */
  now?: () => number;
  /** Waits (pacing, retry_after, backoff). Default a timer. */
  sleep?: (ms: number) => Promise<void>;
  /** Network failures of one chunk retried before the message goes back to the bus. Default 3. */
  maxRetries?: number;
  /** First network backoff, doubled each time (capped at 30 s). Default 500 ms. */
  retryDelayMs?: number;
  /** Send notices (tool-call lines) to the chat too. Default false. */
  showNotices?: boolean;
  /** Send transient notices (`metadata.transient`: a team agent's streamed text) too. Default false. */
  showTransientNotices?: boolean;
  /** Counts chunks delivered, platform calls tried again, 429s and drafts left out. */
  metrics?: Pick<Metrics, "outbound" | "deliveryRetried"> & Partial<Pick<Metrics, "rateLimited" | "draftSkipped">>;
  /** The platform's budgets of this bot account; absent: only `minSendIntervalMs` paces. */
  governor?: SendGovernor;
  /**
   * Tell the adapter what each chunk of a final or notice is (SendOptions.outbound: kind, chunk
   * position, the inbound ids a reply answers), for adapters that render notices differently or
   * must know when a reply is complete (the terminal). Default false. With edit-style streaming, a
   * chunk the draft message already shows is not sent again, so its annotation never arrives:
   * adapters that count on it stream with `draft` (in private chats) or not at all.
   */
  annotateSends?: boolean;
  /** A team run's progress as one status message edited in place (`status-message`), or not at all. Default `off`. */
  teamProgress?: TeamProgressSetting;
}

/** A reply the gateway itself sends to a platform message (admission's answers). */
export interface GatewayReply {
  chatId: string;
  chatType?: ChatType;
  /** Stable for the event it answers, so a redelivered event is not answered twice. */
  id: string;
  /** The platform message it answers. */
  replyTo?: string;
  text: string;
}

export interface Dispatcher {
  /** Starts consuming the adapter's channel on the bus. */
  start(): Promise<void>;
  /** Stops consuming, then lets the chats' lanes finish (waits are cut short, logged). */
  stop(): Promise<void>;
  /** Sends a gateway reply as plain text in the chat's lane; resolves once it is delivered (or dropped). */
  reply(reply: GatewayReply): Promise<void>;
}
