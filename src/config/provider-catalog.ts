/**
 * The model providers CountBot knows by name, as data: where each is reached, which wire protocol
 * it speaks, which environment variables fill its settings, whether it takes a key, and what its
 * common models support. `deepseek/deepseek-chat` then needs only `DEEPSEEK_API_KEY`; a provider
 * not listed here still works with `providers.<name>.type` and `.baseURL` in the config.
 *
 * It lives with the config because the loader maps each entry's variables onto
 * `providers.<id>.apiKey` and `.baseURL`; src/providers/known-providers.ts resolves a name against
 * it for the factory. The README's "Providers" table is rendered from it ({@link renderProviderTable};
 * a test compares the two).
 */

/** What a model supports, where it is known. */
export interface CatalogModel {
  id: string;
  /** Function (tool) calls. */
  tools: boolean;
  /** Images in the request. */
  images: boolean;
  /** Reasoning output beside the answer (`reasoning_content`, thinking blocks). */
  reasoning: boolean;
  /** Context window in tokens. */
  contextWindow?: number;
}

export interface CatalogProvider {
  /** The name in `provider/model`, and in `providers.<id>`. */
  id: string;
  /** What people call it. */
  label: string;
  /** Wire protocol: OpenAI's chat completions or Anthropic's messages. */
  api: "openai" | "anthropic";
  /** The default base URL; none where each account has its own (Azure). */
  baseURL?: string;
  /** An example of the base URL to set, when there is no default. */
  baseURLExample?: string;
  /** A local server that takes no key: none is asked for, none is sent unless one is configured. */
  keyless?: boolean;
  /** Other names a model reference may use (`glm/glm-4.6`); they read this entry's settings. */
  aliases?: readonly string[];
  /** Variables read for the key besides `<ID>_API_KEY` (the vendor's own name), applied before it. */
  extraApiKeyVariables?: readonly string[];
  /** A header that carries the key besides `Authorization: Bearer` (Azure's `api-key`). */
  apiKeyHeader?: string;
  /** What `onboard` proposes; none for servers that serve whatever was loaded. */
  defaultModel?: string;
  /** Common models and what they support. */
  models: readonly CatalogModel[];
}

const model = (id: string, features: Array<"tools" | "images" | "reasoning">, contextWindow?: number): CatalogModel => ({
  id,
  tools: features.includes("tools"),
  images: features.includes("images"),
  reasoning: features.includes("reasoning"),
  ...(contextWindow === undefined ? {} : { contextWindow }),
});

