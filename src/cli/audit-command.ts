/**
 * `countbot audit tail [-n N]`: the newest tool calls of the deployment's audit log, one JSON line
 * each (redacted as written), oldest first, wherever the log is kept: the rotated file under the
 * data directory (one process), or the Redis stream every gateway and worker appends to.
 */
import { createInfrastructure } from "../app/infrastructure.js";
import { type CliContext, loadCliConfig } from "./setup.js";

export async function runAuditCommand(options: { lines: number } & CliContext): Promise<number> {
  const { config, logger } = loadCliConfig(options);
  const infrastructure = await createInfrastructure(config, logger);
  const audit = infrastructure.auditLog({ secrets: [] });
  try {
    const lines = await audit.tail(options.lines);
    process.stdout.write(lines.map((line) => `${line}\n`).join(""));
    if (lines.length === 0) process.stderr.write(`countbot: the audit log is empty${config.tools.audit.enabled ? "" : " (tools.audit.enabled is false)"}\n`);
    return 0;
  } finally {
    await audit.close();
    await infrastructure.close();
  }
}
