/**
 * The `countbot` command line, on commander. Every command returns an exit code; `--help` on any
 * command prints its help and runs nothing; a usage mistake gets one line (with a suggestion when
 * one is close) and exit 2; any other failure prints one line on stderr that says what to fix.
 */
import { existsSync, readFileSync } from "node:fs";
import { Command, CommanderError, InvalidArgumentError, Option } from "commander";
import { ConfigError, errorMessage } from "../errors.js";
import type { OnboardOptions } from "./onboard-command.js";
import type * as AgentCommand from "./agent-command.js";
import type * as AuditCommand from "./audit-command.js";
import type * as ChatCommand from "./chat-command.js";
import type * as ConfigCommand from "./config-command.js";
import type * as DoctorCommand from "./doctor-command.js";
import type * as GatewayCommand from "./gateway-command.js";
import type * as OnboardCommand from "./onboard-command.js";
import type * as McpCommand from "./mcp-command.js";
import type * as MemoryCommand from "./memory-command.js";
import type * as PairingCommand from "./pairing-command.js";
import type * as RunsCommand from "./runs-command.js";
import type * as StartCommand from "./start-command.js";
import type * as StatusCommand from "./status-command.js";
import type * as TasksCommand from "./tasks-command.js";
import type * as UsageCommand from "./usage-command.js";
import type * as TeamsCommand from "./teams-command.js";
import type * as WorkerCommand from "./worker-command.js";
import { USAGE_DIMENSIONS, type UsageDimension } from "../budget/usage-report.js";
import { BUDGET_PERIODS, type BudgetPeriod } from "../config/budgets.js";
import type { CliContext } from "./setup.js";
import { TaskStatusSchema } from "../store/task-record.js";

/**
 * Each command's module, loaded when the command runs: `--help` and a usage mistake load none of
 * them, and each process loads only its own command's code (a worker no terminal renderer).
 */
const runAgentCommand: typeof AgentCommand.runAgentCommand = async (...args) => (await import("./agent-command.js")).runAgentCommand(...args);
const runAuditCommand: typeof AuditCommand.runAuditCommand = async (...args) => (await import("./audit-command.js")).runAuditCommand(...args);
const runChatCommand: typeof ChatCommand.runChatCommand = async (...args) => (await import("./chat-command.js")).runChatCommand(...args);
const runConfigCommand: typeof ConfigCommand.runConfigCommand = async (...args) => (await import("./config-command.js")).runConfigCommand(...args);
const runDoctorCommand: typeof DoctorCommand.runDoctorCommand = async (...args) => (await import("./doctor-command.js")).runDoctorCommand(...args);
const runGatewayCommand: typeof GatewayCommand.runGatewayCommand = async (...args) => (await import("./gateway-command.js")).runGatewayCommand(...args);
const runOnboardCommand: typeof OnboardCommand.runOnboardCommand = async (...args) => (await import("./onboard-command.js")).runOnboardCommand(...args);
const runMcpCommand: typeof McpCommand.runMcpCommand = async (...args) => (await import("./mcp-command.js")).runMcpCommand(...args);
const runMemoryCommand: typeof MemoryCommand.runMemoryCommand = async (...args) => (await import("./memory-command.js")).runMemoryCommand(...args);
const runPairingCommand: typeof PairingCommand.runPairingCommand = async (...args) => (await import("./pairing-command.js")).runPairingCommand(...args);
const runRunsCommand: typeof RunsCommand.runRunsCommand = async (...args) => (await import("./runs-command.js")).runRunsCommand(...args);
const runStartCommand: typeof StartCommand.runStartCommand = async (...args) => (await import("./start-command.js")).runStartCommand(...args);
const runStatusCommand: typeof StatusCommand.runStatusCommand = async (...args) => (await import("./status-command.js")).runStatusCommand(...args);
const runTasksCommand: typeof TasksCommand.runTasksCommand = async (...args) => (await import("./tasks-command.js")).runTasksCommand(...args);
const runUsageCommand: typeof UsageCommand.runUsageCommand = async (...args) => (await import("./usage-command.js")).runUsageCommand(...args);
const runTeamsCommand: typeof TeamsCommand.runTeamsCommand = async (...args) => (await import("./teams-command.js")).runTeamsCommand(...args);
const runWorkerCommand: typeof WorkerCommand.runWorkerCommand = async (...args) => (await import("./worker-command.js")).runWorkerCommand(...args);

