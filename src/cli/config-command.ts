/** `countbot config`: the effective configuration, secrets masked, on stdout; which file it came from on stderr (stdout stays JSON). */
import { loadCountbotConfigWithSource } from "../app/config.js";
import { maskSecrets } from "../config/mask.js";
import { describeConfigSource } from "../config/source.js";
import type { CliContext } from "./setup.js";

export async function runConfigCommand(context: CliContext = {}): Promise<number> {
  const { config, source } = loadCountbotConfigWithSource(context.configFile);
  process.stderr.write(`config: ${describeConfigSource(source)}\n`);
  process.stdout.write(`${JSON.stringify(maskSecrets(config), null, 2)}\n`);
  return 0;
}
