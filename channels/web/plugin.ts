/** The web page as a channel plugin: on by default, since the HTTP API serves it. */
import path from "node:path";
import { z } from "zod";
import { type AdmissionPolicy, type ChannelInstance, defineChannel } from "../../src/gateway/kit/index.js";
import { WebAdapter } from "./web-adapter.js";

export const WebConfigSchema = z.strictObject({
  enabled: z.boolean().default(true).describe("Serve the web chat (`POST /api/chat/:chatId/messages`, `GET /ws`) behind the API token."),
  rateLimitPerMinute: z
    .number()
    .int()
    .positive()
    .max(100_000)
    .optional()
    .describe("Messages one sender id may post per minute; beyond it the POST answers 429. Unset: no limit (whoever holds the API token is trusted, and the sender ids are the page's own word)."),
  showNotices: z.boolean().default(true).describe("Stream tool-call and task notices to the page."),
});

export type WebConfig = z.infer<typeof WebConfigSchema>;

export const webChannel = defineChannel({
  name: "web",
  description: "The web chat of the HTTP API.",
  configSchema: WebConfigSchema.prefault({ enabled: true }),
  policy: (config) => webPolicy(config),
  async create(config, { bus, events, logger, now, newId, dataDir }) {
    return webChannelOf(new WebAdapter({ bus, events, logger, now, newId, mediaDirectory: path.join(dataDir, "media", "web") }), config);
  },
});

/** The web channel around an adapter: how the shared runtime treats it. */
export function webChannelOf(adapter: WebAdapter, config: Omit<WebConfig, "enabled">): ChannelInstance {
  return {
    adapter,
    // Whoever reaches the route passed the API's token (or the API is on loopback only).
    policy: webPolicy(config),
    routes: (scope) => adapter.registerRoutes(scope),
    // The id the POST answers with is the inbound message's: replies' `answers` name it.
    inboundIdOf: (event) => event.platformMessageId,
    showNotices: config.showNotices,
    showTransientNotices: config.showNotices,
    annotateSends: true,
  };
}

function webPolicy(config: Pick<WebConfig, "rateLimitPerMinute">): AdmissionPolicy {
  return { allowFrom: [], open: true, groupPolicy: "all", pairing: false, rateLimit: config.rateLimitPerMinute === undefined ? false : { messages: config.rateLimitPerMinute, perMs: 60_000 } };
}
