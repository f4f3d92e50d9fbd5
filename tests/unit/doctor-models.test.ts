/**
 * The models `countbot doctor` asks: read from the config and from the team store in the real
 * Redis (a random prefix), one use per model with who uses it, a team's own key and endpoint
 * asked where its agents would send them.
 */
import { randomUUID } from "node:crypto";
import { tmpdir } from "node:os";
import { Redis } from "ioredis";
import pino from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { askModel, modelUses, readTeams } from "../../src/app/doctor-models.js";
import { ConfigSchema, type ResolvedConfig } from "../../src/config/schema.js";
import { createRedisTeamStore } from "../../src/store/redis-teams.js";
import type { TeamRecord } from "../../src/store/team-record.js";
import { type FakeOpenAIServer, startFakeOpenAI } from "../support/fake-openai-server.js";
import { deleteKeys, redisUrl } from "../support/redis.js";

const prefix = `doctor-models-${randomUUID()}`;
let redis: Redis;
let llm: FakeOpenAIServer;
let teamLlm: FakeOpenAIServer;
const logger = pino({ level: "silent" });

beforeAll(async () => {
  redis = new Redis(redisUrl);
  llm = await startFakeOpenAI({ script: () => ({ text: "OK" }) });
  teamLlm = await startFakeOpenAI({ script: () => ({ text: "team OK" }) });
});
afterAll(async () => {
  await deleteKeys(redis, prefix);
  redis.disconnect();
  await Promise.all([llm.close(), teamLlm.close()]);
});

function team(name: string, agents: TeamRecord["agents"], modelConfig?: TeamRecord["modelConfig"]): TeamRecord {
  return { id: `team-${name}`, name, description: "", mode: "pipeline", enabled: true, crossReview: false, maxIterations: 10, nodeTimeoutSeconds: 600, agents, modelConfig, createdAt: 1, updatedAt: 1 };
}

const agent = (id: string, model?: string) => ({ id, role: id, task: "work", dependsOn: [], ...(model ? { model } : {}) });

describe("the models doctor checks", () => {
  it("reads the config's and the store's teams and asks each model once, a team with its own endpoint apart", async () => {
    const config: ResolvedConfig = {
      ...ConfigSchema.parse({
        agent: { model: "local/main", fallbackModels: ["local/spare"] },
        providers: { local: { baseURL: llm.url } },
        redis: { url: redisUrl, prefix },
        teams: { Research: { mode: "pipeline", agents: [agent("writer", "groq/llama-3.3-70b-versatile"), agent("critic")] } },
      }),
      dataDir: tmpdir(),
      workspace: tmpdir(),
    };
    const store = createRedisTeamStore({ redis, prefix });
    await store.create(team("Own Endpoint", [agent("solo", "local/main")], { apiKey: "sk-team-0123456789", baseURL: teamLlm.url }));
    const teams = await readTeams(config);
    expect(teams.map((entry) => entry.name)).toEqual(["Own Endpoint", "Research"]);

    const uses = modelUses(config, teams, logger);
    expect(uses.map((use) => [use.reference, use.usedBy])).toEqual([
      ["local/main", ["agent.model, subagents", 'team "Research" (critic)']],
      ["local/spare", ["agent.fallbackModels[0]"]],
      ["local/main", ['team "Own Endpoint" (solo)']],
      ["groq/llama-3.3-70b-versatile", ['team "Research" (writer)']],
    ]);
    expect(await askModel(uses[0]!)).toBe('answers ("OK")');
    expect(await askModel(uses[2]!)).toBe('answers ("team OK")');
    expect(teamLlm.requests.at(-1)!.headers.authorization).toBe("Bearer sk-team-0123456789");
    await expect(askModel(uses[3]!)).rejects.toThrow('No API key for provider "groq" (model groq/llama-3.3-70b-versatile). Set GROQ_API_KEY or providers.groq.apiKey in the config.');
  });

  it("says when the team store cannot be read", async () => {
    const config: ResolvedConfig = { ...ConfigSchema.parse({ redis: { url: "redis://127.0.0.1:1", connectTimeoutMs: 500 } }), dataDir: tmpdir(), workspace: tmpdir() };
    await expect(readTeams(config)).rejects.toThrow(/the team store in Redis cannot be read .*teams created through the API were not checked/);
  });
});
