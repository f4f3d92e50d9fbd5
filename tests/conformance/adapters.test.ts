/**
 * The adapter conformance suite (adapter.suite.ts) against every platform's fake server, each
 * driven through its real SDK: telegraf, discord.js, @larksuiteoapi/node-sdk, dingtalk-stream,
 * @slack/web-api with @slack/socket-mode, @wecom/aibot-node-sdk (wecom-driver.ts); QQ has no SDK
 * worth taking, its adapter speaks the gateway and the OpenAPI itself.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import pino from "pino";
import { createDingTalkAdapter } from "../../channels/dingtalk/dingtalk-adapter.js";
import { createDiscordAdapter } from "../../channels/discord/discord-adapter.js";
import { createFeishuAdapter } from "../../channels/feishu/feishu-adapter.js";
import { createQQAdapter } from "../../channels/qq/qq-adapter.js";
import { createSlackAdapter } from "../../channels/slack/slack-adapter.js";
import { createTelegramAdapter } from "../../channels/telegram/telegram-adapter.js";
import { type DingTalkRoute, startFakeDingTalk } from "../support/fake-dingtalk-server.js";
import { startFakeDiscord } from "../support/fake-discord-server.js";
import { type FeishuEventEnvelope, startFakeFeishu } from "../support/fake-feishu-server.js";
import { type QQFailure, startFakeQQ } from "../support/fake-qq-server.js";
import { type SlackFailure, startFakeSlack } from "../support/fake-slack-server.js";
import { startFakeTelegram } from "../support/fake-telegram-server.js";
import { textOf } from "../unit/channels/feishu-support.js";
import { type AdapterDriver, type AdapterRig, type FailureKind, adapterConformance } from "./adapter.suite.js";
import { wecomRobot } from "./wecom-driver.js";

const silent = pino({ level: "silent" });

async function downloadDir(): Promise<{ dir: string; remove: () => Promise<void> }> {
  const dir = await mkdtemp(path.join(tmpdir(), "countbot-adapter-"));
  return { dir, remove: () => rm(dir, { recursive: true, force: true }) };
}

const telegram: AdapterDriver = {
  name: "Telegram",
  async rig(): Promise<AdapterRig> {
    const token = "123456:AAH-conformance_token-secret";
    const fake = await startFakeTelegram({ token, bot: { username: "CountBot" } });
    const owner = fake.user({ id: 100, first_name: "Owner" });
    const stranger = fake.user({ id: 200, first_name: "Stranger" });
    const group = -500;
    fake.addChat({ id: owner.id, type: "private", first_name: "Owner" });
    fake.addChat({ id: stranger.id, type: "private", first_name: "Stranger" });
    fake.addChat({ id: group, type: "group", title: "Team" });
    const files = await downloadDir();
    const adapter = createTelegramAdapter({ token, apiRoot: fake.apiRoot, mode: "polling", maxFileBytes: 1_000_000, downloadDir: files.dir, logger: silent, pollTimeoutSeconds: 1 });
    const methodOf = { send: "sendMessage", edit: "editMessageText" } as const;
    const failures: Record<FailureKind, (operation: "send" | "edit") => { error_code: number; description?: string; retry_after?: number }> = {
      "rate-limit": () => ({ error_code: 429, retry_after: 3 }),
      formatting: () => ({ error_code: 400, description: `Bad Request: can't parse entities: Unsupported start tag "x" (bot${token})` }),
      forbidden: () => ({ error_code: 403, description: `Forbidden: bot was blocked by the user (bot${token})` }),
      "not-found": (operation) => ({ error_code: 400, description: operation === "edit" ? "Bad Request: message to edit not found" : "Bad Request: chat not found" }),
      network: () => ({ error_code: 502, description: `Bad Gateway (bot${token})` }),
    };
    return {
      adapter,
      secrets: [token],
      owner: String(owner.id),
      stranger: String(stranger.id),
      ownerChat: String(owner.id),
      strangerChat: String(stranger.id),
      group: String(group),
      async say(from, where, text, options = {}) {
        const user = from === "owner" ? owner : stranger;
        const chatId = where === "private" ? user.id : group;
        fake.sendText({ chatId, from: user, text: options.mention ? `@CountBot ${text}` : text });
      },
      shown: (chatId) =>
        fake.sent
          .filter((item) => item.method === "sendMessage" && String(item.chatId) === chatId && item.messageId !== undefined)
          .map((item) => fake.messageOf(Number(chatId), item.messageId!)?.text ?? ""),
      failNext(operation, kind) {
        fake.failNext(methodOf[operation], failures[kind](operation));
        return true;
      },
      idempotent: false,
      waitFor: (predicate, what) => fake.waitFor(predicate, { what }),
      async close() {
        await adapter.stop();
        await fake.close();
        await files.remove();
      },
    };
  },
};

const discord: AdapterDriver = {
  name: "Discord",
  async rig(): Promise<AdapterRig> {
    const token = "MTIzNDU2Nzg5.conformance.token-secret";
    const fake = await startFakeDiscord({ token });
    const guild = fake.addGuild({ name: "Team" });
    const owner = fake.user({ username: "owner", globalName: "Owner" });
    const stranger = fake.user({ username: "stranger", globalName: "Stranger" });
    fake.addMember(guild, owner);
    fake.addMember(guild, stranger);
    const files = await downloadDir();
    const adapter = createDiscordAdapter({ token, apiRoot: fake.apiRoot, maxImageBytes: 1_000_000, downloadDir: files.dir, logger: silent, maxRestWaitMs: 100, handOverBackoffMs: 20 });
    const routeOf = { send: "createMessage", edit: "editMessage" } as const;
    return {
      adapter,
      secrets: [token],
      owner: owner.id,
      stranger: stranger.id,
      ownerChat: fake.dmChannelId(owner),
      strangerChat: fake.dmChannelId(stranger),
      group: guild.generalId,
      async say(from, where, text, options = {}) {
        const user = from === "owner" ? owner : stranger;
        const content = options.mention ? `<@${fake.botUser.id}> ${text}` : text;
        if (where === "private") fake.sendDM({ from: user, content });
        else fake.sendMessage({ channelId: guild.generalId, from: user, content });
      },
      shown: (chatId) => fake.sentIn(chatId).map((message) => message.content),
      failNext(operation, kind) {
        const route = routeOf[operation];
        if (kind === "rate-limit") fake.failNext(route, { status: 429, retryAfter: 30 });
        else if (kind === "formatting") fake.failNext(route, { status: 400, code: 50035, message: `Invalid Form Body ${token}`, errors: { content: { _errors: [{ code: "CONTENT_TYPE_INVALID", message: "Invalid content" }] } } });
        else if (kind === "forbidden") fake.failNext(route, { status: 403, code: 50013, message: `Missing Permissions ${token}` });
        else if (kind === "not-found") fake.failNext(route, { status: 404, code: operation === "edit" ? 10008 : 10003, message: "Unknown Message" });
        // The REST client tries a 5xx four times (its three retries) before it gives up.
        else for (let attempt = 0; attempt < 4; attempt++) fake.failNext(route, { status: 502, message: `Bad Gateway ${token}` });
        return true;
      },
      idempotent: true,
      waitFor: (predicate, what) => fake.waitFor(predicate, { what }),
      async close() {
        await adapter.stop();
        await fake.close();
        await files.remove();
      },
    };
  },
};

const feishu: AdapterDriver = {
  name: "Feishu",
  async rig(): Promise<AdapterRig> {
    const appId = "cli_0123456789abcdef";
    const appSecret = "feishu-conformance-secret";
    const fake = await startFakeFeishu({ appId, appSecret });
    const owner = { openId: "ou_owner0000000001", name: "Owner" };
    const stranger = { openId: "ou_stranger00000002", name: "Stranger" };
    const chats = { ownerChat: "oc_owner_p2p000001", strangerChat: "oc_stranger_p2p0002", group: "oc_group0000000003" };
    const files = await downloadDir();
    const adapter = createFeishuAdapter({
      appId,
      appSecret,
      domain: fake.origin,
      mode: "longConnection",
      groupSessionScope: "chat",
      maxImageBytes: 1_000_000,
      maxFileBytes: 1_000_000,
      downloadDir: files.dir,
      logger: silent,
    });
    // Feishu delivers an event again until the app acknowledges it with 200.
    const deliver = (envelope: FeishuEventEnvelope): void =>
      void fake.push(envelope, { timeoutMs: 30_000 }).then(
        (answer) => (answer.code === 200 ? undefined : deliver(envelope)),
        () => undefined,
      );
    const routeOf = { send: "create", edit: "patch" } as const;
    const failureOf: Record<FailureKind, { status?: number; code: number; msg: string; resetSeconds?: number }> = {
      "rate-limit": { status: 429, code: 99991400, msg: "request trigger frequency limit", resetSeconds: 3 },
      formatting: { status: 400, code: 230099, msg: `Failed to create card content ${appSecret}` },
      forbidden: { status: 400, code: 230002, msg: `Bot is not in the chat. ${appSecret}` },
      "not-found": { status: 400, code: 230011, msg: "The message was withdrawn." },
      network: { status: 502, code: 0, msg: `bad gateway ${appSecret}` },
    };
    return {
      adapter,
      secrets: [appSecret],
      owner: owner.openId,
      stranger: stranger.openId,
      ...chats,
      async say(from, where, text, options = {}) {
        const user = from === "owner" ? owner : stranger;
        const chatId = where === "private" ? (from === "owner" ? chats.ownerChat : chats.strangerChat) : chats.group;
        const bot = { openId: fake.bot.openId, name: fake.bot.name };
        deliver(fake.event({ chatId, chatType: where === "private" ? "p2p" : "group", sender: user, text, ...(options.mention ? { mentions: [bot] } : {}) }));
      },
      shown: (chatId) => fake.messages.filter((message) => message.chatId === chatId).map((message) => textOf(message.content)),
      failNext(operation, kind) {
        fake.failNext(routeOf[operation], failureOf[kind]);
        return true;
      },
      idempotent: true,
      waitFor: (predicate, what) => fake.waitFor(predicate, { what }),
      async close() {
        await adapter.stop();
        await fake.close();
        await files.remove();
      },
    };
  },
};

const dingtalk: AdapterDriver = {
  name: "DingTalk",
  async rig(): Promise<AdapterRig> {
    const appKey = "dingconformance0001";
    const appSecret = "dingtalk-conformance-secret";
    // DingTalk delivers a message again when the app did not acknowledge it (60 s; here sooner).
    const fake = await startFakeDingTalk({ appKey, appSecret, redeliverAfterMs: 300 });
    const owner = { staffId: "owner01", dingtalkId: "$:LWCP_v1:$owner01", nick: "Owner" };
    const stranger = { staffId: "stranger02", dingtalkId: "$:LWCP_v1:$stranger02", nick: "Stranger" };
    const group = "cidConformanceGroup";
    const files = await downloadDir();
    const adapter = createDingTalkAdapter({
      appKey,
      appSecret,
      robotCode: appKey,
      apiRoot: fake.origin,
      mode: "stream",
      aiCard: { enabled: true, templateId: "tpl.schema", contentKey: "msgContent", settleMs: 60_000 },
      maxImageBytes: 1_000_000,
      maxFileBytes: 1_000_000,
      downloadDir: files.dir,
      logger: silent,
    });
    const routeOf: Record<"send" | "edit", DingTalkRoute> = { send: "batchSend", edit: "cardStreaming" };
    const failureOf: Record<FailureKind, { status: number; code: string; message: string }> = {
      "rate-limit": { status: 403, code: "Forbidden.AccessDenied.QpsLimitForApi", message: `请求过于频繁 ${appSecret}` },
      formatting: { status: 400, code: "InvalidParameter.MsgParam", message: `msgParam markdown invalid ${appSecret}` },
      forbidden: { status: 403, code: "Forbidden.AccessDenied.NoPermission", message: `no permission ${appSecret}` },
      "not-found": { status: 404, code: "resource.not.found", message: "gone" },
      network: { status: 502, code: "BadGateway", message: `bad gateway ${appSecret}` },
    };
    return {
      adapter,
      secrets: [appSecret],
      owner: owner.staffId,
      stranger: stranger.staffId,
      ownerChat: `user:${owner.staffId}`,
      strangerChat: `user:${stranger.staffId}`,
      group,
      async say(from, where, text, options = {}) {
        const sender = from === "owner" ? owner : stranger;
        const message = fake.message({ sender, text, ...(where === "group" ? { conversationType: "2" as const, conversationId: group } : {}), ...(options.mention ? { atRobot: true } : {}) });
        void fake.push(message, { timeoutMs: 30_000 }).catch(() => undefined);
      },
      shown(chatId) {
        const target = chatId.replace(/^user:/, "");
        const cards = fake.cards.filter((card) => card.openSpaceId.endsWith(`.${target}`)).map((card) => ({ seq: card.seq, text: card.params.msgContent ?? "" }));
        const messages = fake.messages.filter((message) => message.target === target).map((message) => ({ seq: message.seq, text: message.text }));
        return [...cards, ...messages].sort((a, b) => a.seq - b.seq).map((item) => item.text);
      },
      failNext(operation, kind) {
        // A card's text is not markup DingTalk checks: it never refuses an update for it.
        if (operation === "edit" && kind === "formatting") return false;
        fake.failNext(routeOf[operation], failureOf[kind]);
        return true;
      },
      idempotent: false,
      // Robot messages cannot be edited; the card a streamed reply opens can.
      editableSend: { idempotencyKey: "conformance-reply#draft" },
      waitFor: (predicate, what) => fake.waitFor(predicate, { what }),
      async close() {
        await adapter.stop();
        await fake.close();
        await files.remove();
      },
    };
  },
};

const qq: AdapterDriver = {
  name: "QQ",
  async rig(): Promise<AdapterRig> {
    const appId = "102000001";
    const appSecret = "qqConformanceSecret0123456789abc";
    // Sends outside a reply window go out as active messages here (the fake allows them, as QQ does for some bots).
    const fake = await startFakeQQ({ appId, appSecret, activeGroupMessages: true });
    // The owner's openid and guild id are one string, so that one allowlist entry lets them in everywhere.
    const owner = { openid: "OWNER0OPENID0001", guildId: "OWNER0OPENID0001", username: "Owner" };
    const stranger = { openid: "STRANGER0OPENID2", guildId: "STRANGER0OPENID2", username: "Stranger" };
    const guild = { guild: "9000000001", channel: "9100000001" };
    const adapter = createQQAdapter({
      appId,
      appSecret,
      apiRoot: fake.origin,
      tokenUrl: fake.tokenUrl,
      mode: "websocket",
      intents: ["groupAndC2C", "publicGuildMessages", "guildMessages"],
      markdown: false,
      activeMessages: { groups: true, channels: true },
      logger: silent,
      retryBaseMs: 50,
    });
    const failureOf: Record<FailureKind, QQFailure> = {
      "rate-limit": { status: 429, code: 22009, message: `msg limit exceed ${appSecret}` },
      formatting: { status: 400, code: 304082, message: `markdown content invalid ${appSecret}` },
      forbidden: { status: 403, code: 11264, message: `no permission ${appSecret}` },
      "not-found": { status: 404, code: 11255, message: "user not found" },
      network: { status: 502, code: 0, message: `bad gateway ${appSecret}` },
    };
    return {
      adapter,
      secrets: [appSecret],
      owner: owner.openid,
      stranger: stranger.openid,
      ownerChat: `user:${owner.openid}`,
      strangerChat: `user:${stranger.openid}`,
      group: `channel:${guild.channel}`,
      async say(from, where, text, options = {}) {
        const user = from === "owner" ? owner : stranger;
        fake.dispatch(where === "private" ? fake.c2c({ from: user, text }) : fake.channel({ ...guild, from: user, text, ...(options.mention ? { atBot: true } : {}) }));
      },
      shown: (chatId) => fake.shown(chatId),
      failNext(operation, kind) {
        if (operation === "edit") return false;
        fake.failNext("userMessage", failureOf[kind]);
        return true;
      },
      idempotent: false,
      editable: false,
      waitFor: (predicate, what) => fake.waitFor(predicate, { what }),
      async close() {
        await adapter.stop();
        await fake.close();
      },
    };
  },
};

const slack: AdapterDriver = {
  name: "Slack",
  async rig(): Promise<AdapterRig> {
    const botToken = "xoxb-1111-2222-conformance-bot-secret";
    const appToken = "xapp-1-A0FAKE-3333-conformance-app-secret";
    // Slack sends an envelope again when the app did not acknowledge it (here sooner).
    const fake = await startFakeSlack({ botToken, appToken, redeliverAfterMs: 300, postsPerSecond: 100 });
    const owner = fake.addUser({ id: "U0OWNER001", name: "owner", displayName: "Owner" });
    const stranger = fake.addUser({ id: "U0STRANGE2", name: "stranger", displayName: "Stranger" });
    const chats = { ownerChat: "D0OWNER001", strangerChat: "D0STRANGE2", group: "C0GENERAL1" };
    const files = await downloadDir();
    const adapter = createSlackAdapter({
      botToken,
      appToken,
      mode: "socket",
      apiUrl: fake.apiUrl,
      inheritParent: true,
      maxImageBytes: 1_000_000,
      maxFileBytes: 1_000_000,
      downloadDir: files.dir,
      logger: silent,
      handOverBackoffMs: 20,
    });
    const methodOf = { send: "chat.postMessage", edit: "chat.update" } as const;
    const failureOf: Record<FailureKind, (operation: "send" | "edit") => SlackFailure | undefined> = {
      "rate-limit": () => ({ status: 429, error: "ratelimited", retryAfter: 3 }),
      // Slack shows mrkdwn it cannot read as text: it never refuses a message's markup.
      formatting: () => undefined,
      forbidden: () => ({ error: "not_in_channel" }),
      "not-found": (operation) => ({ error: operation === "edit" ? "message_not_found" : "channel_not_found" }),
      network: () => ({ status: 503, error: "service_unavailable" }),
    };
    return {
      adapter,
      secrets: [botToken, appToken],
      owner: owner.id,
      stranger: stranger.id,
      ...chats,
      async say(from, where, text, options = {}) {
        const user = from === "owner" ? owner : stranger;
        const channel = where === "private" ? (from === "owner" ? chats.ownerChat : chats.strangerChat) : chats.group;
        void fake.say({ from: user, channel, text, ...(options.mention ? { mention: true } : {}) }, { timeoutMs: 30_000 }).catch(() => undefined);
      },
      shown: (chatId) => fake.shown(chatId),
      failNext(operation, kind) {
        const failure = failureOf[kind](operation);
        if (!failure) return false;
        fake.failNext(methodOf[operation], failure);
        return true;
      },
      idempotent: false,
      waitFor: (predicate, what) => fake.waitFor(predicate, { what }),
      async close() {
        await adapter.stop();
        await fake.close();
        await files.remove();
      },
    };
  },
};

for (const driver of [telegram, discord, feishu, dingtalk, qq, slack, wecomRobot]) adapterConformance(driver);
