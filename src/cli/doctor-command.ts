/** `countbot doctor`: checks what this deployment needs, one line each; exit 1 when one fails. */
import { channelPlugins } from "../../channels/index.js";
import { formatDoctor, runDoctor } from "../app/doctor.js";
import { collectSecrets, redactText } from "../config/mask.js";
import { errorMessage } from "../errors.js";
import { type CliContext, loadCliConfig } from "./setup.js";

export async function runDoctorCommand(context: CliContext = {}): Promise<number> {
  let setup: ReturnType<typeof loadCliConfig>;
  try {
    setup = loadCliConfig(context);
  } catch (error) {
    process.stdout.write(`${formatDoctor([{ name: "config", ok: false, detail: errorMessage(error).replace(/:\s*\n\s*/g, ": ").replace(/\s*\n\s*/g, "; ") }])}\n`);
    return 1;
  }
  const checks = await runDoctor(setup.config, setup.logger, { plugins: channelPlugins, withdrawn: setup.withdrawn, source: setup.source });
  // What a check quotes (a server's stderr, an error) may hold a secret of the config: masked.
  process.stdout.write(redactText(`${formatDoctor(checks)}\n`, collectSecrets(setup.config)));
  const failed = checks.filter((check) => !check.ok).length;
  process.stdout.write(failed === 0 ? "everything CountBot needs is in place\n" : `${failed} check${failed === 1 ? "" : "s"} failed\n`);
  return failed === 0 ? 0 : 1;
}
