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
import { type CatalogProvider, catalogEntry, providerCatalog, providerVariables } from "../config/provider-catalog.js";
import { resolveChatModel } from "../providers/factory.js";
import { isLoopback } from "../providers/known-providers.js";

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

/** What `onboard` learned about the model: the provider's name and settings, and the model. */
interface ModelAnswers {
  provider: string;
  entry?: CatalogProvider;
  baseUrl?: string;
  apiKey?: string;
  /** The variable the key is read from at run time, when none was typed. */
  keyFromEnvironment?: string;
  model: string;
}

export async function runOnboardCommand(options: OnboardOptions): Promise<number> {
  // Where every command looks last: found from any directory (src/config/source.ts).
  const file = path.resolve(options.config ?? (process.env.COUNTBOT_CONFIG?.trim() || homeConfigFile()));
  if (existsSync(file) && !options.force) {
    throw new ConfigError(`${file} exists already: edit it, or run \`countbot onboard --force\` to replace it`);
  }
  const ask = createAsker();
  try {
    const { provider, entry, baseUrl, apiKey, keyFromEnvironment, model } = await askModel(options, ask);
    const telegramToken = options.telegramToken ?? ((await ask.secret("Telegram bot token (hidden; empty: no Telegram): ")) || undefined);
    const allow = options.allow ?? (telegramToken ? await ask.question("Telegram user ids allowed to talk to the bot, comma-separated (empty: strangers get a pairing code): ") : "");

    const schema = schemaReference(file);
    const draft = {
      ...(schema ? { $schema: schema } : {}),
      agent: { model: `${provider}/${model}` },
      providers: { [provider]: { ...(entry ? {} : { type: "openai" }), ...(apiKey ? { apiKey } : {}), ...(baseUrl ? { baseURL: baseUrl } : {}) } },
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
        const tested = parsed.data as ResolvedConfig;
        // As it will run: with the key its variable holds.
        const key = keyFromEnvironment ? process.env[keyFromEnvironment]?.trim() : undefined;
        await testModel(key ? { ...tested, providers: { ...tested.providers, [provider]: { ...tested.providers[provider], apiKey: key } } } : tested);
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
    if (keyFromEnvironment) process.stdout.write(`The key is not in the file: ${keyFromEnvironment} must be set wherever CountBot runs.\n`);
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
 * The provider (one of the catalog, or a name of the operator's own for an OpenAI-compatible API),
 * its URL and key, and the model. A local server (Ollama, vLLM, LM Studio) is asked for its URL and
 * no key; a catalog provider's URL may be left at its default.
 */
async function askModel(options: OnboardOptions, ask: Asker): Promise<ModelAnswers> {
  const offered = providerCatalog.map((entry) => entry.id).join(", ");
  const provider = options.provider ?? ((await ask.question(`Model provider (${offered}; or a name of your own for another OpenAI-compatible API) [openai]: `)) || "openai");
  if (!/^[\w.-]+$/.test(provider)) throw new ConfigError(`--provider: expected a name of letters, digits, _ . -, got "${provider}"`);
  const entry = catalogEntry(provider);
  const baseUrl = options.baseUrl ?? ((await ask.question(baseUrlPrompt(provider, entry))) || undefined);
  if (!baseUrl && !entry?.baseURL) {
    throw new ConfigError(
      entry
        ? `--base-url: ${entry.label} has no default URL; give yours, e.g. ${entry.baseURLExample ?? "https://.../v1"}`
        : `--base-url: a provider named "${provider}" needs the URL of its OpenAI-compatible API`,
    );
  }
  const url = baseUrl ?? entry!.baseURL!;
  if (!URL.canParse(url)) throw new ConfigError(`--base-url: expected a URL such as http://localhost:11434/v1, got "${url}"`);
  // A local server takes no key: none is asked for. A server of one's own on this machine may go
  // without; a catalog provider's key may stay in its variable (DEEPSEEK_API_KEY), out of the file.
  const variable = entry ? providerVariables(entry).apiKey.at(-1) : undefined;
  const keyFromEnvironment = variable && process.env[variable]?.trim() ? variable : undefined;
  const empty = keyFromEnvironment ? ` [empty: ${keyFromEnvironment} from the environment]` : isLoopback(url) ? " [empty: none]" : "";
  const apiKey = options.apiKey ?? (entry?.keyless ? undefined : await ask.secret(`API key for ${provider} (hidden)${empty}: `));
  if (!apiKey && !entry?.keyless && !isLoopback(url) && !keyFromEnvironment) {
    throw new ConfigError(`--api-key: ${entry?.label ?? provider} needs a key${variable ? ` (or set ${variable})` : ""}`);
  }
  const suggested = entry ? entry.defaultModel : "gpt-4o-mini";
  const model = options.model ?? ((await ask.question(suggested ? `Model [${suggested}]: ` : "Model (as the server names it): ")) || suggested);
  if (!model) throw new ConfigError(`--model: name the model ${entry?.label ?? provider} serves`);
  const fromEnvironment = apiKey ? undefined : keyFromEnvironment;
  return { provider, entry, baseUrl: baseUrl === entry?.baseURL ? undefined : baseUrl, apiKey: apiKey || undefined, keyFromEnvironment: fromEnvironment, model };
}

function baseUrlPrompt(provider: string, entry: CatalogProvider | undefined): string {
  if (!entry) return `Base URL of the ${provider} API: `;
  if (entry.keyless) return `URL of your ${entry.label} server [${entry.baseURL}]: `;
  if (entry.baseURL) return `Base URL of the ${entry.label} API (empty: ${entry.baseURL}): `;
  return `Base URL of your ${entry.label} API, e.g. ${entry.baseURLExample}: `;
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

type Asker = ReturnType<typeof createAsker>;

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
