import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { channelPlugins } from "../../channels/index.js";
import { listConfigFields, renderConfigReadme, renderJsonSchema } from "../../src/config/generate-schema.js";
import { environmentOverridesOf, loadConfig, type LoadConfigOptions } from "../../src/config/load.js";
import { collectSecrets, maskSecrets, redactText } from "../../src/config/mask.js";
import { type LocateConfigOptions, describeConfigSource, locateConfigFile } from "../../src/config/source.js";
import { unsetReferences } from "../../src/config/references.js";
import { ConfigError } from "../../src/errors.js";
import { resolveChatModel } from "../../src/providers/factory.js";

const configDirectory = fileURLToPath(new URL("../../config/", import.meta.url));

let root: string;
let cwd: string;
let home: string;

beforeEach(() => {
  root = mkdtempSync(join(tmpdir(), "countbot-config-"));
  cwd = join(root, "project");
  home = join(root, "home");
  mkdirSync(cwd);
  mkdirSync(home);
});

afterEach(() => {
  rmSync(root, { recursive: true, force: true });
});

/** Writes `content` (an object is written as JSON) to `<cwd>/<name>` and returns its path. */
function writeConfig(content: unknown, name = "config/countbot.json"): string {
  const path = join(cwd, name);
  mkdirSync(join(path, ".."), { recursive: true });
  writeFileSync(path, typeof content === "string" ? content : JSON.stringify(content, null, 2));
  return path;
}

function load(options: LoadConfigOptions = {}) {
  return loadConfig({ env: {}, cwd, homeDir: home, channels: channelPlugins, ...options });
}

function loadError(options: LoadConfigOptions = {}): ConfigError {
  try {
    load(options);
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigError);
    return error as ConfigError;
  }
  throw new Error("expected loadConfig to throw");
}

function valueAt(value: unknown, path: readonly string[]): unknown {
  return path.reduce<unknown>((node, key) => (node as Record<string, unknown> | undefined)?.[key], value);
}

