import { afterEach, describe, expect, it } from "vitest";
import { ConfigSchema, type Config } from "../../../src/config/schema.js";
import { ConfigError } from "../../../src/errors.js";
import { createProviderRegistry, resolveChatModel } from "../../../src/providers/factory.js";
import { startFakeAnthropic } from "../../support/fake-anthropic-server.js";
import { startFakeOpenAI } from "../../support/fake-openai-server.js";
import { collect, recordingSleep, textOf } from "./stream-helpers.js";

const closers: Array<() => Promise<void>> = [];
afterEach(async () => {
  await Promise.all(closers.splice(0).map((close) => close()));
});

function config(input: Record<string, unknown>): Config {
  return ConfigSchema.parse(input);
}

function configError(action: () => unknown): ConfigError {
  try {
    action();
  } catch (error) {
    if (error instanceof ConfigError) return error;
    throw error;
  }
  throw new Error("expected a ConfigError");
}

describe("resolveChatModel", () => {
  it("names OPENAI_API_KEY when openai has no key", () => {
    const error = configError(() => resolveChatModel(config({ agent: { model: "openai/gpt-4o-mini" } })));
    expect(error.message).toBe('No API key for provider "openai" (model openai/gpt-4o-mini). Set OPENAI_API_KEY or providers.openai.apiKey in the config.');
    expect(error.path).toBe("providers.openai.apiKey");
  });

  it("names ANTHROPIC_API_KEY when anthropic has no key", () => {
    const error = configError(() => resolveChatModel(config({ agent: { model: "anthropic/claude-sonnet-5" } })));
    expect(error.message).toBe(
      'No API key for provider "anthropic" (model anthropic/claude-sonnet-5). Set ANTHROPIC_API_KEY or providers.anthropic.apiKey in the config.',
    );
  });

  it("names the config field for other providers, fallbacks included", () => {
    const error = configError(() =>
      resolveChatModel(config({ agent: { model: "openai/gpt-4o-mini", fallbackModels: ["deepseek/deepseek-chat"] }, providers: { openai: { apiKey: "sk" } } })),
    );
    expect(error.message).toBe('No API key for provider "deepseek" (model deepseek/deepseek-chat). Set DEEPSEEK_API_KEY or providers.deepseek.apiKey in the config.');
    expect(error.path).toBe("providers.deepseek.apiKey");
    const custom = configError(() => resolveChatModel(config({ agent: { model: "acme/m1" }, providers: { acme: { baseURL: "https://llm.example.com/v1" } } })));
    expect(custom.message).toBe('No API key for provider "acme" (model acme/m1). Set providers.acme.apiKey in the config.');
  });

  it("needs no key for ollama or a server on loopback", () => {
    expect(resolveChatModel(config({ agent: { model: "ollama/llama3.2" } })).id).toBe("ollama/llama3.2");
    const local = config({ agent: { model: "lmstudio/qwen3" }, providers: { lmstudio: { baseURL: "http://127.0.0.1:1234/v1" } } });
    expect(resolveChatModel(local).id).toBe("lmstudio/qwen3");
  });

  it("lists the configured providers for an unknown one", () => {
    const error = configError(() =>
      resolveChatModel(config({ agent: { model: "acme/large" }, providers: { openai: { apiKey: "sk" }, deepseek: { apiKey: "sk" } } })),
    );
    expect(error.message).toContain('Unknown provider "acme" in model "acme/large"');
    expect(error.message).toContain("built in: openai, anthropic, deepseek, qwen, dashscope");
    expect(error.message).toContain("Configured providers: openai, deepseek");
    expect(error.path).toBe("agent.model");
  });

  it("asks for a baseURL for a configured provider it does not know", () => {
    const error = configError(() => resolveChatModel(config({ agent: { model: "acme/m1" }, providers: { acme: { apiKey: "sk" } } })));
    expect(error.message).toContain("providers.acme.baseURL");
  });

  it("streams from configured providers with the agent's retries and fallbacks", async () => {
    const openai = await startFakeOpenAI({ script: [{ error: { status: 500 } }, { error: { status: 500 } }] });
    const anthropic = await startFakeAnthropic({ script: [{ text: "from the fallback" }] });
    closers.push(openai.close, anthropic.close);
    const recorder = recordingSleep();
    const chatModel = resolveChatModel(
      config({
        agent: { model: "local/m1", fallbackModels: ["claude/claude-test-model"], providerRetries: 1 },
        providers: {
          local: { baseURL: openai.url, headers: { "X-Team": "bots" } },
          claude: { type: "anthropic", apiKey: "sk-ant", baseURL: anthropic.url },
        },
      }),
      { sleep: recorder.sleep },
    );
    expect(chatModel.id).toBe("local/m1");
    const parts = await collect(chatModel.stream({ messages: [{ role: "user", content: "hi" }], maxTokens: 64 }));
    expect(textOf(parts)).toBe("from the fallback");
    expect(openai.requests).toHaveLength(2);
    expect(openai.requests[0]?.headers["x-team"]).toBe("bots");
    expect(recorder.waits).toHaveLength(1);
    expect(anthropic.requests[0]?.body).toMatchObject({ model: "claude-test-model", max_tokens: 64 });
  });

  it("accepts a model reference in place of agent.model", async () => {
    const server = await startFakeOpenAI({ script: [{ text: "ok" }] });
    closers.push(server.close);
    const settings = config({ providers: { local: { baseURL: server.url } } });
    const chatModel = resolveChatModel(settings, "local/other-model");
    expect(chatModel.id).toBe("local/other-model");
    await collect(chatModel.stream({ messages: [{ role: "user", content: "hi" }] }));
    expect(server.requests[0]?.body.model).toBe("other-model");
  });

  it("sends max_completion_tokens to api.openai.com and max_tokens elsewhere", async () => {
    const server = await startFakeOpenAI({ script: [{ text: "a" }, { text: "b" }] });
    closers.push(server.close);
    // Route the built-in endpoints to the fake: no test touches the internet.
    const redirect: typeof fetch = (_input, init) => fetch(`${server.url}/chat/completions`, init);
    const settings = config({ providers: { openai: { apiKey: "sk-openai" }, deepseek: { apiKey: "sk-deepseek" } } });
    const registry = createProviderRegistry(settings, { fetch: redirect });
    const request = { messages: [{ role: "user" as const, content: "hi" }], maxTokens: 50 };
    await collect(resolveChatModel(settings, { model: "openai/gpt-5", registry }).stream(request));
    await collect(resolveChatModel(settings, { model: "deepseek/deepseek-chat", registry }).stream(request));
    expect(server.requests[0]?.body).toMatchObject({ max_completion_tokens: 50 });
    expect(server.requests[0]?.headers.authorization).toBe("Bearer sk-openai");
    expect(server.requests[1]?.body).toMatchObject({ max_tokens: 50 });
    expect(server.requests[1]?.headers.authorization).toBe("Bearer sk-deepseek");
  });
});
