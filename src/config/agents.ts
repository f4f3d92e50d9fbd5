/**
 * Agent profiles (`agents`) and the routing rules that pick one for a message (`routing`): several
 * agents in one deployment, each with its own persona, models, tools, workspace and memory (see
 * README, Several bots). The profile `default` always exists: the top-level `agent`, `workspace`
 * and `memory`, with `agents.default`'s fields over them when it is given.
 */
import path from "node:path";
import { z } from "zod";
import { splitChannel } from "./accounts.js";
import { PersonaSchema } from "./persona.js";

export const DEFAULT_PROFILE = "default";

const ProfileIdSchema = z.string().regex(/^[A-Za-z0-9][\w-]{0,31}$/, "1-32 letters, digits, _ and - (starting with a letter or digit)");
const modelName = z.string().regex(/^[\w.-]+\/.+$/, "expected `provider/model`, e.g. openai/gpt-4o-mini");

export const AgentProfileSchema = z.strictObject({
  persona: PersonaSchema.optional().describe("The profile's identity. Default: `agent.persona`."),
  model: modelName.optional().describe("`provider/model` of this profile. Default: `agent.model`."),
  fallbackModels: z.array(modelName).optional().describe("Tried in order when the model fails. Default: `agent.fallbackModels`."),
  tools: z
    .array(z.string().regex(/^[\w-]+\*?$/, "a tool name, or a prefix ending in * (mcp_github_*)"))
    .optional()
    .describe("The tools this profile offers, by name (`read_file`, `exec`, `mcp_github_*`). Default: every tool the config enables."),
  mcpServers: z.array(z.string()).optional().describe("The MCP servers (keys of `tools.mcpServers`) this profile connects to. Default: all."),
  teams: z.array(z.string().min(1)).optional().describe("The teams (by name, as `teams` or the API names them) this profile's chats may start, with `@name` or the workflow_run tool. Default: all."),
  workspace: z
    .string()
    .optional()
    .describe("The profile's workspace (files, skills, MEMORY.md): no other profile's tools reach it. Default: `<dataDir>/agents/<id>/workspace` (`default`: the top-level `workspace`)."),
  memory: z
    .strictObject({ scope: z.enum(["chat", "global"]).optional().describe("As `memory.scope`, for this profile.") })
    .optional()
    .describe("The profile's long-term memory, a namespace of its own. Default scope: `memory.scope`."),
});
export type AgentProfile = z.infer<typeof AgentProfileSchema>;

export const AgentProfilesSchema = z.record(ProfileIdSchema, AgentProfileSchema).default({});

const matchValue = z.union([z.string().min(1), z.array(z.string().min(1)).min(1)]);
const matchFields = ["channel", "account", "chat", "group", "sender"] as const;
type MatchField = (typeof matchFields)[number];

export const RoutingRuleSchema = z.strictObject({
  agent: ProfileIdSchema.describe("The profile (a key of `agents`, or `default`) the matching messages go to."),
  match: z
    .strictObject({
      channel: matchValue.optional().describe("Platform name(s): telegram, discord, ..."),
      account: matchValue.optional().describe("Account id(s) (`default` for a section without `accounts`)."),
      chat: matchValue.optional().describe("Chat id(s), as in the session key after the channel."),
      group: matchValue.optional().describe("Group chat id(s): the group's messages and its threads'."),
      sender: matchValue.optional().describe("Sender id(s) on the platform."),
    })
    .default({})
    .describe("Every field given must match (a list: any of its values); none given: every message."),
});
export type RoutingRule = z.infer<typeof RoutingRuleSchema>;

export const RoutingSchema = z
  .array(RoutingRuleSchema)
  .default([])
  .describe("Rules that pick an agent profile per message: the first that matches wins; no match: `default`.");

/** What a rule is matched against: a bus message's own fields. */
export interface RoutedMessage {
  channel: string;
  chatId: string;
  senderId?: string;
  chatType?: "private" | "group" | "thread";
  parentChatId?: string;
}

/** The profile the first matching rule names, or `default`. */
export function routeProfile(rules: readonly RoutingRule[], message: RoutedMessage): string {
  const { platform, account } = splitChannel(message.channel);
  // A chat of unknown type (a background event's, the operator's list) may be the group a rule names.
  const groupIds = message.chatType === "private" ? [] : [message.chatId, message.parentChatId];
  const facts: Record<MatchField, ReadonlyArray<string | undefined>> = {
    channel: [platform],
    account: [account],
    chat: [message.chatId],
    group: groupIds,
    sender: [message.senderId],
  };
  const rule = rules.find((candidate) => matchFields.every((field) => matches(candidate.match[field], facts[field])));
  return rule?.agent ?? DEFAULT_PROFILE;
}

