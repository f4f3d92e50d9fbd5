/**
 * Streams replies into many chats of Telegram, Discord and Feishu at once, the way workers do
 * (drafts, then a final per chat), through gateways that share one Redis, against fake platforms
 * that enforce the published limits with real 429 answers; then reads back from the fakes what
 * each chat shows. Used by tests/e2e/platform-quotas.test.ts and `npm run bench -- quotas`.
 *
 * Each gateway is a stack of its own (Redis connection, bus, the three channel runtimes on the real
 * plugins and SDKs, send governors over the Redis quota store), and every gateway leads every
 * account: the overlap of a leader hand-over, kept for the whole run, so the gateways share the
 * outbound streams and each bot's budgets.
 */
import { randomUUID } from "node:crypto";
import { Redis } from "ioredis";
import pino from "pino";
import { discordChannel } from "../../channels/discord/plugin.js";
import { feishuChannel } from "../../channels/feishu/plugin.js";
import { telegramChannel } from "../../channels/telegram/plugin.js";
import type { MessageBus } from "../../src/bus/message-bus.js";
import { createRedisBus } from "../../src/bus/redis-bus.js";
import type { ChannelPlugin } from "../../src/gateway/channel.js";
import { type ChannelRuntime, createChannelRuntime } from "../../src/gateway/channel-runtime.js";
import { createRedisQuotaStore } from "../../src/gateway/redis-quota-store.js";
import type { ChatType } from "../../src/bus/message.js";
import { DISCORD_PUBLISHED_LIMITS, type FakeDiscordServer, startFakeDiscord } from "./fake-discord-server.js";
import { FEISHU_APP_LIMITS, type FakeFeishuServer, startFakeFeishu } from "./fake-feishu-server.js";
import { type FakeTelegramServer, TELEGRAM_PUBLISHED_LIMITS, startFakeTelegram } from "./fake-telegram-server.js";

export const PLATFORMS = ["telegram", "discord", "feishu"] as const;
export type Platform = (typeof PLATFORMS)[number];

export interface Fakes {
  telegram: FakeTelegramServer;
  discord: FakeDiscordServer;
  feishu: FakeFeishuServer;
  close(): Promise<void>;
}

const TELEGRAM_TOKEN = "4242:quota-token";
const DISCORD_TOKEN = "discord-quota-token";
const FEISHU = { appId: "cli_0123456789abcdef", appSecret: "feishu-quota-secret" };

export async function startLimitedFakes(): Promise<Fakes> {
  const [telegram, discord, feishu] = await Promise.all([
    startFakeTelegram({ token: TELEGRAM_TOKEN, limits: TELEGRAM_PUBLISHED_LIMITS }),
    startFakeDiscord({ token: DISCORD_TOKEN, limits: DISCORD_PUBLISHED_LIMITS }),
    startFakeFeishu({ ...FEISHU, appLimits: FEISHU_APP_LIMITS }),
  ]);
  return {
    telegram,
    discord,
    feishu,
    close: async () => void (await Promise.all([telegram.close(), discord.close(), feishu.close()])),
  };
}

/** One conversation: where its reply goes on each platform, and whether it is in a group. */
export interface Conversation {
  index: number;
  group: number | undefined;
  chatIds: Record<Platform, string>;
  chatType: ChatType;
}

