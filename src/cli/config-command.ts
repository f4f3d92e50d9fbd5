/** `countbot config`: the effective configuration, secrets masked. */
import { maskSecrets } from "../config/mask.js";
import { loadConfig } from "../config/load.js";

export async function runConfigCommand(_args: string[]): Promise<number> {
  process.stdout.write(`${JSON.stringify(maskSecrets(loadConfig()), null, 2)}\n`);
  return 0;
}
