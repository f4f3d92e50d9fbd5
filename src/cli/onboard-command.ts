/**
 * `countbot onboard`: writes a first config file. Asks for what the flags did not give (provider,
 * key, model, Telegram token, allowlist), tests the model with one call before writing, never
 * echoes a secret (typed keys are hidden on a terminal; none is printed), writes the file with
 * mode 0600, and refuses to overwrite an existing one without `--force`.
 */
import { existsSync } from "node:fs";
import { mkdir, writeFile } from "node:fs/promises";
import path from "node:path";
import readline from "node:readline";
import { Writable } from "node:stream";
import { fileURLToPath } from "node:url";
import pino from "pino";
import { channelPlugins } from "../../channels/index.js";
import { type ResolvedConfig, defineConfigSchema } from "../config/schema.js";
import { describeConfigSource, homeConfigFile, locateConfigFile } from "../config/source.js";
import { ConfigError, errorMessage } from "../errors.js";
import { resolveChatModel } from "../providers/factory.js";

export interface OnboardOptions {
  config?: string;
  provider?: string;
  baseUrl?: string;
  apiKey?: string;
  model?: string;
  telegramToken?: string;
  allow?: string;
  test: boolean;
  force?: boolean;
}

const DEFAULT_MODELS: Record<string, string> = { openai: "gpt-4o-mini", anthropic: "claude-sonnet-4-5" };

export async function runOnboardCommand(options: OnboardOptions): Promise<number> {
  // Where every command looks last: found from any directory (src/config/source.ts).
  const file = path.resolve(options.config ?? (process.env.COUNTBOT_CONFIG?.trim() || homeConfigFile()));
  if (existsSync(file) && !options.force) {
    throw new ConfigError(`${file} exists already: edit it, or run \`countbot onboard --force\` to replace it`);
  }
  const ask = createAsker();
  try {
    const provider = options.provider ?? ((await ask.question("Model provider (openai, anthropic, or a name for another OpenAI-compatible API) [openai]: ")) || "openai");
    if (!/^[\w.-]+$/.test(provider)) throw new ConfigError(`--provider: expected a name of letters, digits, _ . -, got "${provider}"`);
    const builtIn = provider === "openai" || provider === "anthropic";
    const baseUrl = options.baseUrl ?? ((await ask.question(`Base URL of the ${provider} API${builtIn ? " (empty: the official one)" : ""}: `)) || undefined);
    if (!builtIn && !baseUrl) throw new ConfigError(`--base-url: a provider named "${provider}" needs the URL of its OpenAI-compatible API`);
    const apiKey = options.apiKey ?? (await ask.secret(`API key for ${provider} (hidden): `));
    if (!apiKey) throw new ConfigError("--api-key: the model provider needs a key");
    const model = options.model ?? ((await ask.question(`Model [${DEFAULT_MODELS[provider] ?? "gpt-4o-mini"}]: `)) || DEFAULT_MODELS[provider] || "gpt-4o-mini");
    const telegramToken = options.telegramToken ?? ((await ask.secret("Telegram bot token (hidden; empty: no Telegram): ")) || undefined);
    const allow = options.allow ?? (telegramToken ? await ask.question("Telegram user ids allowed to talk to the bot, comma-separated (empty: strangers get a pairing code): ") : "");

    const schema = schemaReference(file);
    const draft = {
      ...(schema ? { $schema: schema } : {}),
      agent: { model: `${provider}/${model}` },
      providers: { [provider]: { ...(builtIn ? {} : { type: "openai" }), apiKey, ...(baseUrl ? { baseURL: baseUrl } : {}) } },
      ...(telegramToken
        ? { channels: { telegram: { enabled: true, token: telegramToken, allowFrom: allow.split(",").map((id) => id.trim()).filter(Boolean), groupPolicy: "mention" } } }
        : {}),
    };
    const parsed = defineConfigSchema(channelPlugins).safeParse(draft);
    if (!parsed.success) {
      const issue = parsed.error.issues[0]!;
      throw new ConfigError(`${issue.path.join(".") || "config"}: ${issue.message}`);
    }
    if (options.test) {
      process.stdout.write(`Testing ${provider}/${model} with one request... `);
      try {
        await testModel(parsed.data as ResolvedConfig);
      } catch (error) {
        process.stdout.write("failed\n");
        process.stderr.write(`countbot: the model did not answer, nothing was written: ${errorMessage(error).replace(/\s*\n\s*/g, "; ")} (fix the key, URL or model, or use --no-test)\n`);
        return 1;
      }
      process.stdout.write("it answers\n");
    }
    await mkdir(path.dirname(file), { recursive: true });
    await writeFile(file, `${JSON.stringify(draft, null, 2)}\n`, { mode: 0o600 });
    process.stdout.write(`Wrote ${file} (mode 0600: it holds your keys). Start with: countbot chat   or   countbot start\n`);
    const found = locateConfigFile();
    if (found.file !== undefined && found.file !== file) {
      process.stdout.write(`Note: from this directory commands read ${describeConfigSource(found)} first; pass --config ${file} or set COUNTBOT_CONFIG to use the new one.\n`);
    }
    return 0;
  } finally {
    ask.close();
  }
}

