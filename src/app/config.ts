/**
 * The configuration with every channel plugin's section: what the CLI loads, and what
 * `npm run schema` writes to config/ (the JSON Schema and the field reference).
 */
import { resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { channelPlugins } from "../../channels/index.js";
import { generatedDirectory, writeGeneratedFiles } from "../config/generate-schema.js";
import { type LoadConfigOptions, loadConfig } from "../config/load.js";
import type { ResolvedConfig } from "../config/schema.js";
import { type ConfigSource, locateConfigFile } from "../config/source.js";

/** The config file (`--config` first, then as src/config/source.ts finds it), loaded; `source` says which it was. */
export function loadCountbotConfigWithSource(file?: string): { config: ResolvedConfig; source: ConfigSource } {
  // loadConfig finds the same file by the same rules (and names COUNTBOT_CONFIG when its file is missing).
  return { config: loadCountbotConfig({ file }), source: locateConfigFile({ file }) };
}

/** Loads the config with the registered channels' sections and environment overrides. */
export function loadCountbotConfig(options: Omit<LoadConfigOptions, "channels"> = {}): ResolvedConfig {
  return loadConfig({ ...options, channels: channelPlugins });
}

if (process.argv[1] && import.meta.url === pathToFileURL(resolve(process.argv[1])).href) {
  writeGeneratedFiles(channelPlugins);
  console.log(`Wrote countbot.schema.json and README.md in ${generatedDirectory}`);
}
