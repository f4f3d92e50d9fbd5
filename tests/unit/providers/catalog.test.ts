/**
 * Every provider of the catalog resolved as an operator sets it up: only its variables in the
 * environment, no config file. At the fake OpenAI and Anthropic servers: the base URL from
 * `<ID>_BASE_URL` (or the catalog's default, through a redirecting fetch: no test leaves
 * loopback), the key from `<ID>_API_KEY`, and no Authorization header at all from a keyless one.
 */
import { readFileSync } from "node:fs";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadConfig } from "../../../src/config/load.js";
import { type CatalogProvider, providerCatalog, providerVariables, renderProviderTable } from "../../../src/config/provider-catalog.js";
import { ConfigError } from "../../../src/errors.js";
import { resolveChatModel } from "../../../src/providers/factory.js";
import { type FakeAnthropicServer, startFakeAnthropic } from "../../support/fake-anthropic-server.js";
import { type FakeOpenAIServer, startFakeOpenAI } from "../../support/fake-openai-server.js";
import { collect, textOf } from "./stream-helpers.js";

let root: string;
let openai: FakeOpenAIServer;
let anthropic: FakeAnthropicServer;

beforeAll(async () => {
  root = await mkdtemp(path.join(tmpdir(), "countbot-catalog-"));
  openai = await startFakeOpenAI({ script: () => ({ text: "OK" }) });
  anthropic = await startFakeAnthropic({ script: () => ({ text: "OK" }) });
});
afterAll(async () => {
  await Promise.all([openai?.close(), anthropic?.close()]);
  await rm(root, { recursive: true, force: true });
});

/** The config as the CLI loads it from this environment alone (no config file anywhere). */
function configFrom(env: Record<string, string>) {
  return loadConfig({ env, cwd: root, homeDir: root });
}

const modelOf = (entry: CatalogProvider) => entry.defaultModel ?? "served-model";
const keyOf = (entry: CatalogProvider) => `sk-${entry.id}-0123456789`;
const fakeFor = (entry: CatalogProvider) => (entry.api === "anthropic" ? anthropic : openai);

/** Streams one answer from `reference` and returns the request the fake server got. */
async function ask(env: Record<string, string>, entry: CatalogProvider, fetch?: typeof globalThis.fetch) {
  const server = fakeFor(entry);
  const before = server.requests.length;
  const model = resolveChatModel(configFrom(env), { fetch });
  expect(textOf(await collect(model.stream({ messages: [{ role: "user", content: "hi" }], maxTokens: 5 })))).toBe("OK");
  expect(server.requests).toHaveLength(before + 1);
  return server.requests.at(-1)!;
}

/** A fetch that sends every request to the fake server, recording the URL it was meant for. */
function redirecting(entry: CatalogProvider, seen: string[]): typeof fetch {
  const target = entry.api === "anthropic" ? `${anthropic.url}/v1/messages` : `${openai.url}/chat/completions`;
  return (input, init) => {
    seen.push(input instanceof Request ? input.url : String(input));
    return fetch(target, init);
  };
}

it("is the README's Providers table", () => {
  const readme = readFileSync(new URL("../../../README.md", import.meta.url), "utf8");
  const section = readme.slice(readme.indexOf("## Providers"), readme.indexOf("\n## ", readme.indexOf("## Providers") + 1));
  expect(section, "paste renderProviderTable() (src/config/provider-catalog.ts) into README.md's Providers section").toContain(`${renderProviderTable()}\n`);
});

it("lists at least the providers people run", () => {
  const ids = providerCatalog.map((entry) => entry.id);
  expect(ids).toEqual(
    expect.arrayContaining(["openai", "anthropic", "deepseek", "qwen", "moonshot", "zhipu", "minimax", "siliconflow", "openrouter", "groq", "together", "mistral", "xai", "gemini", "azure-openai", "ollama", "vllm", "lmstudio"]),
  );
  expect(new Set(ids).size).toBe(ids.length);
  expect(providerCatalog.filter((entry) => entry.keyless).map((entry) => entry.id)).toEqual(["ollama", "vllm", "lmstudio"]);
});

