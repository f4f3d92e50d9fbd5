/**
 * The channel plugins: a platform is one folder under `channels/` and one line here. The config's
 * `channels` section is assembled from these, and the gateway runs every enabled one.
 */
import type { ChannelPlugin } from "../src/gateway/kit/index.js";
import { dingtalkChannel } from "./dingtalk/plugin.js";
import { discordChannel } from "./discord/plugin.js";
import { feishuChannel } from "./feishu/plugin.js";
import { qqChannel } from "./qq/plugin.js";
import { slackChannel } from "./slack/plugin.js";
import { telegramChannel } from "./telegram/plugin.js";
import { wecomChannel } from "./wecom/plugin.js";
import { webChannel } from "./web/plugin.js";

export const channelPlugins: readonly ChannelPlugin[] = [telegramChannel, discordChannel, feishuChannel, dingtalkChannel, qqChannel, slackChannel, wecomChannel, webChannel];
