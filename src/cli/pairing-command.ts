/**
 * `countbot pairing`: the operator's side of DM pairing, against the configured store (the file
 * store under the data dir, or Redis when REDIS_URL / redis.url is set). Starts no bus consumer.
 *
 *   countbot pairing list                      pending codes and approved senders
 *   countbot pairing approve CODE              let the sender who got CODE talk to the bot
 *   countbot pairing revoke CHANNEL SENDER     withdraw an approval
 */
import { createInfrastructure } from "../app/infrastructure.js";
import { ConfigError } from "../errors.js";
import type { ApprovedPairing, PairingRequest, PairingStore } from "../store/store.js";
import { type CliContext, loadCliConfig } from "./setup.js";

const usage = "usage: countbot pairing list | approve CODE | revoke CHANNEL SENDER";

/** A failure the operator can act on: one line on stderr, exit 1. */
class PairingCommandError extends Error {
  override name = "PairingCommandError";
}

export async function runPairingCommand(args: string[], options: { now?: () => number } & CliContext = {}): Promise<number> {
  const [action, ...rest] = args;
  const expected = { list: 0, approve: 1, revoke: 2 } as Record<string, number>;
  if (action === undefined || expected[action] === undefined || rest.length !== expected[action]) throw new ConfigError(usage);

  const now = options.now ?? Date.now;
  const { config, logger } = loadCliConfig(options);
  const infrastructure = await createInfrastructure(config, logger);
  try {
    const output = await run(infrastructure.store.pairing, action, rest, now());
    process.stdout.write(`${output}\n`);
    return 0;
  } catch (error) {
    if (!(error instanceof PairingCommandError)) throw error;
    process.stderr.write(`countbot: ${error.message}\n`);
    return 1;
  } finally {
    await infrastructure.close();
  }
}

async function run(pairing: PairingStore, action: string, args: string[], now: number): Promise<string> {
  switch (action) {
    case "approve": {
      const code = args[0]!;
      const approved = await pairing.approve(code, now);
      if (!approved) throw new PairingCommandError(`pairing code ${code} is unknown or expired; \`countbot pairing list\` shows the pending codes`);
      return `approved ${describeSender(approved)}: they can talk to the bot now`;
    }
    case "revoke": {
      const [channel, senderId] = args as [string, string];
      if (!(await pairing.revoke(channel, senderId))) throw new PairingCommandError(`${channel} sender ${senderId} is not approved; nothing to revoke`);
      return `revoked ${channel} sender ${senderId}`;
    }
    default:
      return listing(await pairing.listPending(now), await pairing.listApproved(), now);
  }
}

function describeSender(entry: { channel: string; senderId: string; senderName?: string }): string {
  return `${entry.channel} sender ${entry.senderId}${entry.senderName ? ` (${entry.senderName})` : ""}`;
}

function listing(pending: PairingRequest[], approved: ApprovedPairing[], now: number): string {
  const lines = [`pending (${pending.length}):`];
  for (const request of pending) {
    const minutes = Math.max(1, Math.ceil((request.expiresAt - now) / 60_000));
    lines.push(`  ${request.code}  ${describeSender(request)}  expires in ${minutes} min`);
  }
  lines.push(`approved (${approved.length}):`);
  for (const entry of approved) lines.push(`  ${describeSender(entry)}  since ${new Date(entry.approvedAt).toISOString()}`);
  return lines.join("\n");
}