const version = packageVersion();

/** The version in the package's package.json: two levels up from the sources, three from their build in dist/. */
function packageVersion(): string {
  for (const relative of ["../../package.json", "../../../package.json"]) {
    const file = new URL(relative, import.meta.url);
    if (existsSync(file)) return (JSON.parse(readFileSync(file, "utf8")) as { version: string }).version;
  }
  return "unknown";
}

export interface CliOutput {
  stdout: (text: string) => void;
  stderr: (text: string) => void;
}

const processOutput: CliOutput = { stdout: (text) => process.stdout.write(text), stderr: (text) => process.stderr.write(text) };

function positiveWhole(value: string): number {
  if (!/^\d+$/.test(value) || Number(value) < 1) throw new InvalidArgumentError(`expected a whole number above 0, got "${value}"`);
  return Number(value);
}

/** What every command's action needs: where its exit code goes, and the program's `--config`. */
interface CommandWiring {
  run: (code: Promise<number>) => void;
  context: () => CliContext;
}

/** The program: commands, options and what each runs (`run` receives its exit code). */
export function createProgram(output: CliOutput = processOutput, run: (code: Promise<number>) => void = () => undefined): Command {
  const program = new Command("countbot")
    .description("A chat-platform bot gateway with an LLM agent, on a message bus.")
    .version(version, "-V, --version", "print the version")
    .helpOption("-h, --help", "show help")
    .helpCommand("help [command]", "show help for a command")
    .option("-c, --config <file>", "the config file (else COUNTBOT_CONFIG, ./config/countbot.json, ~/.countbot/config.json)")
    .showSuggestionAfterError(true)
    .configureOutput(outputOf(output))
    .addHelpText(
      "after",
      "\nConfiguration: the first of --config, COUNTBOT_CONFIG, ./config/countbot.json and ~/.countbot/config.json\n(every command names the one it read), plus environment variables (OPENAI_API_KEY, ANTHROPIC_API_KEY,\nCOUNTBOT_MODEL, ...). See config/README.md.",
    );
  program.exitOverride();
  // `--config` is the program's, before or after the command's name: every command reads it here.
  const context = (): CliContext => ({ configFile: program.opts<{ config?: string }>().config });

  const wiring: CommandWiring = { run, context };
  addProcessCommands(program, wiring);
  addSetupCommands(program, wiring);
  addPairingCommands(program, wiring);
  addTaskCommands(program, wiring);
  addUsageCommand(program, wiring);
  addTeamCommands(program, wiring);
  addMemoryCommands(program, wiring);
  addToolCommands(program, wiring);

  // Every command: unknown options and stray arguments are mistakes, answered with a suggestion.
  for (const command of [program, ...allCommands(program)]) {
    // showGlobalOptions: each command's help lists --config too.
    command.showSuggestionAfterError(true).configureOutput(outputOf(output)).exitOverride().configureHelp({ showGlobalOptions: true });
    if (command !== program) command.allowExcessArguments(false);
  }
  return program;
}

/** Talking to the agent in the terminal, and running the processes (all in one, gateway, worker). */
function addProcessCommands(program: Command, { run, context }: CommandWiring): void {
  program
    .command("chat")
    .description("talk to the agent in this terminal")
    .option("-s, --session <id>", "the conversation to continue", "direct")
    .option("-v, --verbose", "log on stderr too (otherwise the log goes to <dataDir>/logs/countbot.log)")
    .action((options: { session: string; verbose?: boolean }) => run(runChatCommand({ ...options, ...context() })));

  program
    .command("agent")
    .description("run one turn, print the reply, exit 0 (non-zero + one line on stderr on failure)")
    .requiredOption("-m, --message <text>", "what to say")
    .option("-s, --session <id>", "the conversation to continue", "direct")
    .option("-v, --verbose", "log on stderr too (otherwise the log goes to <dataDir>/logs/countbot.log)")
    .action((options: { message: string; session: string; verbose?: boolean }) => run(runAgentCommand({ ...options, ...context() })));

  program
    .command("start")
    .description("everything in one process (Redis when REDIS_URL is set)")
    .action(() => run(runStartCommand(context())));

  program
    .command("gateway")
    .description("channels + HTTP API over Redis")
    .action(() => run(runGatewayCommand(context())));

  program
    .command("worker")
    .description("agent turns over Redis; run as many as you need")
    .action(() => run(runWorkerCommand(context())));
}