function matches(wanted: string | string[] | undefined, actual: ReadonlyArray<string | undefined>): boolean {
  if (wanted === undefined) return true;
  const values = typeof wanted === "string" ? [wanted] : wanted;
  return actual.some((value) => value !== undefined && values.includes(value));
}

/** Config errors of `agents` and `routing` together: a rule naming no profile, a rule never reached, an unknown MCP server. */
export function routingIssues(config: {
  agents: Record<string, AgentProfile>;
  routing: readonly RoutingRule[];
  tools: { mcpServers: Record<string, unknown> };
  teams: Record<string, { agent?: string }>;
}): Array<{ path: (string | number)[]; message: string }> {
  const issues: Array<{ path: (string | number)[]; message: string }> = [];
  const known = [DEFAULT_PROFILE, ...Object.keys(config.agents).filter((id) => id !== DEFAULT_PROFILE)];
  for (const [index, rule] of config.routing.entries()) {
    if (!known.includes(rule.agent)) issues.push({ path: ["routing", index, "agent"], message: `no agent profile "${rule.agent}" (known: ${known.join(", ")}); add it under agents` });
    const earlier = config.routing.findIndex((candidate, at) => at < index && covers(candidate.match, rule.match));
    if (earlier >= 0) issues.push({ path: ["routing", index], message: `never reached: routing[${earlier}] comes first and matches every message this rule matches` });
  }
  for (const [name, team] of Object.entries(config.teams)) {
    if (team.agent !== undefined && !known.includes(team.agent)) issues.push({ path: ["teams", name, "agent"], message: `no agent profile "${team.agent}" (known: ${known.join(", ")})` });
  }
  for (const [id, profile] of Object.entries(config.agents)) {
    for (const [index, server] of (profile.mcpServers ?? []).entries()) {
      if (!(server in config.tools.mcpServers)) issues.push({ path: ["agents", id, "mcpServers", index], message: `no MCP server "${server}" under tools.mcpServers` });
    }
  }
  return issues;
}

/** Whether every message `later` matches is matched by `earlier` too. */
function covers(earlier: RoutingRule["match"], later: RoutingRule["match"]): boolean {
  return matchFields.every((field) => {
    const wide = earlier[field];
    if (wide === undefined) return true;
    const narrow = later[field];
    if (narrow === undefined) return false;
    const wideValues = typeof wide === "string" ? [wide] : wide;
    return (typeof narrow === "string" ? [narrow] : narrow).every((value) => wideValues.includes(value));
  });
}

/** The profile ids of a config: `default` first. */
export function profileIds(config: { agents: Record<string, unknown> }): string[] {
  return [DEFAULT_PROFILE, ...Object.keys(config.agents).filter((id) => id !== DEFAULT_PROFILE)];
}

/** A profile's workspace before it is made absolute: its own, or `<dataDir>/agents/<id>/workspace`. */
export function profileWorkspace(id: string, profile: AgentProfile | undefined, defaults: { dataDir: string; workspace: string }): string {
  if (profile?.workspace !== undefined) return profile.workspace;
  return id === DEFAULT_PROFILE ? defaults.workspace : path.join(defaults.dataDir, "agents", id, "workspace");
}

/** Two profiles whose workspaces are one or nest (absolute paths): their tools could read each other's files. */
export function workspaceOverlaps(workspaces: ReadonlyArray<readonly [string, string]>): Array<{ path: (string | number)[]; message: string }> {
  const issues: Array<{ path: (string | number)[]; message: string }> = [];
  for (const [index, [id, workspace]] of workspaces.entries()) {
    for (const [otherId, other] of workspaces.slice(0, index)) {
      if (inside(workspace, other) || inside(other, workspace)) {
        issues.push({ path: id === DEFAULT_PROFILE ? ["workspace"] : ["agents", id, "workspace"], message: `${workspace} overlaps profile "${otherId}"'s workspace ${other}: each profile needs a directory of its own, outside the others` });
      }
    }
  }
  return issues;
}

function inside(child: string, parent: string): boolean {
  const relative = path.relative(parent, child);
  return relative === "" || (!relative.startsWith("..") && !path.isAbsolute(relative));
}
