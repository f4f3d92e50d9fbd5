/**
 * Loads the configuration: the JSON file, `${VAR}` references, environment overrides, validation
 * against {@link ConfigSchema}, then absolute paths. Pure apart from reading the file.
 */
import { readFileSync } from "node:fs";
import { homedir } from "node:os";
import { join, resolve } from "node:path";
import { ConfigError } from "../errors.js";
import { profileIds, profileWorkspace, workspaceOverlaps } from "./agents.js";
import { describeIssue, formatPath } from "./issues.js";
import { findJsonSyntaxError } from "./json-syntax.js";
import { isSecretField } from "./mask.js";
import { providerCatalog, providerVariables } from "./provider-catalog.js";
import { type UnsetReference, type WithUnsetReferences, unsetReferences } from "./references.js";
import { type ChannelConfigSpec, type Config, type ResolvedConfig, defineConfigSchema } from "./schema.js";
import { locateConfigFile } from "./source.js";

type Environment = Readonly<Record<string, string | undefined>>;

/** Options of {@link loadConfig}. */
export interface LoadConfigOptions {
  /** Source of `${VAR}` references and environment overrides. Default: `process.env`. */
  env?: Environment;
  /** Directory that relative paths (the config file, `dataDir`, `workspace`) resolve against. Default: `process.cwd()`. */
  cwd?: string;
  /** The config file (`--config`). Default: as {@link locateConfigFile} finds it (COUNTBOT_CONFIG, `./config/countbot.json`, `~/.countbot/config.json`). */
  file?: string;
  /** What `~` stands for. Default: `os.homedir()`. */
  homeDir?: string;
  /**
   * The channel plugins' config sections (`channels/index.ts` lists them). A `channels.<name>`
   * section with no plugin behind it is an error. Default: none.
   */
  channels?: readonly ChannelConfigSpec[];
}

/** An environment variable that, when set and not empty, replaces one config field. */
export interface EnvironmentOverride {
  variable: string;
  path: readonly string[];
  /** `port`: must be a whole number; `lowercase`: `INFO` means `info`. */
  kind: "text" | "port" | "lowercase";
}

const override = (variable: string, path: string, kind: EnvironmentOverride["kind"] = "text"): EnvironmentOverride => ({
  variable,
  path: path.split("."),
  kind,
});

/** Each catalog provider's key and base URL variables (`DEEPSEEK_API_KEY` sets `providers.deepseek.apiKey`). */
const providerOverrides = providerCatalog.flatMap((entry) => {
  const variables = providerVariables(entry);
  return [...variables.apiKey.map((variable) => override(variable, `providers.${entry.id}.apiKey`)), override(variables.baseURL, `providers.${entry.id}.baseURL`)];
});

/** The environment overrides, in the order they are applied. Operators and tests rely on these names. */
export const environmentOverrides: readonly EnvironmentOverride[] = [
  ...providerOverrides,
  override("COUNTBOT_MODEL", "agent.model"),
  override("REDIS_URL", "redis.url"),
  override("COUNTBOT_WORKSPACE", "workspace"),
  override("COUNTBOT_DATA_DIR", "dataDir"),
  override("COUNTBOT_API_HOST", "api.host"),
  override("COUNTBOT_API_PORT", "api.port", "port"),
  override("COUNTBOT_API_TOKEN", "api.token"),
  override("BRAVE_API_KEY", "tools.braveApiKey"),
  override("LOG_LEVEL", "log.level", "lowercase"),
  override("LOG_FORMAT", "log.format", "lowercase"),
];

/** The core overrides, then each channel plugin's (`TELEGRAM_BOT_TOKEN` sets `channels.telegram.token`). */
export function environmentOverridesOf(channels: readonly ChannelConfigSpec[]): EnvironmentOverride[] {
  const ofChannels = channels.flatMap((channel) =>
    Object.entries(channel.environment ?? {}).map(([variable, field]) => override(variable, `channels.${channel.name}.${field}`)),
  );
  return [...environmentOverrides, ...ofChannels];
}

