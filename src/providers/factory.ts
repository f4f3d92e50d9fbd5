/**
 * Builds providers from `config.providers` and the ChatModel for `agent.model` + `agent.fallbackModels`.
 * Configuration problems surface here, at startup, as ConfigError naming what to set.
 */
import { ConfigError } from "../errors.js";
import { type WithUnsetReferences, describeUnsetReference } from "../config/references.js";
import type { Config } from "../config/schema.js";
import { createAnthropicProvider } from "./anthropic.js";
import { createOpenAICompatibleProvider } from "./openai-compatible.js";
import { createChatModel, parseModelRef, type ChatModelOptions, type ChatModelTarget, type ProviderLogger } from "./resilient-model.js";
import type { ChatModel, LlmProvider } from "./chat-model.js";
import { type ResolvedProvider, apiKeyRemedy, baseURLRemedy, knownProviderNames, resolveProvider } from "./known-providers.js";

export interface ProviderRegistryOptions {
  fetch?: typeof fetch;
  /** Clock for Retry-After dates. */
  now?: () => number;
}

export interface ProviderRegistry {
  /** The provider named `name`, built on first use. Throws ConfigError when it is unknown or lacks a key. */
  get(name: string, forModel?: string): LlmProvider;
  /** The provider and model id for a `provider/model` reference. */
  target(reference: string, path?: string): ChatModelTarget;
}

export function createProviderRegistry(config: Config & WithUnsetReferences, options: ProviderRegistryOptions = {}): ProviderRegistry {
  const built = new Map<string, LlmProvider>();

  function get(name: string, forModel?: string, path = "agent.model"): LlmProvider {
    const existing = built.get(name);
    if (existing) return existing;
    const provider = build(name, forModel, path);
    built.set(name, provider);
    return provider;
  }

  function build(name: string, forModel: string | undefined, path: string): LlmProvider {
    const provider = resolveProvider(config, name);
    if (!provider) throw unknownProvider(config, name, forModel, path);
    const { settings, type, baseURL } = provider;
    if (!baseURL) {
      const unset = describeUnsetReference(config, `${provider.settingsPath}.baseURL`);
      throw new ConfigError(
        `Provider "${name}"${forModel ? ` (model ${forModel})` : ""} has no baseURL${unset ? `: ${unset}` : ""}. Set ${baseURLRemedy(provider)}.`,
        `${provider.settingsPath}.baseURL`,
      );
    }
    const apiKey = settings.apiKey || undefined;
    if (!apiKey && !provider.keyless) throw missingApiKey(config, provider, forModel);
    // Azure takes the key in its own header too.
    const keyHeader = apiKey && provider.entry?.apiKeyHeader ? { [provider.entry.apiKeyHeader]: apiKey } : undefined;
    const headers = keyHeader || settings.headers ? { ...keyHeader, ...settings.headers } : undefined;
    const common = { name, apiKey, baseURL, headers, timeoutMs: config.agent.requestTimeoutMs, deadlineMs: config.agent.requestDeadlineMs, fetch: options.fetch, now: options.now };
    if (type === "anthropic") return createAnthropicProvider(common);
    // api.openai.com's reasoning models refuse `max_tokens`; compatible servers often refuse its replacement.
    const maxTokensField = new URL(baseURL).hostname === "api.openai.com" ? "max_completion_tokens" : "max_tokens";
    return createOpenAICompatibleProvider({ ...common, maxTokensField });
  }

  return {
    get: (name, forModel) => get(name, forModel),
    target(reference, path = "agent.model") {
      const { provider, model } = parseModelRef(reference);
      return { provider: get(provider, reference, path), model };
    },
  };
}

export interface ResolveChatModelOptions extends ProviderRegistryOptions, Pick<ChatModelOptions, "sleep" | "random" | "baseDelayMs" | "maxDelayMs"> {
  /** `provider/model`; default `agent.model`. The configured fallbacks follow it either way. */
  model?: string;
  /** Share one registry (and its clients) between several models. */
  registry?: ProviderRegistry;
  logger?: ProviderLogger;
}

/**
 * The ChatModel for `reference` (default `agent.model`) followed by `agent.fallbackModels`, with
 * `agent.providerRetries` retries each. Accepts `(config, "provider/model")` or `(config, options)`.
 */
export function resolveChatModel(config: Config, referenceOrOptions?: string | ResolveChatModelOptions, moreOptions: ResolveChatModelOptions = {}): ChatModel {
  const options = typeof referenceOrOptions === "object" ? referenceOrOptions : { ...moreOptions, model: referenceOrOptions ?? moreOptions.model };
  const registry = options.registry ?? createProviderRegistry(config, options);
  const primary = options.model ?? config.agent.model;
  const references = [primary, ...config.agent.fallbackModels.filter((reference) => reference !== primary)];
  const targets = [...new Set(references)].map((reference, index) =>
    registry.target(reference, index === 0 ? "agent.model" : "agent.fallbackModels"),
  );
  return createChatModel({
    targets,
    retries: config.agent.providerRetries,
    sleep: options.sleep,
    random: options.random,
    baseDelayMs: options.baseDelayMs,
    maxDelayMs: options.maxDelayMs,
    logger: options.logger,
  });
}

function missingApiKey(config: WithUnsetReferences, provider: ResolvedProvider, forModel: string | undefined): ConfigError {
  const subject = forModel ? `provider "${provider.name}" (model ${forModel})` : `provider "${provider.name}"`;
  const path = `${provider.settingsPath}.apiKey`;
  const unset = describeUnsetReference(config, path);
  return new ConfigError(`No API key for ${subject}${unset ? `: ${unset}` : ""}. Set ${apiKeyRemedy(provider)}.`, path);
}

function unknownProvider(config: Config, name: string, forModel: string | undefined, path: string): ConfigError {
  const configured = Object.keys(config.providers);
  const listed = configured.length ? configured.join(", ") : "none";
  return new ConfigError(
    `Unknown provider "${name}"${forModel ? ` in model "${forModel}"` : ""}. Configured providers: ${listed}; ` +
      `built in: ${knownProviderNames.join(", ")}. Add providers.${name} with a type, baseURL and apiKey to the config.`,
    path,
  );
}