describe("loadConfig", () => {
  it("uses the defaults when there is no file", () => {
    const config = load();
    expect(config.agent).toMatchObject({ model: "openai/gpt-4o-mini", maxIterations: 25, maxRetries: 3, temperature: 0.7, maxTokens: 4096, maxHistory: 50, archiveRetentionDays: 90 });
    expect(config.agent.persona).toEqual({ name: "CountBot", personality: "professional" });
    expect(config.providers).toEqual({});
    // The web chat is on unless switched off; every platform is off until configured.
    expect(config.channels).toEqual({ web: { enabled: true, showNotices: true } });
    expect(config.redis).toEqual({ prefix: "countbot", connectTimeoutMs: 5_000, evictionPolicy: "warn", sentinelMaster: "mymaster", partitions: 1, acceptAfterReplicas: 0, acceptTimeoutMs: 2_000 });
    expect(config.api).toEqual({ host: "127.0.0.1", port: 8787, allowedOrigins: [], trustProxy: [], openai: { enabled: true, apiKeys: [], timeoutSeconds: 900 } });
    expect(config.log.level).toBe("info");
    expect(config.heartbeat).toEqual({ enabled: false, intervalMinutes: 30, dailyCap: 10 });
    expect(config.dataDir).toBe(join(home, ".countbot"));
    expect(config.workspace).toBe(join(home, ".countbot", "workspace"));
  });

  it("reads config/countbot.json and substitutes ${VAR} references", () => {
    writeConfig({
      agent: { model: "${MODEL}", maxIterations: 7, persona: { customPrompt: "Write $${HOME} literally; ${MODEL} is you." } },
      providers: {
        openai: { apiKey: "${OPENAI_KEY}", baseURL: "https://${API_HOST}/v1" },
        deepseek: { type: "openai", apiKey: "${UNSET_KEY}", baseURL: "https://api.deepseek.com/v1" },
      },
      channels: { telegram: { enabled: true, token: "${BOT_TOKEN}", allowFrom: ["${ADMIN_ID}", "42", "${UNSET_ID}"] } },
      api: { host: "${UNSET_HOST}" },
      redis: { url: "${UNSET_URL}" },
    });
    const config = load({
      env: { MODEL: "deepseek/deepseek-chat", OPENAI_KEY: "sk-file-key", API_HOST: "llm.example.com", BOT_TOKEN: "123:abc", ADMIN_ID: "1001" },
    });
    expect(config.agent.model).toBe("deepseek/deepseek-chat");
    expect(config.agent.maxIterations).toBe(7);
    expect(config.providers.openai).toEqual({ apiKey: "sk-file-key", baseURL: "https://llm.example.com/v1" });
    // An unset variable in an optional field means the field is absent, not an empty string.
    expect(config.providers.deepseek).toEqual({ type: "openai", baseURL: "https://api.deepseek.com/v1" });
    expect(config.channels.telegram).toMatchObject({ enabled: true, token: "123:abc", allowFrom: ["1001", "42"] });
    // ...and a defaulted one gets its default.
    expect(config.api.host).toBe("127.0.0.1");
    expect(config.redis.url).toBeUndefined();
    // `$${VAR}` escapes a reference.
    expect(config.agent.persona.customPrompt).toBe("Write ${HOME} literally; deepseek/deepseek-chat is you.");
  });

  it("names an unset ${VAR} with the field it fed, wherever its absence fails", () => {
    writeConfig({ agent: { model: "deepseek/deepseek-chat" }, providers: { deepseek: { apiKey: "${MY_DEEPSEEK_KEY}" }, openai: { apiKey: "${OPENAI_KEY}" } } });
    const config = load({ env: { OPENAI_KEY: "sk-set-0123456789" } });
    expect(config[unsetReferences]).toEqual([{ variable: "MY_DEEPSEEK_KEY", path: "providers.deepseek.apiKey" }]);
    // Kept through the spreads callers make, and out of JSON and the keys.
    expect({ ...config, agent: { ...config.agent } }[unsetReferences]).toHaveLength(1);
    expect(JSON.stringify(config)).not.toContain("MY_DEEPSEEK_KEY");
    let error: unknown;
    try {
      resolveChatModel(config);
    } catch (caught) {
      error = caught;
    }
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as ConfigError).message).toBe(
      'No API key for provider "deepseek" (model deepseek/deepseek-chat): providers.deepseek.apiKey comes from ${MY_DEEPSEEK_KEY}, which is not set. Set DEEPSEEK_API_KEY or providers.deepseek.apiKey in the config.',
    );
    expect((error as ConfigError).path).toBe("providers.deepseek.apiKey");
    // Set through its own variable after all: nothing is missing.
    expect(load({ env: { OPENAI_KEY: "sk-set-0123456789", DEEPSEEK_API_KEY: "sk-env-0123456789" } })[unsetReferences]).toEqual([]);

    // A field validation requires: its error says which variable left it empty.
    writeConfig({ channels: { telegram: { enabled: true, token: "1:a", mode: "webhook", webhook: { url: "${PUBLIC_URL}" } } } });
    const webhook = loadError();
    expect(webhook.message).toContain("channels.telegram.webhook.url: webhook mode needs webhook.url (${PUBLIC_URL} is not set)");
  });

  it("reads the file named by COUNTBOT_CONFIG, and an explicit file before that", () => {
    const named = writeConfig({ agent: { maxIterations: 11 } }, "elsewhere/a.json");
    const explicit = writeConfig({ agent: { maxIterations: 12 } }, "b.json");
    writeConfig({ agent: { maxIterations: 13 } });
    expect(load({ env: { COUNTBOT_CONFIG: named } }).agent.maxIterations).toBe(11);
    expect(load({ env: { COUNTBOT_CONFIG: "elsewhere/a.json" } }).agent.maxIterations).toBe(11);
    expect(load({ env: { COUNTBOT_CONFIG: named }, file: explicit }).agent.maxIterations).toBe(12);
    expect(load().agent.maxIterations).toBe(13);
  });

  it("finds --config, then COUNTBOT_CONFIG, then ./config/countbot.json, then ~/.countbot/config.json, and says which", () => {
    const inHome = join(home, ".countbot", "config.json");
    mkdirSync(join(home, ".countbot"));
    writeFileSync(inHome, JSON.stringify({ agent: { maxIterations: 14 } }));
    const locate = (options: LocateConfigOptions = {}) => locateConfigFile({ env: {}, cwd, homeDir: home, ...options });
    // From a directory without config/: the home file, named as such.
    expect(load().agent.maxIterations).toBe(14);
    expect(locate()).toMatchObject({ file: inHome, origin: "~/.countbot/config.json" });
    expect(describeConfigSource(locate())).toBe(`${inHome} (found as ~/.countbot/config.json)`);
    // ./config/countbot.json wins over the home file.
    const local = writeConfig({ agent: { maxIterations: 13 } });
    expect(load().agent.maxIterations).toBe(13);
    expect(locate()).toMatchObject({ file: local, origin: "./config/countbot.json" });
    // COUNTBOT_CONFIG, then --config, over both.
    const named = writeConfig({ agent: { maxIterations: 11 } }, "named.json");
    expect(locate({ env: { COUNTBOT_CONFIG: "named.json" } })).toMatchObject({ file: named, origin: "COUNTBOT_CONFIG" });
    expect(describeConfigSource(locate({ file: "named.json", env: { COUNTBOT_CONFIG: "other.json" } }))).toBe(`${named} (named by --config)`);
  });

  it("says where it looked when no file is found", () => {
    const source = locateConfigFile({ env: {}, cwd, homeDir: home });
    expect(source).toEqual({ file: undefined, origin: undefined, required: false, searched: [join(cwd, "config", "countbot.json"), join(home, ".countbot", "config.json")] });
    expect(describeConfigSource(source)).toBe(
      `no config file (looked for ${join(cwd, "config", "countbot.json")} and ${join(home, ".countbot", "config.json")}): defaults and environment variables only`,
    );
  });

  it("overrides from the environment exactly the documented variables", () => {
    // The core's, then each registered channel plugin's (Discord's and Feishu's come with their plugins).
    expect(environmentOverridesOf(channelPlugins).map((entry) => entry.variable)).toEqual([
      // Each catalog provider's key and base URL (src/config/provider-catalog.ts); DashScope's own name before QWEN_API_KEY.
      "OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "DEEPSEEK_API_KEY", "DEEPSEEK_BASE_URL",
      "DASHSCOPE_API_KEY", "QWEN_API_KEY", "QWEN_BASE_URL", "MOONSHOT_API_KEY", "MOONSHOT_BASE_URL", "ZHIPU_API_KEY", "ZHIPU_BASE_URL",
      "MINIMAX_API_KEY", "MINIMAX_BASE_URL", "SILICONFLOW_API_KEY", "SILICONFLOW_BASE_URL", "OPENROUTER_API_KEY", "OPENROUTER_BASE_URL",
      "GROQ_API_KEY", "GROQ_BASE_URL", "TOGETHER_API_KEY", "TOGETHER_BASE_URL", "MISTRAL_API_KEY", "MISTRAL_BASE_URL", "XAI_API_KEY", "XAI_BASE_URL",
      "GEMINI_API_KEY", "GEMINI_BASE_URL", "AZURE_OPENAI_API_KEY", "AZURE_OPENAI_BASE_URL", "OLLAMA_API_KEY", "OLLAMA_BASE_URL",
      "VLLM_API_KEY", "VLLM_BASE_URL", "LMSTUDIO_API_KEY", "LMSTUDIO_BASE_URL",
      "COUNTBOT_MODEL", "REDIS_URL",
      "COUNTBOT_WORKSPACE", "COUNTBOT_DATA_DIR", "COUNTBOT_API_HOST", "COUNTBOT_API_PORT", "COUNTBOT_API_TOKEN",
      "BRAVE_API_KEY", "LOG_LEVEL", "LOG_FORMAT", "TELEGRAM_BOT_TOKEN", "TELEGRAM_API_ROOT", "DISCORD_BOT_TOKEN", "DISCORD_API_ROOT",
      "FEISHU_APP_ID", "FEISHU_APP_SECRET", "FEISHU_DOMAIN", "DINGTALK_CLIENT_ID", "DINGTALK_CLIENT_SECRET", "DINGTALK_API_ROOT",
      "QQ_BOT_APP_ID", "QQ_BOT_APP_SECRET", "QQ_BOT_API_ROOT", "QQ_BOT_TOKEN_URL",
      "SLACK_BOT_TOKEN", "SLACK_APP_TOKEN", "SLACK_SIGNING_SECRET", "SLACK_API_URL",
      "WECOM_CORP_ID", "WECOM_AGENT_ID", "WECOM_SECRET", "WECOM_TOKEN", "WECOM_ENCODING_AES_KEY", "WECOM_API_ROOT", "WECOM_BOT_ID", "WECOM_BOT_SECRET", "WECOM_BOT_WS_URL",
    ]);
  });

  const overrides: Array<[variable: string, value: string, path: string, expected: unknown]> = [
    ["OPENAI_API_KEY", "sk-env-openai", "providers.openai.apiKey", "sk-env-openai"],
    ["OPENAI_BASE_URL", "http://127.0.0.1:9999/v1", "providers.openai.baseURL", "http://127.0.0.1:9999/v1"],
    ["ANTHROPIC_API_KEY", "sk-ant-env", "providers.anthropic.apiKey", "sk-ant-env"],
    ["ANTHROPIC_BASE_URL", "http://127.0.0.1:9998", "providers.anthropic.baseURL", "http://127.0.0.1:9998"],
    ["DEEPSEEK_API_KEY", "sk-env-deepseek", "providers.deepseek.apiKey", "sk-env-deepseek"],
    ["AZURE_OPENAI_BASE_URL", "http://127.0.0.1:9997/openai/v1", "providers.azure-openai.baseURL", "http://127.0.0.1:9997/openai/v1"],
    ["DASHSCOPE_API_KEY", "sk-env-dashscope", "providers.qwen.apiKey", "sk-env-dashscope"],
    ["COUNTBOT_MODEL", "anthropic/claude-sonnet-4-5", "agent.model", "anthropic/claude-sonnet-4-5"],
    ["REDIS_URL", "redis://localhost:6379/2", "redis.url", "redis://localhost:6379/2"],
    ["COUNTBOT_WORKSPACE", "/srv/countbot/workspace", "workspace", "/srv/countbot/workspace"],
    ["COUNTBOT_DATA_DIR", "/srv/countbot/data", "dataDir", "/srv/countbot/data"],
    ["COUNTBOT_API_HOST", "0.0.0.0", "api.host", "0.0.0.0"],
    ["COUNTBOT_API_PORT", "9090", "api.port", 9090],
    ["COUNTBOT_API_TOKEN", "api-token-from-env-0123456789", "api.token", "api-token-from-env-0123456789"],
    ["TELEGRAM_BOT_TOKEN", "123456:telegram-env", "channels.telegram.token", "123456:telegram-env"],
    ["TELEGRAM_API_ROOT", "http://127.0.0.1:8081", "channels.telegram.apiRoot", "http://127.0.0.1:8081"],
    ["DISCORD_BOT_TOKEN", "MTIz.discord-env.token", "channels.discord.token", "MTIz.discord-env.token"],
    ["DISCORD_API_ROOT", "http://127.0.0.1:8083/api", "channels.discord.apiRoot", "http://127.0.0.1:8083/api"],
    ["FEISHU_APP_ID", "cli_0123456789abcdef", "channels.feishu.appId", "cli_0123456789abcdef"],
    ["FEISHU_APP_SECRET", "feishu-env-secret", "channels.feishu.appSecret", "feishu-env-secret"],
    ["FEISHU_DOMAIN", "http://127.0.0.1:8082", "channels.feishu.domain", "http://127.0.0.1:8082"],
    ["DINGTALK_CLIENT_ID", "dingappkey0123", "channels.dingtalk.appKey", "dingappkey0123"],
    ["DINGTALK_CLIENT_SECRET", "dingtalk-env-secret", "channels.dingtalk.appSecret", "dingtalk-env-secret"],
    ["DINGTALK_API_ROOT", "http://127.0.0.1:8084", "channels.dingtalk.apiRoot", "http://127.0.0.1:8084"],
    ["QQ_BOT_APP_ID", "102000123", "channels.qq.appId", "102000123"],
    ["QQ_BOT_APP_SECRET", "qq-env-secret", "channels.qq.appSecret", "qq-env-secret"],
    ["QQ_BOT_API_ROOT", "http://127.0.0.1:8085", "channels.qq.apiRoot", "http://127.0.0.1:8085"],
    ["QQ_BOT_TOKEN_URL", "http://127.0.0.1:8085/app/getAppAccessToken", "channels.qq.tokenUrl", "http://127.0.0.1:8085/app/getAppAccessToken"],
    ["SLACK_BOT_TOKEN", "xoxb-slack-env-token", "channels.slack.botToken", "xoxb-slack-env-token"],
    ["SLACK_APP_TOKEN", "xapp-slack-env-token", "channels.slack.appToken", "xapp-slack-env-token"],
    ["SLACK_SIGNING_SECRET", "slack-env-signing-secret", "channels.slack.signingSecret", "slack-env-signing-secret"],
    ["SLACK_API_URL", "http://127.0.0.1:8085/api/", "channels.slack.apiUrl", "http://127.0.0.1:8085/api/"],
    ["WECOM_CORP_ID", "ww0123456789abcdef", "channels.wecom.corpId", "ww0123456789abcdef"],
    ["WECOM_SECRET", "wecom-env-secret", "channels.wecom.secret", "wecom-env-secret"],
    ["WECOM_ENCODING_AES_KEY", "abcdefghijklmnopqrstuvwxyz0123456789ABCDEFG", "channels.wecom.encryptKey", "abcdefghijklmnopqrstuvwxyz0123456789ABCDEFG"],
    ["WECOM_BOT_ID", "aibenv0123", "channels.wecom.robot.botId", "aibenv0123"],
    ["WECOM_BOT_WS_URL", "ws://127.0.0.1:8085", "channels.wecom.robot.wsUrl", "ws://127.0.0.1:8085"],
    ["BRAVE_API_KEY", "brave-env-key", "tools.braveApiKey", "brave-env-key"],
    ["LOG_LEVEL", "debug", "log.level", "debug"],
    ["LOG_FORMAT", "Pretty", "log.format", "pretty"],
  ];

  it.each(overrides)("%s sets %s", (variable, value, path, expected) => {
    const config = load({ env: { [variable]: value } });
    expect(valueAt(config, path.split("."))).toEqual(expected);
  });

  it("lets the environment win over the file, and ignores empty variables", () => {
    writeConfig({
      agent: { model: "openai/gpt-4o" },
      providers: { openai: { apiKey: "sk-from-file", baseURL: "https://api.openai.com/v1" } },
      api: { port: 1234 },
      log: { level: "warn" },
    });
    const config = load({ env: { OPENAI_API_KEY: "sk-from-env", COUNTBOT_API_PORT: "4321", COUNTBOT_MODEL: "", LOG_LEVEL: "  " } });
    expect(config.providers.openai).toEqual({ apiKey: "sk-from-env", baseURL: "https://api.openai.com/v1" });
    expect(config.api.port).toBe(4321);
    expect(config.agent.model).toBe("openai/gpt-4o");
    expect(config.log.level).toBe("warn");
  });

  it("reports every bad value with its path and what was expected, in one error", () => {
    writeConfig({ agent: { maxIterations: "x", temperature: 5 }, log: { level: "loud" } });
    const error = loadError();
    expect(error.path).toBe("agent.maxIterations");
    expect(error.message).toContain(join(cwd, "config", "countbot.json"));
    expect(error.message).toContain('agent.maxIterations: expected a number, got "x"');
    expect(error.message).toContain("agent.temperature: expected a number <= 2, got 5");
    expect(error.message).toMatch(/log\.level: expected one of .*"info".*, got "loud"/);
  });

  it("checks the heartbeat's quiet hours and target", () => {
    writeConfig({ heartbeat: { enabled: true, quietHours: { start: "25:00", end: "08:00", timezone: "Mars/Olympus" }, target: "nochannel" } });
    const error = loadError();
    expect(error.message).toContain("heartbeat.quietHours.start: expected HH:MM");
    expect(error.message).toContain("heartbeat.quietHours.timezone: expected an IANA time zone");
    expect(error.message).toContain("heartbeat.target: expected a session key");
    writeConfig({ heartbeat: { enabled: true, quietHours: { start: "22:00", end: "07:30" }, target: "telegram:42" } });
    expect(load().heartbeat).toEqual({ enabled: true, intervalMinutes: 30, dailyCap: 10, quietHours: { start: "22:00", end: "07:30", timezone: "UTC" }, target: "telegram:42" });
  });

  it("names unknown fields and suggests the likely one", () => {
    writeConfig({ agent: { modle: "openai/gpt-4o" }, providers: { openai: { baseUrl: "https://api.openai.com/v1" } } });
    const error = loadError();
    expect(error.path).toBe("agent");
    expect(error.message).toContain('agent: unknown field "modle" (did you mean "model"?)');
    expect(error.message).toContain('providers.openai: unknown field "baseUrl" (did you mean "baseURL"?)');
  });

  it("says where a bad value came from when it came from the environment", () => {
    const error = loadError({ env: { COUNTBOT_MODEL: "gpt-4o", OPENAI_BASE_URL: "not a url" } });
    expect(error.message).toContain("agent.model: expected `provider/model`");
    expect(error.message).toContain("(from COUNTBOT_MODEL)");
    expect(error.message).toContain('providers.openai.baseURL: expected a URL, got "not a url" (from OPENAI_BASE_URL)');
  });

  it("does not print the value of a secret field in errors", () => {
    writeConfig({ api: { token: 98765432109876 } });
    const error = loadError();
    expect(error.message).toContain("api.token: expected a string");
    expect(error.message).not.toContain("98765432109876");
  });

  it("names the file, line and column of a JSON syntax error", () => {
    const path = writeConfig('{\n  "agent": {\n    "maxIterations": 5,\n  }\n}\n');
    const error = loadError();
    expect(error.message).toContain(`${path}:4:3`);
    expect(error.message).toContain("trailing comma");

    // Node 20 gives no position for this one; the loader finds it.
    writeConfig('{ "log": { "level": tru } }');
    expect(loadError().message).toContain(`${path}:1:21`);
    writeConfig('{ "agent": {');
    expect(loadError().message).toMatch(/countbot\.json:1:13: unexpected end of file/);
  });

  it("refuses a file that is not a JSON object", () => {
    writeConfig("[1, 2]");
    expect(loadError().message).toContain("JSON object");
  });

  it("fails when an explicitly named file does not exist, naming it", () => {
    const missing = join(cwd, "nope.json");
    expect(loadError({ file: missing }).message).toContain(missing);
    const error = loadError({ env: { COUNTBOT_CONFIG: "missing/countbot.json" } });
    expect(error.message).toContain(join(cwd, "missing", "countbot.json"));
    expect(error.message).toContain("COUNTBOT_CONFIG");
  });

  it("rejects a COUNTBOT_API_PORT that is not a number", () => {
    const error = loadError({ env: { COUNTBOT_API_PORT: "abc" } });
    expect(error.message).toContain("COUNTBOT_API_PORT");
    expect(error.message).toContain('"abc"');
    expect(error.path).toBe("api.port");
    expect(loadError({ env: { COUNTBOT_API_PORT: "70000" } }).message).toContain("api.port: expected a number <= 65535, got 70000 (from COUNTBOT_API_PORT)");
  });

  it("resolves ~ and relative paths to absolute ones", () => {
    writeConfig({ dataDir: "~/state", workspace: "./ws" });
    expect(load()).toMatchObject({ dataDir: join(home, "state"), workspace: join(cwd, "ws") });

    writeConfig({ dataDir: "data" });
    expect(load()).toMatchObject({ dataDir: join(cwd, "data"), workspace: join(cwd, "data", "workspace") });

    writeConfig({ dataDir: "~", workspace: "~/projects/bot" });
    expect(load()).toMatchObject({ dataDir: home, workspace: join(home, "projects", "bot") });

    expect(load({ env: { COUNTBOT_DATA_DIR: "rel/dir" } }).dataDir).toBe(join(cwd, "rel", "dir"));
  });
});