/** `chats` conversations, `grouped` of them spread over `groups` group chats, the rest private. */
export function planConversations(fakes: Fakes, chats: number, grouped: number, groups: number): Conversation[] {
  const guild = fakes.discord.addGuild({ name: "Quota guild" });
  const groupChannels = Array.from({ length: groups }, (_, group) => (group === 0 ? guild.generalId : fakes.discord.addTextChannel(guild, `busy-${group}`).id));
  const conversations: Conversation[] = [];
  for (let index = 0; index < chats; index++) {
    const group = index < grouped ? index % groups : undefined;
    if (group === undefined) {
      fakes.telegram.addChat({ id: 10_000 + index, type: "private", first_name: `User${index}` });
      const user = fakes.discord.user({ username: `user${index}` });
      conversations.push({
        index,
        group,
        chatType: "private",
        chatIds: { telegram: String(10_000 + index), discord: fakes.discord.dmChannelId(user), feishu: `oc_private${index}` },
      });
    } else {
      fakes.telegram.addChat({ id: -1_000 - group, type: "supergroup", title: `Busy ${group}` });
      conversations.push({ index, group, chatType: "group", chatIds: { telegram: String(-1_000 - group), discord: groupChannels[group]!, feishu: `oc_group${group}` } });
    }
  }
  return conversations;
}

/** Where the fakes listen: all a gateway needs of them (they may run in another process). */
export interface FakeEndpoints {
  telegram: Pick<FakeTelegramServer, "apiRoot">;
  discord: Pick<FakeDiscordServer, "apiRoot">;
  feishu: Pick<FakeFeishuServer, "origin">;
}

export interface Gateway {
  bus: MessageBus;
  runtimes: ChannelRuntime[];
  counters: { rateLimited: number; deferred: number; draftsSkipped: number };
  close(): Promise<void>;
}

const plugins: ChannelPlugin[] = [telegramChannel, discordChannel, feishuChannel] as unknown as ChannelPlugin[];

/** A bus over its own Redis connection, as the gateways open it (to publish replies from outside them). */
export function openBus(redisUrl: string, prefix: string): { bus: MessageBus; redis: Redis; close(): Promise<void> } {
  const redis = new Redis(redisUrl, { maxRetriesPerRequest: null, enableAutoPipelining: true });
  const bus = createRedisBus({ redis, prefix, leaseTtlMs: 30_000, debounceMs: 0 });
  return {
    bus,
    redis,
    async close() {
      await bus.close();
      await redis.quit();
    },
  };
}

export async function startGateway(options: { fakes: FakeEndpoints; redisUrl: string; prefix: string; dataDir: string }): Promise<Gateway> {
  const { bus, redis, close } = openBus(options.redisUrl, options.prefix);
  const logger = pino({ level: process.env.QUOTA_LOG_LEVEL ?? "silent" });
  const counters = { rateLimited: 0, deferred: 0, draftsSkipped: 0 };
  const sections: Record<string, unknown> = {
    telegram: { enabled: true, token: TELEGRAM_TOKEN, apiRoot: options.fakes.telegram.apiRoot, allowFrom: ["1"], mode: "webhook", webhook: { url: "http://127.0.0.1:9/telegram", secret: "quota-secret" } },
    discord: { enabled: true, token: DISCORD_TOKEN, apiRoot: options.fakes.discord.apiRoot, allowFrom: ["1"] },
    feishu: { enabled: true, ...FEISHU, domain: options.fakes.feishu.origin, allowFrom: ["ou_1"] },
  };
  const runtimes: ChannelRuntime[] = [];
  for (const plugin of plugins) {
    const config = plugin.configSchema.parse(sections[plugin.name]);
    const channel = await plugin.create(config, { logger, dataDir: options.dataDir, bus });
    runtimes.push(
      createChannelRuntime({
        channel,
        bus,
        store: { pairing: {} as never },
        logger,
        quotaStore: (name, account) => createRedisQuotaStore({ redis, prefix: options.prefix, channel: name, account }),
        metrics: {
          inbound: () => undefined,
          outbound: () => undefined,
          deliveryRetried: () => undefined,
          rateLimited: () => void (counters.rateLimited += 1),
          sendDeferred: () => void (counters.deferred += 1),
          draftSkipped: () => void (counters.draftsSkipped += 1),
        },
      }),
    );
  }
  await Promise.all(runtimes.map((runtime) => runtime.start()));
  return {
    bus,
    runtimes,
    counters,
    async close() {
      await Promise.all(runtimes.map((runtime) => runtime.stop()));
      await close();
    },
  };
}

