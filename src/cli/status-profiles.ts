/**
 * What `countbot status` says of several bots and agents (README, Several bots): each platform's
 * accounts, and each agent profile with its model, workspace and the routing rules that lead to it.
 */
import { accountsOf } from "../config/accounts.js";
import { type RoutingRule, profileIds } from "../config/agents.js";
import type { ResolvedConfig } from "../config/schema.js";
import { profileConfig } from "../app/profiles.js";

/** `accounts: telegram (default, support), discord (default)`, for the enabled platform sections that have accounts. */
export function accountLines(config: ResolvedConfig): string[] {
  const platforms = Object.entries(config.channels).flatMap(([platform, section]) => {
    if (!isRecord(section) || section.enabled !== true || section.accounts === undefined) return [];
    return [`${platform} (${accountsOf(platform, section).map((account) => account.id).join(", ")})`];
  });
  return platforms.length === 0 ? [] : [`accounts: ${platforms.join(", ")}`];
}

/** One line per agent profile, when the config has any besides `default`. */
export function profileLines(config: ResolvedConfig): string[] {
  const ids = profileIds(config);
  if (ids.length === 1) return [];
  return [
    `agent profiles (${ids.length}):`,
    ...ids.map((id) => {
      const own = profileConfig(config, id);
      const rules = config.routing.flatMap((rule, index) => (rule.agent === id ? [`routing[${index}] (${describeMatch(rule.match)})`] : []));
      const routes = id === "default" ? [...rules, "every message no rule takes"] : rules;
      return `  ${id.padEnd(12)} ${own.agent.model}  workspace ${own.workspace}  from: ${routes.join("; ") || "no rule (unused)"}`;
    }),
  ];
}

function describeMatch(match: RoutingRule["match"]): string {
  const parts = Object.entries(match).map(([field, value]) => `${field} ${Array.isArray(value) ? value.join("|") : String(value)}`);
  return parts.join(", ") || "every message";
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
