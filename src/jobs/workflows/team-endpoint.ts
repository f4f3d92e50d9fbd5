/**
 * Where a team's model settings may send a provider's key. The configured key (and headers, which
 * may carry credentials too) goes only to the base URL it was configured with: anyone who may
 * change a team through the API could otherwise point its `baseURL` at a listener of theirs and
 * collect the key. A team whose base URL differs needs its own `apiKey`, unless the URL's host is
 * one the operator approved (`workflows.allowedModelHosts`). Apart from ./models.ts so that the
 * gateway, which checks teams in the API, loads no provider SDK.
 */
import type { Config, ProviderConfig } from "../../config/schema.js";
import type { TeamAgent, TeamModelConfig } from "../../config/team.js";
import { providerBaseURL, resolveProvider } from "../../providers/known-providers.js";
import { parseModelRef } from "../../providers/resilient-model.js";

/** What the endpoint rule reads of the config. */
export type TeamEndpointConfig = Pick<Config, "providers" | "agent"> & { workflows: Pick<Config["workflows"], "allowedModelHosts"> };

/**
 * Why the team's model settings may not be used (written for the API's caller and the run's
 * failure), or undefined when they may: every provider one of its agents would reach is checked.
 */
export function teamEndpointIssue(config: TeamEndpointConfig, team: { agents: ReadonlyArray<Pick<TeamAgent, "model">>; modelConfig?: TeamModelConfig }): string | undefined {
  const modelConfig = team.modelConfig;
  if (modelConfig?.baseURL === undefined) return undefined;
  const references = new Set([...team.agents.map((agent) => agent.model ?? modelConfig.model ?? config.agent.model), modelConfig.model ?? config.agent.model]);
  for (const reference of references) {
    const settings = teamProviderSettings(config, parseModelRef(reference).provider, modelConfig);
    if (typeof settings === "string") return settings;
  }
  return undefined;
}

/**
 * Provider `name`'s settings with the team's key and base URL in place, or the reason they may not
 * be: the configured key and headers stay only where they were configured to go.
 */
export function teamProviderSettings(config: TeamEndpointConfig, name: string, modelConfig: TeamModelConfig): ProviderConfig | string {
  // An alias (`glm`) with no section of its own uses its catalog entry's (`providers.zhipu`).
  const configured = resolveProvider(config, name)?.settings ?? {};
  const { apiKey, baseURL } = modelConfig;
  const withKey = apiKey ? { ...configured, apiKey } : configured;
  if (baseURL === undefined) return withKey;
  const own = providerBaseURL(config, name);
  if (own !== undefined && sameEndpoint(own, baseURL)) return { ...withKey, baseURL };
  const host = new URL(baseURL).hostname.toLowerCase().replace(/^\[(.*)\]$/, "$1");
  if (config.workflows.allowedModelHosts.includes(host)) return { ...withKey, baseURL };
  // Another endpoint: nothing of the configured credentials goes along.
  const { apiKey: _key, headers: _headers, ...endpointOnly } = configured;
  if (apiKey) return { ...endpointOnly, apiKey, baseURL };
  if (!configured.apiKey && configured.headers === undefined) return { ...endpointOnly, baseURL };
  return (
    `modelConfig.baseURL ${baseURL} is not provider "${name}"'s base URL (${own ?? "none configured"}), and providers.${name}.apiKey goes only there: ` +
    `set modelConfig.apiKey, the key for that URL, or have the operator add "${host}" to workflows.allowedModelHosts`
  );
}

/** The same endpoint however it is written: `https://api.x.com/v1/` and `https://API.x.com:443/v1`. */
function sameEndpoint(first: string, second: string): boolean {
  const normal = (url: string) => {
    const parsed = new URL(url);
    return `${parsed.protocol}//${parsed.host}${parsed.pathname.replace(/\/+$/, "")}`;
  };
  return normal(first) === normal(second);
}
