/**
 * Streaming drafts on the Redis bus: who watches (audiences, declared and renewed by a timer), the
 * publish of a draft's newest text where someone watches, and what a final must say about its
 * drafts. A final whose reply had drafts carries `drafted` (only then does its delivery leave a
 * finished marker), and a draft of a reply whose final this process published is dropped: read at
 * delivery time, its text would undo the final.
 */
import type { RedisClient } from "../redis/client.js";
import { loadScript, runScript } from "../redis/scripts.js";
import type { OutboundMessage } from "./message.js";
import { DRAFT_AUDIENCE_TTL_MS, type Draft, type Subscription } from "./message-bus.js";
import type { BusKeys } from "./redis-keys.js";
import type { StreamEvent } from "./redis-outbound.js";
import { forgetOldest } from "../bounded.js";

const scriptsDirectory = new URL("./lua/", import.meta.url);
const scripts = {
  publishDraft: loadScript(scriptsDirectory, "publish-draft-3.lua"),
  watchDrafts: loadScript(scriptsDirectory, "watch-drafts-1.lua"),
};

/** Draft audiences renewed per command. */
const AUDIENCE_BATCH = 1_000;
/** Reply ids remembered (drafted, finalized) at most. */
const REMEMBERED = 10_000;

export interface RedisDraftsOptions {
  redis: RedisClient;
  keys: BusKeys;
  clock: () => string;
  streamMaxLength: number;
  onError?: (error: unknown) => void;
}

export class RedisDrafts {
  /** Audiences this process declared (`watch`), with how many hold each; renewed by a timer. */
  private readonly audiences = new Map<string, number>();
  private timer: NodeJS.Timeout | undefined;
  /** Replies this process published drafts of, until their final goes out. */
  private readonly drafted = new Set<string>();
  /** Finals this process published (recent ones): their late drafts are dropped. */
  private readonly finalized = new Set<string>();

  constructor(private readonly options: RedisDraftsOptions) {}

  /** A final or notice as its stream entry, marked `drafted` when drafts of it were published here. */
  messageEvent(message: OutboundMessage): string {
    const drafted = this.drafted.delete(message.id);
    if (message.kind === "final") remember(this.finalized, message.id);
    return JSON.stringify({ type: "message", message, ...(drafted ? { drafted: true as const } : {}) } satisfies StreamEvent);
  }

  async publish(draft: Draft): Promise<boolean> {
    if (this.finalized.has(draft.replyId)) return false;
    const { redis, keys, clock, streamMaxLength } = this.options;
    const { text, ...pointer } = draft;
    const event = JSON.stringify({ type: "draft", draft: pointer } satisfies StreamEvent);
    const published = await runScript(
      redis,
      scripts.publishDraft,
      [keys.draftAudience, keys.draft(draft.replyId), keys.outbound(draft.channel)],
      [clock(), draft.channel, `${draft.channel}:${draft.chatId}`, text, 10 * 60_000, event, streamMaxLength],
    );
    if (published !== 1) return false;
    // Bounded: a reply whose final never comes (its turn failed over) is forgotten eventually.
    remember(this.drafted, draft.replyId);
    return true;
  }

  async watch(channel: string, chatId?: string): Promise<Subscription> {
    const audience = chatId === undefined ? channel : `${channel}:${chatId}`;
    const holders = this.audiences.get(audience) ?? 0;
    this.audiences.set(audience, holders + 1);
    // Declared before this resolves: a draft published after it is seen.
    if (holders === 0) await this.renew([audience]);
    this.timer ??= setInterval(() => {
      const audiences = [...this.audiences.keys()];
      for (let start = 0; start < audiences.length; start += AUDIENCE_BATCH) {
        this.renew(audiences.slice(start, start + AUDIENCE_BATCH)).catch((error: unknown) => this.options.onError?.(error));
      }
    }, DRAFT_AUDIENCE_TTL_MS / 3);
    this.timer.unref();
    let open = true;
    return {
      // Left to lapse in Redis: another process may watch the same chat, and renews only its own.
      close: async () => {
        if (!open) return;
        open = false;
        const left = (this.audiences.get(audience) ?? 1) - 1;
        if (left > 0) this.audiences.set(audience, left);
        else this.audiences.delete(audience);
      },
    };
  }

  close(): void {
    if (this.timer) clearInterval(this.timer);
  }

  private async renew(audiences: string[]): Promise<void> {
    if (audiences.length === 0) return;
    await runScript(this.options.redis, scripts.watchDrafts, [this.options.keys.draftAudience], [this.options.clock(), DRAFT_AUDIENCE_TTL_MS, ...audiences]);
  }
}

function remember(set: Set<string>, id: string): void {
  set.add(id);
  forgetOldest(set, REMEMBERED);
}