/** Setting up and checking: the effective config, a first config file, the doctor, the deployment's status. */
function addSetupCommands(program: Command, { run, context }: CommandWiring): void {
  program
    .command("config")
    .description("print the effective configuration, secrets masked")
    .action(() => run(runConfigCommand(context())));

  program
    .command("onboard")
    .description("write a first config file: provider, key, model (tested with one call), Telegram, allowlist")
    .option("--provider <name>", "one of the catalog (openai, anthropic, deepseek, qwen, ollama, ...: README, Providers) or a name for another OpenAI-compatible API")
    .option("--base-url <url>", "the provider's API root (a local server's URL; needed for APIs not in the catalog)")
    .option("--api-key <key>", "the provider's key (otherwise asked, hidden; local servers take none)")
    .option("--model <model>", "the model's name at the provider, e.g. gpt-4o-mini")
    .option("--telegram-token <token>", "a Telegram bot token (otherwise asked, hidden; empty: no Telegram)")
    .option("--allow <ids>", "Telegram user ids allowed in, comma-separated")
    .option("--no-test", "write without testing the model first")
    .option("--force", "replace an existing file")
    .addHelpText("after", "\nWhere it writes: --config FILE, else COUNTBOT_CONFIG, else ~/.countbot/config.json.")
    .action((options: OnboardOptions) => run(runOnboardCommand({ ...options, config: context().configFile })));

  program
    .command("doctor")
    .description("check the config, the model, Redis, the channels' credentials, the MCP servers, directories and the exec sandbox")
    .action(() => run(runDoctorCommand(context())));

  program
    .command("status")
    .description("over Redis: the gateways and workers alive, chats waiting and being answered, dead letters, tasks")
    .action(() => run(runStatusCommand(context())));
}

/** `pairing`: the strangers who asked in, and who was let in. */
function addPairingCommands(program: Command, { run, context }: CommandWiring): void {
  const pairing = program.command("pairing").description("DM pairing: pending codes, approve a code, revoke an approval");
  pairing
    .command("list")
    .description("pending codes and approved senders")
    .action(() => run(runPairingCommand(["list"], context())));
  pairing
    .command("approve")
    .description("let the sender who got CODE talk to the bot")
    .argument("<code>", "the pairing code the sender was given")
    .action((code: string) => run(runPairingCommand(["approve", code], context())));
  pairing
    .command("revoke")
    .description("withdraw an approval")
    .argument("<channel>", "e.g. telegram")
    .argument("<sender>", "the sender's id on that channel")
    .action((channel: string, sender: string) => run(runPairingCommand(["revoke", channel, sender], context())));
}

/** `tasks`: the subagents' tasks. */
function addTaskCommands(program: Command, { run, context }: CommandWiring): void {
  const tasks = program.command("tasks").description("subagent tasks: list, show, cancel");
  tasks
    .command("list")
    .description("tasks, newest first")
    .option("-s, --session <key>", "only this session's (channel:chat_id)")
    .addOption(new Option("--status <status>", "only tasks in this state").choices(TaskStatusSchema.options))
    .option("--limit <n>", "at most this many", positiveWhole)
    .action((options: { session?: string; status?: string; limit?: number }) => {
      const args = ["list", ...(options.session ? ["--session", options.session] : []), ...(options.status ? ["--status", options.status] : [])];
      if (options.limit !== undefined) args.push("--limit", String(options.limit));
      run(runTasksCommand(args, context()));
    });
  tasks
    .command("show")
    .description("one task in full")
    .argument("<id>", "the task's id")
    .action((id: string) => run(runTasksCommand(["show", id], context())));
  tasks
    .command("cancel")
    .description("stop a pending or running task (through the running process's API)")
    .argument("<id>", "the task's id")
    .action((id: string) => run(runTasksCommand(["cancel", id], context())));
}

