/**
 * Built-in defaults for well-known provider names, apart from the factory so that code which only
 * needs to know where a provider's key goes (the team-model rule in the gateway) loads no SDK.
 */
import type { Config } from "../config/schema.js";

export interface KnownProvider {
  type: "openai" | "anthropic";
  baseURL: string;
  /** Local servers that take no key. */
  keyless?: boolean;
  /** The environment variable the config loader maps onto `providers.<name>.apiKey`. */
  apiKeyVariable?: string;
}

/** Defaults for well-known names, so `deepseek/deepseek-chat` needs only a key. Config always wins. */
export const knownProviders: Record<string, KnownProvider> = {
  openai: { type: "openai", baseURL: "https://api.openai.com/v1", apiKeyVariable: "OPENAI_API_KEY" },
  anthropic: { type: "anthropic", baseURL: "https://api.anthropic.com", apiKeyVariable: "ANTHROPIC_API_KEY" },
  deepseek: { type: "openai", baseURL: "https://api.deepseek.com/v1" },
  glm: { type: "openai", baseURL: "https://open.bigmodel.cn/api/paas/v4" },
  zhipu: { type: "openai", baseURL: "https://open.bigmodel.cn/api/paas/v4" },
  qwen: { type: "openai", baseURL: "https://dashscope.aliyuncs.com/compatible-mode/v1" },
  dashscope: { type: "openai", baseURL: "https://dashscope.aliyuncs.com/compatible-mode/v1" },
  moonshot: { type: "openai", baseURL: "https://api.moonshot.ai/v1" },
  openrouter: { type: "openai", baseURL: "https://openrouter.ai/api/v1" },
  groq: { type: "openai", baseURL: "https://api.groq.com/openai/v1" },
  ollama: { type: "openai", baseURL: "http://localhost:11434/v1", keyless: true },
  vllm: { type: "openai", baseURL: "http://localhost:8000/v1", keyless: true },
};

/**
 * The base URL provider `name` is reached at: its configured one, else the built-in default for a
 * well-known name (where `providers.<name>.apiKey` is sent). Undefined for an unknown name.
 */
export function providerBaseURL(config: Pick<Config, "providers">, name: string): string | undefined {
  const configured = config.providers[name];
  const known = knownProviders[name];
  const type = configured?.type ?? known?.type ?? "openai";
  return configured?.baseURL ?? known?.baseURL ?? (type === "anthropic" ? knownProviders.anthropic?.baseURL : undefined);
}
