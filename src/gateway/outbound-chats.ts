/**
 * What the outbound side (dispatcher.ts, draft-delivery.ts, team-status.ts) knows of each chat:
 * its lane, which puts the chat's platform calls one after the other and at most one per
 * `minSendIntervalMs`, and its type (private or group), which decides how a reply streams and
 * what the send budgets charge.
 *
 * Finals and drafts of one chat share the lane, so a draft edit never lands between two chunks of
 * the final and the pacing interval holds across both. A lane is kept after it goes idle (unlike
 * KeyedLanes) so the interval holds across messages too; idle chats whose interval has passed are
 * pruned once a thousand chats have lanes.
 */
import { ChatLane } from "../bus/chat-lane.js";
import type { ChatType } from "../bus/message.js";
import type { ChannelAdapter } from "./channel.js";
import { forgetOldest } from "../bounded.js";

/** How many entries the outbound side's memories (deliveries, drafts, chat types) keep. */
export const MEMORY_LIMIT = 10_000;

/** Chats with a lane before the idle ones are pruned. */
const LANE_LIMIT = 1_000;

/** One chat's deliveries, one after the other, and when it last called the platform (for pacing). */
export class PacedLane extends ChatLane {
  lastSendAt = Number.NEGATIVE_INFINITY;
}

export interface OutboundChatsOptions {
  /** Clock, for pacing. */
  now: () => number;
  /** Waits out the pacing interval. */
  sleep: (ms: number) => Promise<void>;
  /**
   * Read on every use: `minSendIntervalMs` (the least interval between two calls into one chat)
   * and `chatType` (the type of a chat no message has told us about).
   */
  adapter: Pick<ChannelAdapter, "capabilities">;
}

/** The lanes and chat types of one channel's chats. */
export class OutboundChats {
  private readonly lanes = new Map<string, PacedLane>();
  /** The chat types messages told us, for replies that do not say (a background job's). */
  private readonly chatTypes = new Map<string, ChatType>();

  constructor(private readonly options: OutboundChatsOptions) {}

  /** The chat's lane, made on first use. */
  laneFor(chatId: string): PacedLane {
    let lane = this.lanes.get(chatId);
    if (!lane) {
      if (this.lanes.size >= LANE_LIMIT) this.pruneLanes();
      lane = new PacedLane();
      this.lanes.set(chatId, lane);
    }
    return lane;
  }

  /** Waits before a platform call so one chat gets at most one per `minSendIntervalMs`. */
  async pace(lane: PacedLane): Promise<void> {
    const wait = lane.lastSendAt + this.options.adapter.capabilities.minSendIntervalMs - this.options.now();
    if (wait <= 0) return;
    await this.options.sleep(wait);
  }

  /** One platform call in the chat's lane, paced like the chat's other sends. */
  inLane<T>(chatId: string, call: () => Promise<T>): Promise<T> {
    const lane = this.laneFor(chatId);
    return lane.run(async () => {
      await this.pace(lane);
      try {
        return await call();
      } finally {
        lane.lastSendAt = this.options.now();
      }
    });
  }

  /** Resolves once every chat's lane has run what was queued so far. */
  async idle(): Promise<void> {
    await Promise.all([...this.lanes.values()].map((lane) => lane.idle()));
  }

  /** Remembers the type a message gave its chat, for later replies that do not say. */
  noteChatType(chatId: string, chatType: ChatType | undefined): void {
    if (chatType === undefined || this.chatTypes.get(chatId) === chatType) return;
    remember(this.chatTypes, chatId, chatType);
  }

  /** The chat's type as last seen, else the channel's. */
  chatTypeOf(chatId: string): ChatType | undefined {
    return this.chatTypes.get(chatId) ?? this.options.adapter.capabilities.chatType;
  }

  /** The chat's type as a spreadable send option (absent when unknown). */
  chatTypeOption(chatId: string): { chatType?: ChatType } {
    const chatType = this.chatTypeOf(chatId);
    return chatType === undefined ? {} : { chatType };
  }

  /** Forgets idle chats whose pacing interval has passed. */
  private pruneLanes(): void {
    const quietSince = this.options.now() - this.options.adapter.capabilities.minSendIntervalMs;
    for (const [chatId, lane] of this.lanes) {
      if (!lane.busy && lane.lastSendAt <= quietSince) this.lanes.delete(chatId);
    }
  }
}

/** Adds to a bounded map: past MEMORY_LIMIT its oldest sixteenth goes (src/bounded.ts). */
export function remember<V>(map: Map<string, V>, key: string, value: V): void {
  map.set(key, value);
  forgetOldest(map, MEMORY_LIMIT);
}