/** Where a value came from, keyed by its formatted path; added to error messages about it. */
type Origins = Map<string, string>;

/** What substitution found: where values came from, and the references that were not set. */
interface Substitution {
  origins: Origins;
  unset: UnsetReference[];
}

/**
 * Reads, completes and validates the configuration. Throws one {@link ConfigError} that lists every
 * problem; its `path` is the first problem's field.
 */
export function loadConfig(options: LoadConfigOptions = {}): ResolvedConfig & WithUnsetReferences {
  const env = options.env ?? process.env;
  const cwd = options.cwd ?? process.cwd();
  const origins: Origins = new Map();
  const unset: UnsetReference[] = [];

  const candidate = locateFile(options.file, env, cwd, options.homeDir);
  const parsed = candidate === undefined ? undefined : readJsonFile(candidate);
  const file = parsed === undefined ? undefined : candidate;
  const substituted = substituteReferences(parsed ?? {}, env, [], { origins, unset });
  const raw = isPlainObject(substituted) ? substituted : {};
  const channels = options.channels ?? [];
  applyEnvironmentOverrides(raw, env, origins, environmentOverridesOf(channels));
  // A field an environment override filled after all (`from DEEPSEEK_API_KEY`) misses nothing.
  const missing = unset.filter((reference) => origins.get(reference.path)?.startsWith("from ${") ?? true);
  for (const { path, variable } of missing) {
    const origin = origins.get(path);
    origins.set(path, `${origin ? `${origin}; ` : ""}\${${variable}} is not set`);
  }

  const schema = defineConfigSchema(channels);
  const result = schema.safeParse(raw, { reportInput: true });
  if (!result.success) {
    const lines = result.error.issues.map((issue) => {
      const path = formatPath(issue.path);
      const origin = origins.get(path);
      const hideInput = issue.path.some((key, index) => isSecretField(key, issue.path[index - 1]));
      return `  ${path || "(top level)"}: ${describeIssue(issue, { schema, hideInput })}${origin ? ` (${origin})` : ""}`;
    });
    const source = file ? `in ${file.path}` : "(no config file; defaults and environment)";
    const first = result.error.issues[0];
    // No `cause`: the zod issues carry the raw input, secrets included, and the message says it all.
    throw new ConfigError(`Invalid configuration ${source}:\n${lines.join("\n")}`, first ? formatPath(first.path) || undefined : undefined);
  }

  const config: Config = result.data;
  const homeDir = options.homeDir ?? homedir();
  const dataDir = absolutePath(config.dataDir, cwd, homeDir);
  const workspace = config.workspace === undefined ? join(dataDir, "workspace") : absolutePath(config.workspace, cwd, homeDir);
  const agents = Object.fromEntries(
    Object.entries(config.agents).map(([id, profile]) => [id, { ...profile, workspace: absolutePath(profileWorkspace(id, profile, { dataDir, workspace }), cwd, homeDir) }]),
  );
  const overlaps = workspaceOverlaps(profileIds(config).map((id) => [id, id in agents ? agents[id]!.workspace : workspace] as const));
  if (overlaps.length > 0) {
    throw new ConfigError(`Invalid configuration:\n${overlaps.map((issue) => `  ${formatPath(issue.path)}: ${issue.message}`).join("\n")}`, formatPath(overlaps[0]!.path));
  }
  return { ...config, agents, dataDir, workspace, [unsetReferences]: missing };
}

interface ConfigFile {
  path: string;
  /** Missing is an error only for a file that was asked for by name. */
  required: boolean;
  /** Who named it, for the error message. */
  namedBy: string;
}

function locateFile(file: string | undefined, env: Environment, cwd: string, homeDir: string | undefined): ConfigFile | undefined {
  const source = locateConfigFile({ file, env, cwd, homeDir });
  if (source.file === undefined) return undefined;
  return { path: source.file, required: source.required, namedBy: source.origin === "COUNTBOT_CONFIG" ? " (named by COUNTBOT_CONFIG)" : "" };
}