describe("maskSecrets", () => {
  const secrets = {
    openai: "sk-proj-abcdefghijklmnop1234",
    telegram: "123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw",
    feishu: "feishu-app-secret-value-9876",
    brave: "BSAbravebravebrave5555",
    api: "api-bearer-token-abcdefgh-0000",
    header: "Bearer header-secret-abcdef",
    redis: "redis-password-xyz-7777",
  };

  it("masks every secret field and never shows the secret", () => {
    writeConfig({
      providers: { openai: { apiKey: "${OPENAI}", headers: { Authorization: "${HEADER}", "X-Title": "CountBot" } } },
      channels: { telegram: { token: "${TELEGRAM}" } },
      tools: { braveApiKey: "${BRAVE}" },
      api: { token: "${API}" },
      redis: { url: "redis://:${REDIS}@redis.internal:6379/0" },
    });
    const config = load({
      env: { OPENAI: secrets.openai, HEADER: secrets.header, TELEGRAM: secrets.telegram, BRAVE: secrets.brave, API: secrets.api, REDIS: secrets.redis },
    });
    const masked = maskSecrets({ ...config, channels: { ...config.channels, feishu: { appId: "cli_visible", appSecret: secrets.feishu } } });
    const text = JSON.stringify(masked);
    for (const secret of Object.values(secrets)) expect(text).not.toContain(secret);

    expect(masked.providers.openai?.apiKey).toBe("****1234");
    expect(valueAt(masked, ["channels", "telegram", "token"])).toBe("****Dsaw");
    expect(valueAt(masked, ["channels", "feishu", "appSecret"])).toBe("****9876");
    expect(valueAt(masked, ["channels", "feishu", "appId"])).toBe("cli_visible");
    expect(masked.tools.braveApiKey).toBe("****5555");
    expect(masked.api.token).toBe("****0000");
    expect(masked.providers.openai?.headers).toEqual({ Authorization: "****cdef", "X-Title": "CountBot" });
    expect(masked.redis.url).toBe("redis://:****7777@redis.internal:6379/0");
    expect(masked.agent).toEqual(config.agent);
    // A copy: the loaded config keeps its secrets.
    expect(config.providers.openai?.apiKey).toBe(secrets.openai);
  });

  it("masks short secrets whole, and the password of any redis URL", () => {
    expect(maskSecrets({ api: { token: "short" } })).toEqual({ api: { token: "****" } });
    expect(maskSecrets({ redis: { url: "redis://:pw@localhost:6379" } }).redis.url).toBe("redis://:****@localhost:6379");
    expect(maskSecrets({ redis: { url: "rediss://default:a-long-redis-password@cache.example.com" } }).redis.url).toBe(
      "rediss://default:****word@cache.example.com",
    );
    expect(maskSecrets({ redis: { url: "redis://localhost:6379" } }).redis.url).toBe("redis://localhost:6379");
    expect(maskSecrets({ nested: [{ password: "hunter2hunter2" }], secret: "s" })).toEqual({ nested: [{ password: "****ter2" }], secret: "****" });
  });

  it("masks every key of a list of keys (api.openai.apiKeys), and finds them for redaction", () => {
    const config = { api: { openai: { apiKeys: ["client-one-key-0123456789", "client-two-key-9876543210"] } }, agent: { names: ["visible"] } };
    expect(maskSecrets(config)).toEqual({ api: { openai: { apiKeys: ["****6789", "****3210"] } }, agent: { names: ["visible"] } });
    expect(collectSecrets(config)).toEqual(["client-one-key-0123456789", "client-two-key-9876543210"]);
  });
});

