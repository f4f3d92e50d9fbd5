/**
 * The models team agents run on, resolved with the providers' factory by `provider/model`: the
 * agent's own model, else the team's (`modelConfig.model`), else `agent.model`. A team whose model
 * settings carry their own key or endpoint gets that provider with them in place of the
 * configured ones. Models are built once per distinct setting and kept.
 * A provider's configured key goes only to the base URL it was configured with (./team-endpoint.ts):
 * a team that slipped past the API's check (a config-file team, a config reload) fails its run with
 * the reason before anything is sent.
 */
import type { Logger } from "pino";
import type { Config } from "../../config/schema.js";
import type { TeamAgent } from "../../config/team.js";
import { ConfigError } from "../../errors.js";
import { resolveChatModel } from "../../providers/factory.js";
import type { ChatModel } from "../../providers/chat-model.js";
import { parseModelRef } from "../../providers/resilient-model.js";
import { traceModel } from "../../providers/traced-model.js";
import type { TeamRecord } from "../../store/team-record.js";
import type { ResolveTeamModel } from "./runner.js";
import { teamProviderSettings } from "./team-endpoint.js";

export function createTeamModels(config: Config, options: { logger?: Logger; fetch?: typeof fetch } = {}): ResolveTeamModel {
  const built = new Map<string, ChatModel>();
  return (team: TeamRecord, agent: TeamAgent | undefined) => {
    const reference = agent?.model ?? team.modelConfig?.model ?? config.agent.model;
    const { apiKey, baseURL } = team.modelConfig ?? {};
    const key = JSON.stringify([reference, apiKey ?? null, baseURL ?? null]);
    const existing = built.get(key);
    if (existing) return existing;
    let effective = config;
    if (apiKey !== undefined || baseURL !== undefined) {
      const { provider } = parseModelRef(reference);
      const settings = teamProviderSettings(config, provider, team.modelConfig ?? {});
      if (typeof settings === "string") throw new ConfigError(`team "${team.name}": ${settings}`, "modelConfig.baseURL");
      effective = { ...config, providers: { ...config.providers, [provider]: settings } };
    }
    const model = traceModel(resolveChatModel(effective, { model: reference, logger: options.logger, fetch: options.fetch }));
    built.set(key, model);
    return model;
  };
}
