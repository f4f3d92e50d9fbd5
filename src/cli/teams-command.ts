/**
 * `countbot teams`: the operator's view of agent teams.
 *
 *   countbot teams list               every team (config file and store), by name
 *   countbot teams show NAME|ID       one team with its agents (model settings masked)
 *   countbot teams create -f FILE     a team from a JSON or YAML file (the API's POST body)
 *   countbot teams delete NAME|ID     a team created through the API or this command
 *
 * They read and write the configured store (file store or Redis) directly, as `countbot tasks
 * list` does: a running process sees a new team at the next message. Teams declared in the config
 * file are listed but changed only there.
 */
import { randomUUID } from "node:crypto";
import { readFile } from "node:fs/promises";
import { parseArgs } from "node:util";
import { parse as parseYaml } from "yaml";
import { TeamBodySchema } from "../api/team-routes.js";
import { createInfrastructure } from "../app/infrastructure.js";
import { describeIssue, formatPath } from "../config/issues.js";
import { maskSecrets } from "../config/mask.js";
import { ConfigError, errorMessage } from "../errors.js";
import { type TeamCatalog, createTeamCatalog } from "../jobs/workflows/team-catalog.js";
import { TeamConflictError, type TeamRecord } from "../store/team-record.js";
import { type CliContext, loadCliConfig } from "./setup.js";

const usage = "usage: countbot teams list | show NAME|ID | create -f FILE | delete NAME|ID";

/** A failure the operator can act on: one line on stderr, exit 1. */
class TeamsCommandError extends Error {
  override name = "TeamsCommandError";
}

export async function runTeamsCommand(args: string[], context: CliContext = {}): Promise<number> {
  const [action, ...rest] = args;
  try {
    switch (action) {
      case "list":
        if (rest.length > 0) throw new ConfigError(usage);
        return await withCatalog(context, async (catalog) => listing(await catalog.list(), catalog));
      case "show": {
        const reference = single(rest);
        return await withCatalog(context, async (catalog) => describeTeam(await find(catalog, reference), catalog));
      }
      case "create": {
        const { values, positionals } = parseArgs({ args: rest, allowPositionals: true, options: { file: { type: "string", short: "f" } } });
        if (!values.file || positionals.length > 0) throw new ConfigError(usage);
        const body = await readTeamFile(values.file);
        return await withCatalog(context, async (catalog) => {
          const holder = await catalog.findByName(body.name);
          if (holder) throw new TeamsCommandError(`a team named "${holder.name}" exists already (id ${holder.id}); team names are compared without case`);
          const time = Date.now();
          const team: TeamRecord = { ...body, id: `team-${randomUUID()}`, createdAt: time, updatedAt: time };
          try {
            await catalog.store.create(team);
          } catch (error) {
            if (error instanceof TeamConflictError) throw new TeamsCommandError(error.message);
            throw error;
          }
          return `created team ${team.name} (${team.id}): ${team.mode}, ${team.agents.length} agent${team.agents.length === 1 ? "" : "s"}`;
        });
      }
      case "delete": {
        const reference = single(rest);
        return await withCatalog(context, async (catalog) => {
          const team = await find(catalog, reference);
          if (catalog.isDeclared(team.id)) throw new TeamsCommandError(`team "${team.name}" is declared in the config file (teams["${team.name}"]): remove it there`);
          if (!(await catalog.store.delete(team.id))) throw new TeamsCommandError(`team ${team.id} not found`);
          return `deleted team ${team.name} (${team.id})`;
        });
      }
      default:
        throw new ConfigError(usage);
    }
  } catch (error) {
    if (!(error instanceof TeamsCommandError)) throw error;
    process.stderr.write(`countbot: ${error.message}\n`);
    return 1;
  }
}

function single(args: string[]): string {
  if (args.length !== 1 || args[0]!.startsWith("-")) throw new ConfigError(usage);
  return args[0]!;
}