describe("redactText", () => {
  it("replaces secret values in text, also URL-encoded", () => {
    const secrets = collectSecrets({
      providers: { openai: { apiKey: "sk-live-0123456789abcd" } },
      redis: { url: "redis://:p%40ss-word-long@host" },
      api: { token: "abc" },
    });
    expect(secrets).toEqual(["sk-live-0123456789abcd", "p%40ss-word-long", "abc"]);
    const text = redactText("calling with key=sk-live-0123456789abcd; redis auth p@ss-word-long failed; abc stays", secrets);
    expect(text).toBe("calling with key=****abcd; redis auth ****long failed; abc stays");
    expect(redactText("nothing here", [])).toBe("nothing here");
  });
});

describe("config/ files", () => {
  it("loads config/countbot.example.json with no environment variables", () => {
    const config = load({ file: join(configDirectory, "countbot.example.json") });
    expect(Object.keys(config.providers)).toEqual(["openai", "anthropic", "deepseek", "ollama"]);
    expect(config.providers.deepseek).toEqual({ type: "openai", baseURL: "https://api.deepseek.com/v1" });
    expect(config.providers.ollama?.baseURL).toBe("http://localhost:11434/v1");
    expect(config.providers.openai?.apiKey).toBeUndefined();
    expect(config.channels.telegram).toMatchObject({ enabled: false, allowFrom: ["123456789"] });
    expect(valueAt(config, ["channels", "telegram", "token"])).toBeUndefined();
    expect(config.redis.url).toBeUndefined();
  });

  it("sets every field in the example", () => {
    const example = JSON.parse(readFileSync(join(configDirectory, "countbot.example.json"), "utf8")) as Record<string, unknown>;
    expect(example.$schema).toBe("./countbot.schema.json");
    const missing = listConfigFields(channelPlugins)
      .filter((field) => field.leaf)
      .map((field) => field.path)
      // `accounts` takes the same form in every channel section: one example of it does for all.
      .filter((path) => !/^channels\.\w+\.accounts$/.test(path) || !Object.values(example.channels as Record<string, Record<string, unknown>>).some((section) => section.accounts !== undefined))
      .filter((path) => {
        const [before, after] = path.split(".<name>.");
        if (after === undefined) return valueAt(example, path.split(".")) === undefined;
        const map = valueAt(example, (before as string).split(".")) as Record<string, unknown>;
        return !Object.values(map).some((entry) => valueAt(entry, after.split(".")) !== undefined);
      });
    expect(missing).toEqual([]);
  });

  it("keeps the generated schema and README up to date (run `npm run schema`)", () => {
    expect(readFileSync(join(configDirectory, "countbot.schema.json"), "utf8")).toBe(renderJsonSchema(channelPlugins));
    expect(readFileSync(join(configDirectory, "README.md"), "utf8")).toBe(renderConfigReadme(channelPlugins));
  });
});

