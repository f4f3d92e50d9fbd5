/**
 * The models `countbot doctor` checks: every one the deployment may call. The agent's (which
 * subagents share), each fallback, and each team's and team agent's, from the config file and the
 * team store alike. One line each: a model several of them use is asked once, and the line says
 * who uses it, so a team naming a provider nobody configured fails naming that team and model.
 */
import path from "node:path";
import type { Logger } from "pino";
import type { ResolvedConfig } from "../config/schema.js";
import type { TeamAgent } from "../config/team.js";
import { errorMessage } from "../errors.js";
import { configTeamId, createTeamCatalog } from "../jobs/workflows/team-catalog.js";
import { createTeamModels } from "../jobs/workflows/models.js";
import type { ChatModel } from "../providers/chat-model.js";
import { resolveChatModel } from "../providers/factory.js";
import { connectRedis, topologyOf, waitUntilReady } from "../redis/client.js";
import { createFileTeamStore } from "../store/file-teams.js";
import { createRedisTeamStore } from "../store/redis-teams.js";
import type { TeamRecord } from "../store/team-record.js";

/** One model to ask, and who uses it. */
export interface ModelUse {
  reference: string;
  /** `agent.model, subagents`, `agent.fallbackModels[0]`, `team "research" (writer, critic)`. */
  usedBy: string[];
  /** Builds the model as its users get it (a team's own key or endpoint in place). */
  build(): ChatModel;
}

/** The models the config and `teams` use, in that order; each reference (with one set of endpoint settings) once. */
export function modelUses(config: ResolvedConfig, teams: readonly TeamRecord[], logger: Logger): ModelUse[] {
  // One request, no retries, no fallbacks: doctor asks whether each model answers now.
  const single: ResolvedConfig = { ...config, agent: { ...config.agent, providerRetries: 0, fallbackModels: [] } };
  const uses = new Map<string, ModelUse>();
  const add = (key: string, reference: string, user: string, build: () => ChatModel) => {
    const use = uses.get(key) ?? { reference, usedBy: [], build };
    if (!use.usedBy.includes(user)) use.usedBy.push(user);
    uses.set(key, use);
  };
  const plain = (reference: string) => () => resolveChatModel(single, { model: reference, logger });
  add(config.agent.model, config.agent.model, "agent.model, subagents", plain(config.agent.model));
  config.agent.fallbackModels.forEach((reference, index) => add(reference, reference, `agent.fallbackModels[${index}]`, plain(reference)));

  const teamModels = createTeamModels(single, { logger });
  for (const team of teams) {
    const { apiKey, baseURL } = team.modelConfig ?? {};
    const ownEndpoint = apiKey !== undefined || baseURL !== undefined;
    const byReference = new Map<string, { agents: string[]; agent?: TeamAgent }>();
    for (const agent of team.agents) {
      const reference = agent.model ?? team.modelConfig?.model ?? config.agent.model;
      const entry = byReference.get(reference) ?? { agents: [], agent };
      entry.agents.push(agent.id);
      byReference.set(reference, entry);
    }
    for (const [reference, { agents, agent }] of byReference) {
      // A team with its own key or endpoint is asked on its own; otherwise it shares the line of its model.
      const key = ownEndpoint ? `${reference} team ${team.id}` : reference;
      add(key, reference, `team "${team.name}" (${agents.join(", ")})`, ownEndpoint ? () => teamModels(team, agent) : plain(reference));
    }
  }
  return [...uses.values()];
}

/** Asks `use`'s model for one word; what it answered, or throws what went wrong. */
export async function askModel(use: ModelUse): Promise<string> {
  const model = use.build();
  let text = "";
  for await (const part of model.stream({ messages: [{ role: "user", content: "Reply with the single word OK." }], maxTokens: 5, temperature: 0 })) {
    if (part.type === "text-delta") text += part.text;
  }
  return `answers (${JSON.stringify(text.trim().slice(0, 40))})`;
}

/** Every team: the config file's and the store's (Redis with `redis.url`, else `<dataDir>/teams.json`). */
export async function readTeams(config: ResolvedConfig): Promise<TeamRecord[]> {
  if (!config.redis.url) {
    const store = createFileTeamStore({ file: path.join(config.dataDir, "teams.json") });
    try {
      return await createTeamCatalog({ store, teams: config.teams }).list();
    } finally {
      await store.close();
    }
  }
  const redis = connectRedis(config.redis.url, { name: "countbot-doctor", ...topologyOf(config.redis) });
  redis.on("error", () => undefined);
  try {
    await waitUntilReady(redis, config.redis.connectTimeoutMs);
    const store = createRedisTeamStore({ redis, prefix: config.redis.prefix });
    return await createTeamCatalog({ store, teams: config.teams }).list();
  } catch (error) {
    throw new Error(`the team store in Redis cannot be read (${errorMessage(error)}): teams created through the API were not checked`);
  } finally {
    redis.disconnect();
  }
}

/** The teams of the config file alone, for when the store cannot be read. */
export function declaredTeams(config: ResolvedConfig): TeamRecord[] {
  return Object.entries(config.teams).map(([name, team]) => ({ id: configTeamId(name), name, ...team, createdAt: 0, updatedAt: 0 }));
}