describe.each(providerCatalog.map((entry) => [entry.id, entry] as const))("%s", (id, entry) => {
  const variables = providerVariables(entry);
  const apiKeyVariable = variables.apiKey.at(-1)!;
  const reference = `${id}/${modelOf(entry)}`;

  it(`reaches ${variables.baseURL} with the key from ${apiKeyVariable}`, async () => {
    const request = await ask({ COUNTBOT_MODEL: reference, [apiKeyVariable]: keyOf(entry), [variables.baseURL]: fakeFor(entry).url }, entry);
    expect(request.body.model).toBe(modelOf(entry));
    // The Anthropic SDK, like the OpenAI one, sends the key as a bearer token.
    expect(request.headers.authorization).toBe(`Bearer ${keyOf(entry)}`);
    if (entry.apiKeyHeader) expect(request.headers[entry.apiKeyHeader]).toBe(keyOf(entry));
  });

  if (entry.baseURL) {
    it(`goes to ${entry.baseURL} when ${variables.baseURL} is not set`, async () => {
      const seen: string[] = [];
      const env = { COUNTBOT_MODEL: reference, ...(entry.keyless ? {} : { [apiKeyVariable]: keyOf(entry) }) };
      await ask(env, entry, redirecting(entry, seen));
      expect(seen).toHaveLength(1);
      expect(seen[0]!.startsWith(`${entry.baseURL}/`)).toBe(true);
    });
  } else {
    it(`names ${variables.baseURL} when it is not set`, () => {
      const error = errorOf(() => resolveChatModel(configFrom({ COUNTBOT_MODEL: reference, [apiKeyVariable]: keyOf(entry) })));
      expect(error.message).toContain(`Set ${variables.baseURL} or providers.${id}.baseURL`);
      expect(error.path).toBe(`providers.${id}.baseURL`);
    });
  }

  if (entry.keyless) {
    it("sends no key when none is set", async () => {
      const request = await ask({ COUNTBOT_MODEL: reference, [variables.baseURL]: openai.url }, entry);
      expect(request.headers.authorization).toBeUndefined();
      expect(request.headers["api-key"]).toBeUndefined();
    });
  } else {
    it(`names ${apiKeyVariable} when no key is set`, () => {
      const error = errorOf(() => resolveChatModel(configFrom({ COUNTBOT_MODEL: reference, [variables.baseURL]: "https://llm.example.com/v1" })));
      expect(error.message).toBe(`No API key for provider "${id}" (model ${reference}). Set ${apiKeyVariable} or providers.${id}.apiKey in the config.`);
      expect(error.path).toBe(`providers.${id}.apiKey`);
    });
  }
});

describe("names beyond the catalog's ids", () => {
  it("reads an alias's settings from its entry: glm/ uses ZHIPU_API_KEY, DASHSCOPE_API_KEY fills qwen's", async () => {
    const zhipu = providerCatalog.find((entry) => entry.id === "zhipu")!;
    const request = await ask({ COUNTBOT_MODEL: "glm/glm-4.6", ZHIPU_API_KEY: "sk-zhipu-0123456789", ZHIPU_BASE_URL: openai.url }, zhipu);
    expect(request.headers.authorization).toBe("Bearer sk-zhipu-0123456789");
    const qwen = providerCatalog.find((entry) => entry.id === "qwen")!;
    const viaDashscope = await ask({ COUNTBOT_MODEL: "dashscope/qwen-plus", DASHSCOPE_API_KEY: "sk-dashscope-0123456789", QWEN_BASE_URL: openai.url }, qwen);
    expect(viaDashscope.headers.authorization).toBe("Bearer sk-dashscope-0123456789");
  });

  it("works with a provider the catalog does not list, given its type and baseURL", async () => {
    for (const [type, server] of [["openai", openai], ["anthropic", anthropic]] as const) {
      const file = path.join(root, `acme-${type}.json`);
      await writeFile(file, JSON.stringify({ agent: { model: "acme/acme-large" }, providers: { acme: { type, baseURL: server.url, apiKey: "${ACME_KEY}" } } }));
      const model = resolveChatModel(loadConfig({ file, env: { ACME_KEY: "sk-acme-0123456789" }, cwd: root, homeDir: root }));
      expect(textOf(await collect(model.stream({ messages: [{ role: "user", content: "hi" }], maxTokens: 5 })))).toBe("OK");
      const request = server.requests.at(-1)!;
      expect(request.body.model).toBe("acme-large");
      expect(request.headers.authorization).toBe("Bearer sk-acme-0123456789");
      expect(request.path).toBe(type === "anthropic" ? "/v1/messages" : "/v1/chat/completions");
    }
  });
});

function errorOf(action: () => unknown): ConfigError {
  try {
    action();
  } catch (error) {
    if (error instanceof ConfigError) return error;
    throw error;
  }
  throw new Error("expected a ConfigError");
}