describe("channel sections", () => {
  it("refuses a section no channel plugin is behind, naming the field", () => {
    writeConfig({ channels: { discord: { enabled: true, token: "x" } } });
    const error = loadError({ channels: [] });
    expect(error.path).toBe("channels.discord");
    expect(error.message).toContain("channels.discord: no channel plugin has this name (known: none)");
    writeConfig({ channels: { telegarm: { enabled: true } } });
    const typo = loadError();
    expect(typo.path).toBe("channels.telegarm");
    expect(typo.message).toContain("known: telegram, discord, feishu, dingtalk, qq, slack, wecom, web");
  });

  it("checks a section against its plugin's schema", () => {
    writeConfig({ channels: { telegram: { enabled: true, groupPolicy: "sometimes" } } });
    expect(loadError().message).toMatch(/channels\.telegram\.groupPolicy: expected one of/);
    writeConfig({ channels: { telegram: { enabled: true, mode: "webhook" } } });
    const webhook = loadError();
    expect(webhook.path).toBe("channels.telegram.webhook.url");
    expect(webhook.message).toContain("channels.telegram.webhook.url: webhook mode needs webhook.url");
  });

  it("sets a plugin's fields from the variables it declares, and no others", () => {
    const config = load({ env: { TELEGRAM_BOT_TOKEN: "123:abc" }, channels: [] });
    expect(config.channels).toEqual({});
    expect(valueAt(load({ env: { TELEGRAM_BOT_TOKEN: "123:abc" } }), ["channels", "telegram", "token"])).toBe("123:abc");
  });
});