/** The final text of a conversation's reply: `length` characters, its marker first. */
export function finalText(platform: Platform, conversation: Conversation, length: number): string {
  const marker = `final ${platform} ${conversation.index}.`;
  const words = [marker];
  let size = marker.length;
  for (let word = 0; size < length; word++) {
    const next = word % 12 === 11 ? `w${word}.\n\n` : `w${word}`;
    words.push(next);
    size += next.length + 1;
  }
  return words.join(" ");
}

/**
 * Streams each conversation's reply on each platform: `drafts` updates `draftEveryMs` apart, growing
 * to the final text, then every final at once. Resolves with when the finals were published.
 */
export async function streamReplies(bus: MessageBus, conversations: Conversation[], options: { drafts: number; draftEveryMs: number; length: number }): Promise<number> {
  const runId = randomUUID().slice(0, 8);
  const replyId = (platform: Platform, conversation: Conversation) => `${runId}-${platform}-${conversation.index}:0`;
  for (let step = 1; step <= options.drafts; step++) {
    const publishes = [];
    for (const platform of PLATFORMS) {
      for (const conversation of conversations) {
        const text = finalText(platform, conversation, options.length).slice(0, Math.floor((options.length * step) / (options.drafts + 1)));
        publishes.push(bus.publishDraft({ replyId: replyId(platform, conversation), channel: platform, chatId: conversation.chatIds[platform], text, chatType: conversation.chatType }));
      }
    }
    await Promise.all(publishes);
    await new Promise((resolve) => setTimeout(resolve, options.draftEveryMs));
  }
  const finalsAt = Date.now();
  await Promise.all(
    PLATFORMS.flatMap((platform) =>
      conversations.map((conversation) =>
        bus.publishOutbound({
          id: replyId(platform, conversation),
          channel: platform,
          chatId: conversation.chatIds[platform],
          content: finalText(platform, conversation, options.length),
          kind: "final",
          media: [],
          metadata: {},
          chatType: conversation.chatType,
        }),
      ),
    ),
  );
  return finalsAt;
}

/** What one platform shows now: per chat, the bot's messages in the order they were created, their current text. */
export function shownMessages(fakes: Fakes, platform: Platform): Map<string, Array<{ text: string }>> {
  const shown = new Map<string, Array<{ text: string }>>();
  const add = (chatId: string, text: string) => shown.set(chatId, [...(shown.get(chatId) ?? []), { text }]);
  if (platform === "telegram") {
    const latest = new Map<string, { chatId: string; text: string; id: number }>();
    for (const item of fakes.telegram.sent) {
      if (item.method !== "sendMessage" && item.method !== "editMessageText") continue;
      latest.set(`${item.chatId}:${item.messageId}`, { chatId: String(item.chatId), text: item.text ?? "", id: item.messageId! });
    }
    for (const message of [...latest.values()].sort((a, b) => a.id - b.id)) add(message.chatId, message.text);
  } else if (platform === "discord") {
    for (const chatId of new Set(fakes.discord.requests.filter((request) => request.route === "createMessage").map((request) => request.path.split("/")[2]!))) {
      for (const message of fakes.discord.sentIn(chatId)) add(chatId, message.content);
    }
  } else {
    for (const message of fakes.feishu.messages) add(message.chatId, JSON.stringify(message.content));
  }
  return shown;
}

/** When each message call (a send or an edit, no typing, no reads) reached the platform, in ms since the epoch, oldest first. */
export function messageCallTimes(fakes: Fakes, platform: Platform): number[] {
  if (platform === "telegram") return fakes.telegram.requests.filter((call) => /^(send|edit)Message/.test(call.method)).map((call) => call.at);
  if (platform === "discord") return fakes.discord.requests.filter((call) => call.route === "createMessage" || call.route === "editMessage").map((call) => call.at);
  return fakes.feishu.requests.filter((call) => call.route === "create" || call.route === "patch" || call.route === "reply").map((call) => call.at);
}