/** Every known provider, in the order `onboard` offers them. */
export const providerCatalog: readonly CatalogProvider[] = [
  {
    id: "openai",
    label: "OpenAI",
    api: "openai",
    baseURL: "https://api.openai.com/v1",
    defaultModel: "gpt-4o-mini",
    models: [model("gpt-4o-mini", ["tools", "images"], 128_000), model("gpt-4.1", ["tools", "images"], 1_047_576), model("gpt-5", ["tools", "images"], 400_000)],
  },
  {
    id: "anthropic",
    label: "Anthropic",
    api: "anthropic",
    baseURL: "https://api.anthropic.com",
    defaultModel: "claude-sonnet-4-5",
    models: [model("claude-sonnet-4-5", ["tools", "images", "reasoning"], 200_000), model("claude-haiku-4-5", ["tools", "images", "reasoning"], 200_000)],
  },
  {
    id: "deepseek",
    label: "DeepSeek",
    api: "openai",
    baseURL: "https://api.deepseek.com/v1",
    defaultModel: "deepseek-chat",
    models: [model("deepseek-chat", ["tools"], 128_000), model("deepseek-reasoner", ["tools", "reasoning"], 128_000)],
  },
  {
    id: "qwen",
    label: "Qwen (Alibaba DashScope)",
    api: "openai",
    baseURL: "https://dashscope.aliyuncs.com/compatible-mode/v1",
    aliases: ["dashscope"],
    extraApiKeyVariables: ["DASHSCOPE_API_KEY"],
    defaultModel: "qwen-plus",
    models: [model("qwen-plus", ["tools", "reasoning"], 131_072), model("qwen-max", ["tools"], 32_768), model("qwen-vl-max", ["images"], 131_072)],
  },
  {
    id: "moonshot",
    label: "Moonshot (Kimi)",
    api: "openai",
    baseURL: "https://api.moonshot.ai/v1",
    aliases: ["kimi"],
    defaultModel: "kimi-k2-0905-preview",
    models: [model("kimi-k2-0905-preview", ["tools"], 262_144), model("kimi-k2-thinking", ["tools", "reasoning"], 262_144)],
  },
  {
    id: "zhipu",
    label: "Zhipu GLM (BigModel)",
    api: "openai",
    baseURL: "https://open.bigmodel.cn/api/paas/v4",
    aliases: ["glm"],
    defaultModel: "glm-4.6",
    models: [model("glm-4.6", ["tools", "reasoning"], 200_000), model("glm-4.5v", ["images", "reasoning"], 65_536)],
  },
  {
    id: "minimax",
    label: "MiniMax",
    api: "openai",
    baseURL: "https://api.minimax.io/v1",
    defaultModel: "MiniMax-M2",
    models: [model("MiniMax-M2", ["tools", "reasoning"], 204_800)],
  },
  {
    id: "siliconflow",
    label: "SiliconFlow",
    api: "openai",
    baseURL: "https://api.siliconflow.cn/v1",
    defaultModel: "deepseek-ai/DeepSeek-V3",
    models: [model("deepseek-ai/DeepSeek-V3", ["tools"], 131_072), model("Qwen/Qwen3-32B", ["tools", "reasoning"], 131_072)],
  },
  {
    id: "openrouter",
    label: "OpenRouter",
    api: "openai",
    baseURL: "https://openrouter.ai/api/v1",
    defaultModel: "openai/gpt-4o-mini",
    models: [],
  },
  {
    id: "groq",
    label: "Groq",
    api: "openai",
    baseURL: "https://api.groq.com/openai/v1",
    defaultModel: "llama-3.3-70b-versatile",
    models: [model("llama-3.3-70b-versatile", ["tools"], 131_072), model("openai/gpt-oss-120b", ["tools", "reasoning"], 131_072)],
  },
  {
    id: "together",
    label: "Together AI",
    api: "openai",
    baseURL: "https://api.together.xyz/v1",
    defaultModel: "meta-llama/Llama-3.3-70B-Instruct-Turbo",
    models: [model("meta-llama/Llama-3.3-70B-Instruct-Turbo", ["tools"], 131_072)],
  },
  {
    id: "mistral",
    label: "Mistral",
    api: "openai",
    baseURL: "https://api.mistral.ai/v1",
    defaultModel: "mistral-small-latest",
    models: [model("mistral-small-latest", ["tools", "images"], 128_000), model("mistral-large-latest", ["tools"], 128_000)],
  },
  {
    id: "xai",
    label: "xAI (Grok)",
    api: "openai",
    baseURL: "https://api.x.ai/v1",
    defaultModel: "grok-4",
    models: [model("grok-4", ["tools", "images"], 256_000), model("grok-3-mini", ["tools", "reasoning"], 131_072)],
  },
  {
    id: "gemini",
    label: "Google Gemini (OpenAI-compatible endpoint)",
    api: "openai",
    baseURL: "https://generativelanguage.googleapis.com/v1beta/openai",
    defaultModel: "gemini-2.5-flash",
    models: [model("gemini-2.5-flash", ["tools", "images"], 1_048_576), model("gemini-2.5-pro", ["tools", "images"], 1_048_576)],
  },
  {
    id: "azure-openai",
    label: "Azure OpenAI (v1 API; the model is the deployment name)",
    api: "openai",
    baseURLExample: "https://<resource>.openai.azure.com/openai/v1",
    apiKeyHeader: "api-key",
    defaultModel: "gpt-4o-mini",
    models: [],
  },
  {
    id: "ollama",
    label: "Ollama (local)",
    api: "openai",
    baseURL: "http://localhost:11434/v1",
    keyless: true,
    defaultModel: "llama3.2",
    models: [model("llama3.2", ["tools"], 131_072), model("qwen3", ["tools", "reasoning"], 40_960)],
  },
  {
    id: "vllm",
    label: "vLLM (local)",
    api: "openai",
    baseURL: "http://localhost:8000/v1",
    keyless: true,
    models: [],
  },
  {
    id: "lmstudio",
    label: "LM Studio (local)",
    api: "openai",
    baseURL: "http://localhost:1234/v1",
    keyless: true,
    models: [],
  },
];

/** `azure-openai` → `AZURE_OPENAI`: the prefix of an entry's variables. */
export function variablePrefix(id: string): string {
  return id.toUpperCase().replace(/[^A-Z0-9]/g, "_");
}

/** The variables that fill `providers.<id>`, in the order the loader applies them (the last set one wins). */
export function providerVariables(entry: Pick<CatalogProvider, "id" | "extraApiKeyVariables">): { apiKey: string[]; baseURL: string } {
  const prefix = variablePrefix(entry.id);
  return { apiKey: [...(entry.extraApiKeyVariables ?? []), `${prefix}_API_KEY`], baseURL: `${prefix}_BASE_URL` };
}

/** The entry for `name`: its id or one of its aliases. */
export function catalogEntry(name: string): CatalogProvider | undefined {
  return providerCatalog.find((entry) => entry.id === name || entry.aliases?.includes(name));
}

/** The catalog as the README's Markdown table. */
export function renderProviderTable(): string {
  const rows = providerCatalog.map((entry) => {
    const variables = providerVariables(entry);
    const key = entry.keyless ? `none (\`${variables.apiKey.at(-1)}\` if the server wants one)` : variables.apiKey.map((name) => `\`${name}\``).join(" or ");
    const baseURL = entry.baseURL ? `\`${entry.baseURL}\`` : `none: set it, e.g. \`${entry.baseURLExample ?? "https://…/v1"}\``;
    const names = [entry.id, ...(entry.aliases ?? [])].map((name) => `\`${name}\``).join(", ");
    const models = entry.models.length === 0 ? "any it serves" : entry.models.map(describeModel).join("; ");
    return `| ${names} | ${entry.label} | ${entry.api === "anthropic" ? "Anthropic" : "OpenAI"} | ${key} | ${baseURL} (\`${variables.baseURL}\`) | ${models} |`;
  });
  return ["| provider | who | API | key | base URL (variable) | models: tools, images, reasoning, context |", "| --- | --- | --- | --- | --- | --- |", ...rows].join("\n");
}

function describeModel(entry: CatalogModel): string {
  const features = [entry.tools && "tools", entry.images && "images", entry.reasoning && "reasoning"].filter(Boolean).join(", ");
  const window = entry.contextWindow;
  const context = window === undefined ? "" : window >= 1_000_000 ? `, ${Math.round(window / 1_000_000)}M` : `, ${Math.round(window / 1000)}K`;
  return `\`${entry.id}\` (${features || "text"}${context})`;
}
