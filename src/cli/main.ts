/**
 * The `countbot` command line. Every command returns an exit code; failures print one line on
 * stderr that says what to fix.
 */
import { ConfigError, errorMessage } from "../errors.js";
import { runAgentCommand } from "./agent-command.js";
import { runChatCommand } from "./chat-command.js";
import { runConfigCommand } from "./config-command.js";
import { runGatewayCommand } from "./gateway-command.js";
import { runPairingCommand } from "./pairing-command.js";
import { runRunsCommand } from "./runs-command.js";
import { runStartCommand } from "./start-command.js";
import { runTasksCommand } from "./tasks-command.js";
import { runTeamsCommand } from "./teams-command.js";
import { runWorkerCommand } from "./worker-command.js";

const usage = `countbot: a chat-platform bot gateway with an LLM agent

Usage:
  countbot chat [-s SESSION]              talk to the agent in this terminal
  countbot agent -m "text" [-s SESSION]   run one turn and print the reply
  countbot start                          everything in one process (Redis when REDIS_URL is set)
  countbot gateway                        channels + HTTP API over Redis
  countbot worker                         agent turns from Redis (scale out: run several)
  countbot config                         print the effective config (secrets masked)
  countbot pairing list|approve|revoke    DM pairing: pending codes, approve CODE, revoke CHANNEL SENDER
  countbot tasks list|show|cancel         subagent tasks: list [--session KEY] [--status S], show ID, cancel ID
  countbot teams list|show|create|delete  agent teams: list, show NAME, create -f FILE (JSON or YAML), delete NAME
  countbot runs list|show|cancel          team runs: list [--team NAME] [--chat KEY] [--status S], show ID, cancel ID
  countbot help                           this text

Configuration: config/countbot.json or COUNTBOT_CONFIG, plus environment variables
(OPENAI_API_KEY, ANTHROPIC_API_KEY, COUNTBOT_MODEL, ...). See config/README.md.`;

export async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  try {
    switch (command) {
      case "chat":
        return await runChatCommand(rest);
      case "agent":
        return await runAgentCommand(rest);
      case "start":
        return await runStartCommand(rest);
      case "gateway":
        return await runGatewayCommand(rest);
      case "worker":
        return await runWorkerCommand(rest);
      case "config":
        return await runConfigCommand(rest);
      case "pairing":
        return await runPairingCommand(rest);
      case "tasks":
        return await runTasksCommand(rest);
      case "teams":
        return await runTeamsCommand(rest);
      case "runs":
        return await runRunsCommand(rest);
      case undefined:
      case "help":
      case "--help":
      case "-h":
        process.stdout.write(`${usage}\n`);
        return 0;
      default:
        process.stderr.write(`countbot: unknown command "${command}". Run \`countbot help\` for the list.\n`);
        return 2;
    }
  } catch (error) {
    return reportFailure(error);
  }
}

/** One line on stderr; exit code 2 for configuration and usage problems, 1 for the rest. */
export function reportFailure(error: unknown): number {
  const usageProblem = error instanceof ConfigError || (error instanceof TypeError && "code" in error && String(error.code).startsWith("ERR_PARSE_ARGS"));
  const message = errorMessage(error).replace(/\s*\n\s*/g, "; ");
  process.stderr.write(`countbot: ${message}\n`);
  return usageProblem ? 2 : 1;
}