describe("the README's environment table", () => {
  it("names every variable the code reads", () => {
    const readme = readFileSync(new URL("../../README.md", import.meta.url), "utf8");
    const section = readme.slice(readme.indexOf("## Configuration"), readme.indexOf("## How a turn runs"));
    const listed = new Set([...section.matchAll(/`([A-Z][A-Z0-9_]+)`/g)].map((match) => match[1]));
    const read = new Set([...environmentOverridesOf(channelPlugins).map((entry) => entry.variable), "COUNTBOT_CONFIG", "NO_COLOR"]);
    for (const variable of read) expect(listed, variable).toContain(variable);
  });
});

describe("memory.identities", () => {
  it("links accounts under a name and refuses an account linked twice, naming the field", () => {
    writeConfig({ memory: { identities: { alice: ["telegram:1", "discord:2"], bob: ["discord:3"] } } });
    expect(load().memory.identities).toEqual({ alice: ["telegram:1", "discord:2"], bob: ["discord:3"] });
    writeConfig({ memory: { identities: { alice: ["telegram:1"], bob: ["telegram:1"] } } });
    const twice = loadError();
    expect(twice.path).toBe("memory.identities.bob[0]");
    expect(twice.message).toContain('telegram:1 is linked to "alice" already');
    writeConfig({ memory: { identities: { "a:b": ["telegram:1"] } } });
    expect(loadError().message).toContain("a name of 1-64 letters, digits, _ . - (no `:`)");
    writeConfig({ memory: { identities: { carol: ["12345"] } } });
    expect(loadError().message).toContain("expected `channel:senderId`");
  });
});