/**
 * The `$schema` an editor resolves from where the file is: the package's config/countbot.schema.json
 * (two levels up from these sources, three from their build in dist/), relative to the file's
 * directory; none when the package ships no schema.
 */
function schemaReference(file: string): string | undefined {
  for (const relative of ["../../config/countbot.schema.json", "../../../config/countbot.schema.json"]) {
    const schema = fileURLToPath(new URL(relative, import.meta.url));
    if (!existsSync(schema)) continue;
    const reference = path.relative(path.dirname(file), schema).split(path.sep).join("/");
    return reference.startsWith("../") ? reference : `./${reference}`;
  }
  return undefined;
}

async function testModel(config: ResolvedConfig): Promise<void> {
  const model = resolveChatModel({ ...config, agent: { ...config.agent, providerRetries: 0, fallbackModels: [] } }, { logger: pino({ level: "silent" }) });
  for await (const part of model.stream({ messages: [{ role: "user", content: "Reply with the single word OK." }], maxTokens: 5, temperature: 0 })) void part;
}

/** Questions on the terminal or piped input (lines read ahead are kept); secrets are not echoed on a terminal. */
function createAsker() {
  let lines: readline.Interface | undefined;
  let muted = false;
  let ended = false;
  const buffered: string[] = [];
  const waiting: Array<(line: string) => void> = [];
  // The terminal readline draws on: stdout, except while a secret is typed (its echo is dropped).
  const output = new Writable({
    write(chunk: Buffer | string, _encoding, done) {
      if (!muted) process.stdout.write(chunk);
      done();
    },
  });
  Object.defineProperty(output, "columns", { get: () => process.stdout.columns });
  process.stdout.on("resize", () => output.emit("resize"));
  const open = () => {
    if (lines) return;
    lines = readline.createInterface({ input: process.stdin, output, terminal: Boolean(process.stdin.isTTY) });
    lines.on("line", (line) => {
      const next = waiting.shift();
      if (next) next(line.trim());
      else buffered.push(line.trim());
    });
    lines.on("close", () => {
      ended = true;
      for (const next of waiting.splice(0)) next("");
    });
  };
  const question = (prompt: string) => {
    open();
    process.stdout.write(muted ? "" : prompt);
    if (buffered.length > 0) return Promise.resolve(buffered.shift()!);
    if (ended) return Promise.resolve("");
    return new Promise<string>((resolve) => waiting.push(resolve));
  };
  return {
    question,
    async secret(prompt: string): Promise<string> {
      process.stdout.write(prompt);
      muted = true;
      try {
        return await question("");
      } finally {
        muted = false;
        if (process.stdin.isTTY) process.stdout.write("\n");
      }
    },
    close: () => lines?.close(),
  };
}