/** The file's JSON value; undefined when an optional file is absent. */
function readJsonFile(file: ConfigFile): unknown {
  let text: string;
  try {
    text = readFileSync(file.path, "utf8");
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === "ENOENT" && !file.required) return undefined;
    const reason = code === "ENOENT" ? "not found" : `cannot be read (${code ?? String(error)})`;
    throw new ConfigError(`Config file ${file.path}${file.namedBy} ${reason}`, undefined, { cause: error });
  }
  text = text.replace(/^\uFEFF/, "");
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    const syntax = findJsonSyntaxError(text);
    const where = syntax ? `${file.path}:${syntax.line}:${syntax.column}` : file.path;
    const reason = syntax?.reason ?? "not valid JSON";
    // No `cause`: JSON.parse quotes the text around the error, which may hold a secret.
    throw new ConfigError(`Invalid JSON in config file ${where}: ${reason}`);
  }
  if (!isPlainObject(value)) {
    throw new ConfigError(`Config file ${file.path} must hold a JSON object ({ ... }) at the top level`);
  }
  return value;
}

const reference = /\$(\$?)\{([A-Za-z_][A-Za-z0-9_]*)\}/g;

/**
 * Replaces `${VAR}` in every string with the variable's value (unset: empty); `$${VAR}` stays a
 * literal `${VAR}`. A field or list item that only held references and came out empty is dropped,
 * so an unset `${OPENAI_API_KEY}` means "no key" and defaults still apply; every unset reference
 * is noted with its field, for the error its absence may cause.
 */
function substituteReferences(value: unknown, env: Environment, path: PropertyKey[], found: Substitution): unknown {
  if (typeof value === "string") {
    const names: string[] = [];
    const text = value.replace(reference, (_match, escape: string, name: string) => {
      if (escape) return `\${${name}}`;
      names.push(name);
      if (!env[name]) found.unset.push({ variable: name, path: formatPath(path) });
      return env[name] ?? "";
    });
    if (names.length === 0) return text;
    if (text === "") return undefined;
    found.origins.set(formatPath(path), `from ${names.map((name) => `\${${name}}`).join(", ")}`);
    return text;
  }
  if (Array.isArray(value)) {
    return value
      .map((item, index) => substituteReferences(item, env, [...path, index], found))
      .filter((item) => item !== undefined);
  }
  if (isPlainObject(value)) {
    // fromEntries defines own properties, so a "__proto__" key stays a key (and is reported as unknown).
    return Object.fromEntries(
      Object.entries(value)
        .map(([key, item]) => [key, substituteReferences(item, env, [...path, key], found)] as const)
        .filter(([, item]) => item !== undefined),
    );
  }
  return value;
}

function applyEnvironmentOverrides(config: Record<string, unknown>, env: Environment, origins: Origins, overrides: readonly EnvironmentOverride[]): void {
  for (const { variable, path, kind } of overrides) {
    const text = env[variable]?.trim();
    if (!text) continue;
    let value: string | number = text;
    if (kind === "port") {
      if (!/^\d+$/.test(text)) {
        throw new ConfigError(`${variable}: expected a port number (0-65535), got ${JSON.stringify(text)}`, path.join("."));
      }
      value = Number(text);
    } else if (kind === "lowercase") {
      value = text.toLowerCase();
    }
    if (setAt(config, path, value)) origins.set(formatPath(path), `from ${variable}`);
  }
}

/** Sets `path` in `target`, creating missing objects. Leaves a non-object in the way for validation to report. */
function setAt(target: Record<string, unknown>, path: readonly string[], value: unknown): boolean {
  let node = target;
  for (const key of path.slice(0, -1)) {
    const next = node[key];
    if (next === undefined || next === null) node[key] = {};
    else if (!isPlainObject(next)) return false;
    node = node[key] as Record<string, unknown>;
  }
  node[path.at(-1) as string] = value;
  return true;
}

function absolutePath(path: string, cwd: string, homeDir: string): string {
  if (path === "~") return resolve(homeDir);
  if (path.startsWith("~/") || path.startsWith("~\\")) return resolve(homeDir, path.slice(2));
  return resolve(cwd, path);
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
