/**
 * The WeCom plugin: `channels.wecom` in the config; WECOM_CORP_ID, WECOM_AGENT_ID, WECOM_SECRET,
 * WECOM_TOKEN, WECOM_ENCODING_AES_KEY and WECOM_API_ROOT (application mode), WECOM_BOT_ID,
 * WECOM_BOT_SECRET and WECOM_BOT_WS_URL (robot mode) in the environment. The adapter, and the
 * robot SDK with it, is imported only when the channel is created (see ChannelPlugin).
 *
 * The callback: WeCom signs its parameters in the query string and verifies the URL with a GET,
 * while the kit's webhook passes a POST's headers and body only. So the callback path is declared
 * as the channel's webhook (which makes it public: WeCom brings no API token, it brings its
 * signature) and, through the channel's routes, the path's GET is added, and each POST to it gets
 * its query string copied into the {@link QUERY_HEADER} header (whatever a client put there is
 * overwritten) before the webhook handler reads it.
 */
import { createHash } from "node:crypto";
import path from "node:path";
import { ConfigError } from "../../src/errors.js";
import { type AdmissionPolicy, type ChannelDependencies, type ChannelInstance, createMemoryChatEventLog, defineChannel, headerValue, withLimits } from "../../src/gateway/kit/index.js";
import { type WeComConfig, WeComConfigSchema } from "./config.js";
import { wecomQuotas } from "./quotas.js";

export type { WeComConfig } from "./config.js";

export const QUERY_HEADER = "x-countbot-wecom-query";

type Field = "corpId" | "agentId" | "secret" | "token" | "encryptKey";

function required(config: WeComConfig, field: Field, variable: string): string {
  const value = config[field];
  if (!value) throw new ConfigError(`channels.wecom is enabled (mode "app") but has no ${field}: set ${variable} or channels.wecom.${field}`, `channels.wecom.${field}`);
  return value;
}

function requiredRobot(config: WeComConfig, field: "botId" | "secret", variable: string): string {
  const value = config.robot[field];
  if (!value) throw new ConfigError(`channels.wecom is enabled (mode "robot") but has no robot.${field}: set ${variable} or channels.wecom.robot.${field}`, `channels.wecom.robot.${field}`);
  return value;
}

async function createRobot(config: WeComConfig, dependencies: ChannelDependencies): Promise<ChannelInstance> {
  const botId = requiredRobot(config, "botId", "WECOM_BOT_ID");
  const secret = requiredRobot(config, "secret", "WECOM_BOT_SECRET");
  const [{ createWeComRobotAdapter }, { createWeComScrubber }] = await Promise.all([import("./robot-adapter.js"), import("./wecom-errors.js")]);
  const adapter = createWeComRobotAdapter({
    botId,
    secret,
    wsUrl: config.robot.wsUrl,
    ...(config.robot.name ? { robotName: config.robot.name } : {}),
    settleMs: config.robot.settleMs,
    scrubber: createWeComScrubber([secret]),
    logger: dependencies.logger,
    ...(dependencies.now ? { now: dependencies.now } : {}),
  });
  return {
    adapter,
    policy: wecomPolicy(config),
    quotas: withLimits(wecomQuotas, config.limits, "channels.wecom.limits"),
    teamProgress: config.teamProgress,
    // WeCom keeps one long connection per robot: one gateway holds it.
    account: createHash("sha256").update(`robot:${botId}`).digest("hex").slice(0, 16),
    inboundIdOf: (event) => `wecom-${event.platformMessageId}`,
    // Finals carry `outbound`, drafts do not: a stream is finished on a final only.
    annotateSends: true,
  };
}

/** Who may talk to the bot: members by UserID, and every member of the listed chats. */
export function wecomPolicy(config: WeComConfig): AdmissionPolicy {
  return { allowFrom: [...config.allowFrom, ...config.allowChats], groupPolicy: config.groupPolicy, groupContext: config.groupContext, rateLimit: { messages: config.rateLimitPerMinute, perMs: 60_000 } };
}

