/**
 * The WeCom plugin: `channels.wecom` in the config; WECOM_CORP_ID, WECOM_AGENT_ID, WECOM_SECRET,
 * WECOM_TOKEN, WECOM_ENCODING_AES_KEY and WECOM_API_ROOT in the environment. The adapter is
 * imported only when the channel is created (see ChannelPlugin).
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
import { type AdmissionPolicy, createMemoryChatEventLog, defineChannel, headerValue, withLimits } from "../../src/gateway/kit/index.js";
import { type WeComConfig, WeComConfigSchema } from "./config.js";
import { wecomQuotas } from "./quotas.js";

export type { WeComConfig } from "./config.js";

export const QUERY_HEADER = "x-countbot-wecom-query";

type Field = "corpId" | "agentId" | "secret" | "token" | "encryptKey";

function required(config: WeComConfig, field: Field, variable: string): string {
  const value = config[field];
  if (!value) throw new ConfigError(`channels.wecom is enabled but has no ${field}: set ${variable} or channels.wecom.${field}`, `channels.wecom.${field}`);
  return value;
}

/** Who may talk to the bot: members by UserID, and every member of the listed chats. */
export function wecomPolicy(config: WeComConfig): AdmissionPolicy {
  return { allowFrom: [...config.allowFrom, ...config.allowChats], groupPolicy: config.groupPolicy, groupContext: config.groupContext, rateLimit: { messages: config.rateLimitPerMinute, perMs: 60_000 } };
}

export const wecomChannel = defineChannel({
  name: "wecom",
  description: "WeCom (企业微信) self-built application: the encrypted callback in, the application message API out.",
  configSchema: WeComConfigSchema,
  environment: {
    WECOM_CORP_ID: "corpId",
    WECOM_AGENT_ID: "agentId",
    WECOM_SECRET: "secret",
    WECOM_TOKEN: "token",
    WECOM_ENCODING_AES_KEY: "encryptKey",
    WECOM_API_ROOT: "apiRoot",
  },
  policy: (config) => wecomPolicy(config),
  async create(config, dependencies) {
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