/** The team in FILE, checked: a bad field fails here with its name (`agents[1].dependsOn[0]: ...`). */
async function readTeamFile(file: string) {
  let text: string;
  try {
    text = await readFile(file, "utf8");
  } catch (error) {
    throw new TeamsCommandError(`cannot read ${file}: ${errorMessage(error)}`);
  }
  let value: unknown;
  try {
    value = parseYaml(text);
  } catch (error) {
    throw new TeamsCommandError(`${file} is neither JSON nor YAML: ${errorMessage(error)}`);
  }
  const parsed = TeamBodySchema.safeParse(value, { reportInput: true });
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw new TeamsCommandError(`${file}: ${issue.path.length === 0 ? "the team" : formatPath(issue.path)}: ${describeIssue(issue, { schema: TeamBodySchema })}`);
  }
  return parsed.data;
}

async function withCatalog(context: CliContext, work: (catalog: TeamCatalog) => Promise<string>): Promise<number> {
  const { config, logger } = loadCliConfig(context);
  const infrastructure = await createInfrastructure(config, logger);
  try {
    process.stdout.write(`${await work(createTeamCatalog({ store: infrastructure.store.teams, teams: config.teams }))}\n`);
    return 0;
  } finally {
    await infrastructure.close();
  }
}

async function find(catalog: TeamCatalog, reference: string): Promise<TeamRecord> {
  const team = (await catalog.get(reference)) ?? (await catalog.findByName(reference));
  if (!team) throw new TeamsCommandError(`no team has the name or id "${reference}"; \`countbot teams list\` shows the teams`);
  return team;
}

function listing(teams: TeamRecord[], catalog: TeamCatalog): string {
  if (teams.length === 0) return "no teams";
  const header = ["NAME", "MODE", "AGENTS", "ENABLED", "SOURCE", "ID"];
  const rows = teams.map((team) => [team.name, team.mode, String(team.agents.length), team.enabled ? "yes" : "no", catalog.isDeclared(team.id) ? "config" : "api", team.id]);
  const widths = header.map((title, column) => Math.max(title.length, ...rows.map((row) => row[column]!.length)));
  return [header, ...rows].map((row) => row.map((cell, column) => cell.padEnd(widths[column]!)).join("  ").trimEnd()).join("\n");
}

function describeTeam(team: TeamRecord, catalog: TeamCatalog): string {
  const lines = [
    `name          ${team.name}`,
    `id            ${team.id} (${catalog.isDeclared(team.id) ? "config file" : "api"})`,
    `mode          ${team.mode}${team.mode === "council" ? (team.crossReview ? ", with cross-review" : ", no cross-review") : ""}`,
    `enabled       ${team.enabled ? "yes" : "no"}`,
    `iterations    ${team.maxIterations} per agent, timeout ${team.nodeTimeoutSeconds} s per agent${team.maxParallel ? `, ${team.maxParallel} at once` : ""}`,
  ];
  if (team.description) lines.push(`description   ${team.description}`);
  if (team.modelConfig) lines.push(`model config  ${JSON.stringify(maskSecrets(team.modelConfig))}`);
  lines.push(`agents (${team.agents.length}):`);
  for (const agent of team.agents) {
    const details = [
      agent.dependsOn.length > 0 ? `after ${agent.dependsOn.join(", ")}` : "",
      agent.perspective ? `perspective: ${agent.perspective}` : "",
      agent.model ? `model ${agent.model}` : "",
      agent.condition ? `if ${agent.condition.node} ${agent.condition.outputContains !== undefined ? `contains "${agent.condition.outputContains}"` : `lacks "${agent.condition.outputNotContains}"`}` : "",
    ].filter(Boolean);
    lines.push(`  ${agent.id}  ${agent.role}${details.length > 0 ? `  (${details.join("; ")})` : ""}`);
    if (agent.task) lines.push(`    task: ${agent.task}`);
  }
  return lines.join("\n");
}
