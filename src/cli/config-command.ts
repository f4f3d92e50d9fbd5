/** `countbot config`: the effective configuration, secrets masked. */
import { maskSecrets } from "../config/mask.js";
import { loadCountbotConfig } from "../app/config.js";

export async function runConfigCommand(): Promise<number> {
  process.stdout.write(`${JSON.stringify(maskSecrets(loadCountbotConfig()), null, 2)}\n`);
  return 0;
}