/** `usage`: what model calls cost, and the budgets. */
function addUsageCommand(program: Command, { run, context }: CommandWiring): void {
  program
    .command("usage")
    .description("tokens and cost of model calls by person, chat, team run, channel or model; budgets of a person or chat")
    .addOption(new Option("--by <dimension>", "group by").choices(USAGE_DIMENSIONS).default("person"))
    .addOption(new Option("--period <period>", "the calendar period that holds today").choices(BUDGET_PERIODS).default("day"))
    .option("--person <key>", "also show the budgets of this person (channel:senderId)")
    .option("--chat <key>", "also show the budgets of this chat (channel:chat_id)")
    .option("--json", "print JSON")
    .action((options: { by: UsageDimension; period: BudgetPeriod; person?: string; chat?: string; json?: boolean }) => run(runUsageCommand(options, context())));
}

/** `teams` and `runs`: agent teams and their runs. */
function addTeamCommands(program: Command, { run, context }: CommandWiring): void {
  const teams = program.command("teams").description("agent teams: list, show, create, delete");
  teams
    .command("list")
    .description("agent teams (from the config file and the API)")
    .action(() => run(runTeamsCommand(["list"], context())));
  teams
    .command("show")
    .description("one team with its agents")
    .argument("<name>", "the team's name or id")
    .action((name: string) => run(runTeamsCommand(["show", name], context())));
  teams
    .command("create")
    .description("a team from a JSON or YAML file")
    .requiredOption("-f, --file <file>", "the team's definition")
    .action((options: { file: string }) => run(runTeamsCommand(["create", "-f", options.file], context())));
  teams
    .command("delete")
    .description("remove a team")
    .argument("<name>", "the team's name or id")
    .action((name: string) => run(runTeamsCommand(["delete", name], context())));

  const runs = program.command("runs").description("team runs: list, show, cancel");
  runs
    .command("list")
    .description("team runs, newest first")
    .option("--team <name>", "only this team's")
    .option("--chat <key>", "only runs started in this chat (channel:chat_id)")
    .option("--status <status>", "only runs in this state")
    .option("--limit <n>", "at most this many", positiveWhole)
    .action((options: { team?: string; chat?: string; status?: string; limit?: number }) => {
      const args = ["list"];
      for (const key of ["team", "chat", "status"] as const) if (options[key] !== undefined) args.push(`--${key}`, options[key]!);
      if (options.limit !== undefined) args.push("--limit", String(options.limit));
      run(runRunsCommand(args, context()));
    });
  runs
    .command("show")
    .description("one run with each agent's status and output")
    .argument("<id>", "the run's id")
    .action((id: string) => run(runRunsCommand(["show", id], context())));
  runs
    .command("cancel")
    .description("stop a run (through the running process's API)")
    .argument("<id>", "the run's id")
    .action((id: string) => run(runRunsCommand(["cancel", id], context())));
}

/** `memory`: a chat's or a person's long-term memory, as Markdown. */
function addMemoryCommands(program: Command, { run, context }: CommandWiring): void {
  const memory = program.command("memory").description("a chat's (or, with --person, a person's) long-term memory as Markdown: show, export, import");
  const personOption = "the argument names a person (channel:sender_id, or a name memory.identities links accounts under): their person memory";
  memory
    .command("show")
    .description("print a chat's memory and where it is kept")
    .argument("<session>", "the session key (channel:chat_id); with --person, the person")
    .option("-p, --person", personOption)
    .action((session: string, options: { person?: boolean }) => run(runMemoryCommand({ action: "show", session, person: options.person === true }, context())));
  memory
    .command("export")
    .description("write a chat's memory as Markdown to stdout or a file")
    .argument("<session>", "the session key (channel:chat_id); with --person, the person")
    .option("-o, --output <file>", "write it to this file instead of stdout")
    .option("-p, --person", personOption)
    .action((session: string, options: { output?: string; person?: boolean }) => run(runMemoryCommand({ action: "export", session, output: options.output, person: options.person === true }, context())));
  memory
    .command("import")
    .description("replace a chat's memory with a Markdown file")
    .argument("<session>", "the session key (channel:chat_id); with --person, the person")
    .argument("<file>", "the Markdown file (- for stdin)")
    .option("-p, --person", personOption)
    .action((session: string, file: string, options: { person?: boolean }) => run(runMemoryCommand({ action: "import", session, input: file, person: options.person === true }, context())));
}