/** Rate-limit answers each fake gave. */
export function rateLimitedAnswers(fakes: Fakes): Record<Platform, number> {
  return { telegram: fakes.telegram.rateLimited, discord: fakes.discord.rateLimited, feishu: fakes.feishu.rateLimited };
}

/**
 * The least time the published limits allow for the finals alone, from an empty window: for each
 * budget the calls the finals make there need floor((calls - 1) / limit) whole windows.
 */
export function finalsBoundMs(platform: Platform, conversations: Conversation[], chunksPerFinal: number): number {
  const scopes: Record<Platform, Array<{ key: (conversation: Conversation) => string | undefined; limit: number; windowMs: number }>> = {
    telegram: [
      { key: (conversation) => conversation.chatIds.telegram, limit: 1, windowMs: 1_000 },
      { key: (conversation) => (conversation.group === undefined ? undefined : conversation.chatIds.telegram), limit: 20, windowMs: 60_000 },
      { key: () => "bot", limit: 30, windowMs: 1_000 },
    ],
    discord: [
      { key: (conversation) => conversation.chatIds.discord, limit: 5, windowMs: 5_000 },
      { key: () => "bot", limit: 50, windowMs: 1_000 },
    ],
    feishu: [
      { key: (conversation) => conversation.chatIds.feishu, limit: 5, windowMs: 1_000 },
      { key: () => "app", limit: 50, windowMs: 1_000 },
      { key: () => "appMinute", limit: 1_000, windowMs: 60_000 },
    ],
  };
  let bound = 0;
  for (const scope of scopes[platform]) {
    const calls = new Map<string, number>();
    for (const conversation of conversations) {
      const key = scope.key(conversation);
      if (key !== undefined) calls.set(key, (calls.get(key) ?? 0) + chunksPerFinal);
    }
    for (const count of calls.values()) bound = Math.max(bound, Math.floor((count - 1) / scope.limit) * scope.windowMs);
  }
  return bound;
}

/** The text a shown message carries (Feishu: the card's Markdown). */
export function textOf(platform: Platform, shown: { text: string }): string {
  if (platform !== "feishu") return shown.text;
  const content = JSON.parse(shown.text) as { body?: { elements?: Array<{ content?: string }> }; text?: string };
  return content.body?.elements?.[0]?.content ?? content.text ?? shown.text;
}

/**
 * What went wrong with what the chats show, if anything: each chat must show exactly the finals of
 * its conversations, each once, and nothing else (no draft left behind, nothing doubled).
 */
export function deliveryProblems(fakes: Fakes, conversations: Conversation[], length: number, platforms: readonly Platform[] = PLATFORMS): string[] {
  const problems: string[] = [];
  for (const platform of platforms) {
    const shown = shownMessages(fakes, platform);
    const expected = new Map<string, string[]>();
    for (const conversation of conversations) {
      const chatId = conversation.chatIds[platform];
      expected.set(chatId, [...(expected.get(chatId) ?? []), finalText(platform, conversation, length)]);
    }
    for (const [chatId, finals] of expected) {
      const texts = (shown.get(chatId) ?? []).map((message) => textOf(platform, message));
      const missing = finals.filter((text) => !texts.includes(text));
      const doubled = finals.filter((text) => texts.filter((shownText) => shownText === text).length > 1);
      const stray = texts.filter((text) => !finals.includes(text));
      if (missing.length + doubled.length + stray.length > 0) {
        problems.push(`${platform} ${chatId}: ${missing.length} finals missing, ${doubled.length} doubled, ${stray.length} other messages (${stray.map((text) => JSON.stringify(text.slice(0, 40))).join(", ")})`);
      }
    }
  }
  return problems;
}
