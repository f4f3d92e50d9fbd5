/**
 * A provider name resolved against the config and the catalog (src/config/provider-catalog.ts),
 * apart from the factory so that code which only needs to know where a provider's key goes (the
 * team-model rule in the gateway) loads no SDK.
 */
import { type CatalogProvider, catalogEntry, providerCatalog, providerVariables } from "../config/provider-catalog.js";
import type { Config, ProviderConfig } from "../config/schema.js";

/** Every name the catalog knows (ids and aliases), for messages. */
export const knownProviderNames: readonly string[] = providerCatalog.flatMap((entry) => [entry.id, ...(entry.aliases ?? [])]);

/** A provider name with the settings it is used with. */
export interface ResolvedProvider {
  name: string;
  /** Its catalog entry, if it has one. */
  entry?: CatalogProvider;
  /** Where its settings are in the config: `providers.<name>`, or the catalog id's for an alias with none of its own. */
  settingsPath: string;
  settings: ProviderConfig;
  type: "openai" | "anthropic";
  baseURL?: string;
  /** Whether it may go without a key: a keyless catalog entry, or a server on this machine. */
  keyless: boolean;
}

/** Undefined for a name that is neither configured nor in the catalog. */
export function resolveProvider(config: Pick<Config, "providers">, name: string): ResolvedProvider | undefined {
  const entry = catalogEntry(name);
  const own = config.providers[name];
  if (!own && !entry) return undefined;
  // An alias (`glm`) without its own section reads its entry's (`providers.zhipu`, filled by ZHIPU_API_KEY).
  const settingsName = own || !entry ? name : entry.id;
  const settings = config.providers[settingsName] ?? {};
  const type = settings.type ?? entry?.api ?? "openai";
  const baseURL = settings.baseURL ?? entry?.baseURL ?? (type === "anthropic" && !entry ? catalogEntry("anthropic")?.baseURL : undefined);
  return {
    name,
    entry,
    settingsPath: `providers.${settingsName}`,
    settings,
    type,
    baseURL,
    keyless: Boolean(entry?.keyless) || (baseURL !== undefined && isLoopback(baseURL)),
  };
}

/**
 * The base URL provider `name` is reached at: its configured one, else the catalog's default
 * (where `providers.<name>.apiKey` is sent). Undefined for an unknown name or one without a default.
 */
export function providerBaseURL(config: Pick<Config, "providers">, name: string): string | undefined {
  return resolveProvider(config, name)?.baseURL;
}

/** What to set for a provider's key: `DEEPSEEK_API_KEY or providers.deepseek.apiKey`. */
export function apiKeyRemedy(provider: Pick<ResolvedProvider, "entry" | "settingsPath">): string {
  if (!provider.entry) return `${provider.settingsPath}.apiKey in the config`;
  return `${providerVariables(provider.entry).apiKey.at(-1)} or ${provider.settingsPath}.apiKey in the config`;
}

/** What to set for a provider's base URL. */
export function baseURLRemedy(provider: Pick<ResolvedProvider, "entry" | "settingsPath">): string {
  const example = provider.entry?.baseURLExample ?? "https://api.example.com/v1";
  if (!provider.entry) return `${provider.settingsPath}.baseURL in the config, e.g. ${example}`;
  return `${providerVariables(provider.entry).baseURL} or ${provider.settingsPath}.baseURL in the config, e.g. ${example}`;
}

// A model server on this machine (Ollama, vLLM, LM Studio, a test fake) rarely wants a key.
export function isLoopback(baseURL: string): boolean {
  const host = new URL(baseURL).hostname.replace(/^\[|\]$/g, "");
  return host === "localhost" || host.endsWith(".localhost") || host === "::1" || /^127\.\d+\.\d+\.\d+$/.test(host);
}