/** `mcp` and `audit`: the MCP servers, and the log of every tool call. */
function addToolCommands(program: Command, { run, context }: CommandWiring): void {
  const mcp = program.command("mcp").description("the configured MCP servers: list them, probe one");
  mcp
    .command("list")
    .description("every MCP server: transport, where it is, whether it comes up, its tools")
    .action(() => run(runMcpCommand(["list"], context())));
  mcp
    .command("probe")
    .description("connect to one MCP server and show its tools and their parameters (exit 1 when it does not come up)")
    .argument("<name>", "the server's name in tools.mcpServers")
    .action((name: string) => run(runMcpCommand(["probe", name], context())));

  const audit = program.command("audit").description("the audit log of every tool call");
  audit
    .command("tail")
    .description("the newest tool calls, one JSON line each, oldest first")
    .option("-n, --lines <n>", "how many", positiveWhole, 20)
    .action((options: { lines: number }) => run(runAuditCommand({ ...options, ...context() })));
}

/** Help on stdout; a mistake as one line like every other failure: `countbot: unknown option '--sesion' (did you mean --session?)`. */
function outputOf(output: CliOutput) {
  return {
    writeOut: output.stdout,
    writeErr: output.stderr,
    outputError: (text: string, write: (text: string) => void) => write(`countbot: ${text.replace(/^error: /, "").replace(/\.?\s*\n\(Did you mean (.*)\?\)/, " (did you mean $1?)").trimEnd()}\n`),
  };
}

function allCommands(command: Command): Command[] {
  return command.commands.flatMap((child) => [child, ...allCommands(child)]);
}

/** Every command's full name (`pairing approve`), as `countbot help` lists them. */
export function commandNames(): string[] {
  const names: string[] = [];
  const visit = (command: Command, prefix: string) => {
    for (const child of command.commands) {
      const name = `${prefix}${child.name()}`;
      names.push(name);
      visit(child, `${name} `);
    }
  };
  visit(createProgram(), "");
  return names;
}

export async function main(argv: string[], output: CliOutput = processOutput): Promise<number> {
  let running: Promise<number> | undefined;
  const program = createProgram(output, (code) => (running = code));
  try {
    if (argv.length === 0) {
      program.outputHelp();
      return 0;
    }
    await program.parseAsync(argv, { from: "user" });
    if (!running) {
      // A group named without a subcommand (`countbot pairing`): its help, as a usage mistake.
      const group = program.commands.find((command) => command.name() === argv[0]);
      (group ?? program).outputHelp({ error: true });
      return 2;
    }
    return await running;
  } catch (error) {
    if (error instanceof CommanderError) {
      // Help (`--help`, `countbot help [command]`) and version printed what was asked; a group named
      // without its subcommand printed its help as an error (exit code 1 from commander); anything
      // else commander already said in one line.
      const asked = error.code === "commander.helpDisplayed" || error.code === "commander.version" || (error.code === "commander.help" && error.exitCode === 0);
      return asked ? 0 : 2;
    }
    return reportFailure(error, output);
  }
}

/** One line on stderr; exit code 2 for configuration and usage problems, 1 for the rest. */
export function reportFailure(error: unknown, output: CliOutput = processOutput): number {
  const usageProblem = error instanceof ConfigError;
  const message = errorMessage(error)
    .replace(/:\s*\n\s*/g, ": ")
    .replace(/\s*\n\s*/g, "; ");
  output.stderr(`countbot: ${message}\n`);
  return usageProblem ? 2 : 1;
}
