/**
 * Which config file a command reads, in this order:
 *
 * 1. `--config FILE` (the command line);
 * 2. `COUNTBOT_CONFIG`;
 * 3. `./config/countbot.json` in the working directory (a checkout, an image's `/app`);
 * 4. `~/.countbot/config.json` (where `countbot onboard` writes by default).
 *
 * The first two must exist (a file asked for by name and missing is an error); the last two are
 * used when they exist. None found: defaults and environment variables only. Every command that
 * reads config says which it used ({@link describeConfigSource}), so a command run from another
 * directory cannot quietly read nothing and then complain about a missing key.
 */
import { existsSync } from "node:fs";
import { homedir } from "node:os";
import { join, resolve } from "node:path";

type Environment = Readonly<Record<string, string | undefined>>;

/** What named the file, in the order above. */
export type ConfigOrigin = "--config" | "COUNTBOT_CONFIG" | "./config/countbot.json" | "~/.countbot/config.json";

export interface ConfigSource {
  /** The absolute path; undefined when no file was found. */
  file: string | undefined;
  /** What named or found it; undefined when no file was found. */
  origin: ConfigOrigin | undefined;
  /** A file asked for by name (`--config`, COUNTBOT_CONFIG): missing is an error, not "none". */
  required: boolean;
  /** The places looked at, in order (what "none found" means). */
  searched: string[];
}

export interface LocateConfigOptions {
  /** `--config`, relative to `cwd`. */
  file?: string;
  /** Default: `process.env`. */
  env?: Environment;
  /** Default: `process.cwd()`. */
  cwd?: string;
  /** What `~` stands for. Default: `os.homedir()`. */
  homeDir?: string;
}

/** `~/.countbot/config.json`: where `onboard` writes when not told otherwise. */
export function homeConfigFile(homeDir: string = homedir()): string {
  return join(homeDir, ".countbot", "config.json");
}

/** Finds the config file by the order in this module's header. Reads nothing but the directory entries. */
export function locateConfigFile(options: LocateConfigOptions = {}): ConfigSource {
  const cwd = options.cwd ?? process.cwd();
  if (options.file !== undefined) {
    const file = resolve(cwd, options.file);
    return { file, origin: "--config", required: true, searched: [file] };
  }
  const named = (options.env ?? process.env).COUNTBOT_CONFIG?.trim();
  if (named) {
    const file = resolve(cwd, named);
    return { file, origin: "COUNTBOT_CONFIG", required: true, searched: [file] };
  }
  const candidates: Array<[ConfigOrigin, string]> = [
    ["./config/countbot.json", join(cwd, "config", "countbot.json")],
    ["~/.countbot/config.json", homeConfigFile(options.homeDir)],
  ];
  const found = candidates.find(([, file]) => existsSync(file));
  const searched = candidates.map(([, file]) => file);
  return found ? { file: found[1], origin: found[0], required: false, searched } : { file: undefined, origin: undefined, required: false, searched };
}

/** One phrase for people: `/srv/countbot.json (from COUNTBOT_CONFIG)`, or what was looked for when none was found. */
export function describeConfigSource(source: ConfigSource): string {
  if (source.file === undefined) return `no config file (looked for ${source.searched.join(" and ")}): defaults and environment variables only`;
  const how = source.origin === "--config" || source.origin === "COUNTBOT_CONFIG" ? `named by ${source.origin}` : `found as ${source.origin}`;
  return `${source.file} (${how})`;
}
