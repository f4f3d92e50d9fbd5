/**
 * The Web API calls the channel makes, through the official `@slack/web-api` WebClient pointed at
 * `apiUrl`: who the bot is (`auth.test`), messages (`chat.postMessage` into a chat or its thread,
 * `chat.update`), members' names (`users.info`, cached for an hour) and the message a thread
 * started from (`conversations.replies`, once per thread). The SDK throws a 429 instead of
 * waiting it out and tries each call once: the runtime's governor paces and retries. Every
 * failure leaves as a ChannelError (slack-errors.ts), scrubbed.
 */
import { WebClient } from "@slack/web-api";
import type { Logger } from "pino";
import { ChannelError } from "../../src/errors.js";
import { ExpiringMap, ExpiringSet, type Scrub } from "../../src/gateway/kit/index.js";
import { targetOf } from "./chat-id.js";
import { escapeMrkdwn } from "./render-mrkdwn.js";
import { toChannelError } from "./slack-errors.js";
import { slackLogger } from "./socket-connection.js";

export interface Identity {
  userId: string;
  name: string;
  botId?: string;
  team?: string;
}

export interface SlackApiOptions {
  botToken: string;
  /** Ends in `/`. */
  apiUrl: string;
  scrub: Scrub;
  logger: Logger;
  now: () => number;
}

const HOUR_MS = 60 * 60_000;

export function createSlackApi(options: SlackApiOptions) {
  const { scrub, logger, now } = options;
  const web = new WebClient(options.botToken, {
    slackApiUrl: options.apiUrl,
    logger: slackLogger(logger.child({ channel: "slack" }), scrub),
    rejectRateLimitedCalls: true,
    retryConfig: { retries: 0 },
    timeout: 15_000,
    allowAbsoluteUrls: false,
  });
  const names = new ExpiringMap<string>(HOUR_MS, now, 10_000);
  const introduced = new ExpiringSet(7 * 24 * HOUR_MS, now, 100_000);

  async function call<T>(method: string, run: () => Promise<T>): Promise<T> {
    try {
      return await run();
    } catch (error) {
      throw toChannelError(error, method, scrub);
    }
  }

  return {
    async whoAmI(): Promise<Identity> {
      const answer = await call("auth.test", () => web.auth.test());
      if (!answer.user_id) throw new ChannelError("slack auth.test answered without a user id: is this a bot token?", "slack", { kind: "auth" });
      return { userId: answer.user_id, name: answer.user ?? "bot", ...(answer.bot_id ? { botId: answer.bot_id } : {}), ...(answer.team ? { team: answer.team } : {}) };
    },

    /** Posts into the chat (a thread chat: into its thread); resolves with the message's ts. */
    async post(chatId: string, text: string, plain: boolean): Promise<string> {
      const { channel, threadTs } = targetOf(chatId);
      const answer = await call("chat.postMessage", () => web.chat.postMessage({ channel, text: plain ? escapeMrkdwn(text) : text, mrkdwn: !plain, ...(threadTs ? { thread_ts: threadTs } : {}) }));
      if (!answer.ts) throw new ChannelError("slack chat.postMessage answered without a ts", "slack");
      return answer.ts;
    },

    async update(chatId: string, ts: string, text: string, plain: boolean): Promise<void> {
      await call("chat.update", () => web.chat.update({ channel: targetOf(chatId).channel, ts, text: plain ? escapeMrkdwn(text) : text }));
    },

    /** A member's display name; undefined when Slack would not say (logged, never thrown). */
    async nameOf(userId: string): Promise<string | undefined> {
      const known = names.get(userId);
      if (known !== undefined) return known || undefined;
      try {
        const { user } = await web.users.info({ user: userId });
        const name = user?.profile?.display_name || user?.profile?.real_name || user?.real_name || user?.name || "";
        names.set(userId, name);
        return name || undefined;
      } catch (error) {
        logger.debug({ channel: "slack", userId, error: toChannelError(error, "users.info", scrub).message }, "slack user not named");
        return undefined;
      }
    },

    /** The message a thread started from, the first time the thread is asked for; not one of the bot's. */
    async threadStart(chatId: string, identity: Identity | undefined): Promise<{ text: string; userId?: string } | undefined> {
      const { channel, threadTs } = targetOf(chatId);
      if (!threadTs || !introduced.add(chatId)) return undefined;
      try {
        const { messages } = await web.conversations.replies({ channel, ts: threadTs, limit: 1, inclusive: true });
        const parent = messages?.[0];
        const ours = (parent?.user !== undefined && parent.user === identity?.userId) || (parent?.bot_id !== undefined && parent.bot_id === identity?.botId);
        if (!parent || parent.ts !== threadTs || ours) return undefined;
        return { text: parent.text ?? "", ...(parent.user ? { userId: parent.user } : {}) };
      } catch (error) {
        logger.debug({ channel: "slack", chatId, error: toChannelError(error, "conversations.replies", scrub).message }, "slack thread's first message not read");
        return undefined;
      }
    },
  };
}

export type SlackApi = ReturnType<typeof createSlackApi>;