export const wecomChannel = defineChannel({
  name: "wecom",
  description: "WeCom (企业微信): a self-built application (encrypted callback in, message API out) or an intelligent robot (long connection, groups, streamed replies).",
  configSchema: WeComConfigSchema,
  environment: {
    WECOM_CORP_ID: "corpId",
    WECOM_AGENT_ID: "agentId",
    WECOM_SECRET: "secret",
    WECOM_TOKEN: "token",
    WECOM_ENCODING_AES_KEY: "encryptKey",
    WECOM_API_ROOT: "apiRoot",
    WECOM_BOT_ID: "robot.botId",
    WECOM_BOT_SECRET: "robot.secret",
    WECOM_BOT_WS_URL: "robot.wsUrl",
  },
  policy: (config) => wecomPolicy(config),
  webhookPath: (config) => (config.mode === "robot" ? undefined : config.webhook.path),
  async create(config, dependencies) {
    if (config.mode === "robot") return createRobot(config, dependencies);
    const corpId = required(config, "corpId", "WECOM_CORP_ID");
    const agentId = required(config, "agentId", "WECOM_AGENT_ID");
    const secret = required(config, "secret", "WECOM_SECRET");
    const token = required(config, "token", "WECOM_TOKEN");
    const encryptKey = required(config, "encryptKey", "WECOM_ENCODING_AES_KEY");
    const [{ createWeComAdapter }, { createSharedToken }, { fetchAccessToken }, { createWeComScrubber }] = await Promise.all([
      import("./wecom-adapter.js"),
      import("./shared-token.js"),
      import("./wecom-api.js"),
      import("./wecom-errors.js"),
    ]);
    const scrubber = createWeComScrubber([secret, token, encryptKey]);
    // The account is named by a hash of the corp and application: one gateway answers it, and every gateway shares its token.
    const account = createHash("sha256").update(`${corpId}:${agentId}`).digest("hex").slice(0, 16);
    const accessToken = createSharedToken({
      log: dependencies.events ?? createMemoryChatEventLog(),
      key: `access-token-${account}`,
      fetchToken: () => fetchAccessToken(config.apiRoot, corpId, secret, scrubber),
      signals: dependencies.bus,
      ...(dependencies.now ? { now: dependencies.now } : {}),
    });
    const adapter = createWeComAdapter({
      corpId,
      agentId,
      token,
      encryptKey,
      apiRoot: config.apiRoot,
      accessToken,
      scrubber,
      maxImageBytes: config.maxImageBytes,
      maxFileBytes: config.maxFileBytes,
      downloadDir: path.join(dependencies.dataDir, "media", "wecom"),
      logger: dependencies.logger,
      ...(dependencies.now ? { now: dependencies.now } : {}),
    });
    const callbackPath = config.webhook.path;
    return {
      adapter,
      policy: wecomPolicy(config),
      quotas: withLimits(wecomQuotas, config.limits, "channels.wecom.limits"),
      teamProgress: config.teamProgress,
      webhook: {
        path: callbackPath,
        handle: async ({ headers, rawBody }) => {
          const outcome = await adapter.callback({ method: "POST", query: new URLSearchParams(headerValue(headers, QUERY_HEADER) ?? ""), rawBody });
          return { status: outcome.status, body: outcome.body };
        },
      },
      routes: (scope) => {
        scope.addHook("onRequest", async (request) => {
          if (request.method === "POST" && request.routeOptions.url === callbackPath) {
            const at = request.url.indexOf("?");
            request.headers[QUERY_HEADER] = at < 0 ? "" : request.url.slice(at + 1);
          }
        });
        scope.get(callbackPath, async (request, reply) => {
          const at = request.url.indexOf("?");
          const outcome = await adapter.callback({ method: "GET", query: new URLSearchParams(at < 0 ? "" : request.url.slice(at + 1)), rawBody: Buffer.alloc(0) });
          return reply.code(outcome.status).type("text/plain; charset=utf-8").send(outcome.body);
        });
      },
      account,
      // The same message always makes the same inbound id, so its reply's ids repeat too.
      inboundIdOf: (event) => `wecom-${event.platformMessageId}`,
    };
  },
});
