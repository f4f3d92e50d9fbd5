/**
 * A provider's configured key goes only to the base URL it was configured with. A loopback listener
 * stands in for a stranger's server: a team pointed at it without a key of its own is refused (by
 * the API with a 400, by the model resolver before anything is sent), and the listener's recorded
 * requests show that no configured key or header ever reached it.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import pino from "pino";
import { afterEach, describe, expect, it } from "vitest";
import { type ApiServer, createApiServer } from "../../../src/api/server.js";
import { registerTeamRoutes } from "../../../src/api/team-routes.js";
import { createMemoryBus } from "../../../src/bus/memory-bus.js";
import { ConfigSchema } from "../../../src/config/schema.js";
import { TeamConfigEntrySchema } from "../../../src/config/team.js";
import { ConfigError } from "../../../src/errors.js";
import { createTeamModels } from "../../../src/jobs/workflows/models.js";
import { createTeamCatalog } from "../../../src/jobs/workflows/team-catalog.js";
import { teamEndpointIssue } from "../../../src/jobs/workflows/team-endpoint.js";
import { createFileTeamStore } from "../../../src/store/file-teams.js";
import type { TeamRecord } from "../../../src/store/team-record.js";
import { type FakeOpenAIServer, startFakeOpenAI } from "../../support/fake-openai-server.js";

const PROVIDER_KEY = "sk-provider-secret-0123456789";
const HEADER_SECRET = "header-secret-0123456789";
const TEAM_KEY = "sk-team-own-key-0123456789";
const TOKEN = "test-token-0123456789abcdef";

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function fake(): Promise<FakeOpenAIServer> {
  const server = await startFakeOpenAI({ script: () => ({ text: "ok" }) });
  cleanups.push(() => server.close());
  return server;
}

/** Everything the listener was sent, as one text: headers and bodies. */
function seenBy(server: FakeOpenAIServer): string {
  return JSON.stringify(server.requests);
}

function configFor(providerURL: string, allowedModelHosts: string[] = []) {
  return ConfigSchema.parse({
    agent: { model: "openai/gpt-test", providerRetries: 0 },
    providers: { openai: { apiKey: PROVIDER_KEY, baseURL: providerURL, headers: { "x-extra-auth": HEADER_SECRET } }, ollama: {} },
    workflows: { allowedModelHosts },
  });
}

function team(modelConfig: TeamRecord["modelConfig"], agentModel?: string): TeamRecord {
  const entry = TeamConfigEntrySchema.parse({ mode: "pipeline", agents: [{ id: "only", role: "Only", task: "t", ...(agentModel ? { model: agentModel } : {}) }], modelConfig });
  return { ...entry, id: "team-1", name: "Leaky", createdAt: 0, updatedAt: 0 };
}

async function ask(config: ReturnType<typeof configFor>, record: TeamRecord): Promise<void> {
  const model = createTeamModels(config)(record, record.agents[0]);
  for await (const _part of model.stream({ messages: [{ role: "user", content: "hi" }] })) {
    // drain
  }
}

describe("team model settings and the provider's key", () => {
  it("refuses a team whose baseURL is another server and sends that server nothing", async () => {
    const provider = await fake();
    const stranger = await fake();
    const config = configFor(provider.url);
    const record = team({ baseURL: stranger.url });
    expect(() => createTeamModels(config)(record, record.agents[0])).toThrow(ConfigError);
    expect(() => createTeamModels(config)(record, record.agents[0])).toThrow(/modelConfig\.baseURL .* providers\.openai\.apiKey goes only there: set modelConfig\.apiKey/);
    expect(stranger.requests).toHaveLength(0);
  });

  it("sends a team's own key to its own baseURL, and none of the configured credentials", async () => {
    const provider = await fake();
    const stranger = await fake();
    await ask(configFor(provider.url), team({ baseURL: stranger.url, apiKey: TEAM_KEY }));
    expect(stranger.requests).toHaveLength(1);
    expect(stranger.requests[0]?.headers.authorization).toBe(`Bearer ${TEAM_KEY}`);
    expect(seenBy(stranger)).not.toContain(PROVIDER_KEY);
    expect(seenBy(stranger)).not.toContain(HEADER_SECRET);
  });

  it("refuses the same way when the team's agents name the keyed provider and only the team's model is keyless", async () => {
    const provider = await fake();
    const stranger = await fake();
    const config = configFor(provider.url);
    // ollama has no key: its own base URL may move; the agent's openai model must not follow it.
    const record = team({ model: "ollama/llama", baseURL: stranger.url }, "openai/gpt-test");
    expect(teamEndpointIssue(config, record)).toMatch(/provider "openai"/);
    expect(() => createTeamModels(config)(record, record.agents[0])).toThrow(ConfigError);
    expect(stranger.requests).toHaveLength(0);
  });

  it("keeps the configured key for the configured URL however it is spelled, and for an approved host", async () => {
    const provider = await fake();
    await ask(configFor(provider.url), team({ baseURL: `${provider.url}/` }));
    expect(provider.requests[0]?.headers.authorization).toBe(`Bearer ${PROVIDER_KEY}`);
    const approved = await fake();
    await ask(configFor(provider.url, ["127.0.0.1"]), team({ baseURL: approved.url }));
    expect(approved.requests[0]?.headers.authorization).toBe(`Bearer ${PROVIDER_KEY}`);
  });

  it("the API answers 400 saying why, for the settings and for a definition that moves an agent onto the keyed provider", async () => {
    const provider = await fake();
    const stranger = await fake();
    const config = configFor(provider.url);
    const directory = await mkdtemp(path.join(tmpdir(), "countbot-team-keys-"));
    cleanups.push(() => rm(directory, { recursive: true, force: true }));
    const store = createFileTeamStore({ file: path.join(directory, "teams.json") });
    cleanups.push(() => store.close());
    const catalog = createTeamCatalog({ store, teams: {}, now: () => 0 });
    const bus = createMemoryBus();
    cleanups.push(() => bus.close());
    const server: ApiServer = createApiServer({
      bus,
      config: { host: "127.0.0.1", port: 0, token: TOKEN },
      logger: pino({ level: "silent" }),
      readiness: async () => ({ ready: true, checks: {} }),
      routes: [(scope) => registerTeamRoutes(scope, { teams: catalog, newId: () => "team-1", endpointIssue: (record) => teamEndpointIssue(config, record) })],
    });
    cleanups.push(() => server.close());
    const { url } = await server.listen();
    const call = async (route: string, method: string, body: unknown) => {
      const response = await fetch(`${url}${route}`, { method, headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/json" }, body: JSON.stringify(body) });
      return { status: response.status, body: (await response.json()) as { error?: string } };
    };
    const definition = { name: "Leaky", mode: "pipeline", agents: [{ id: "only", role: "Only", task: "t", model: "ollama/llama" }] };
    expect((await call("/api/agent-teams", "POST", definition)).status).toBe(201);

    const refused = await call("/api/agent-teams/team-1/config", "PUT", { model: "openai/gpt-test", baseURL: stranger.url });
    expect(refused.status).toBe(400);
    expect(refused.body.error).toMatch(/providers\.openai\.apiKey goes only there: set modelConfig\.apiKey.* workflows\.allowedModelHosts/);
    expect((await catalog.get("team-1"))?.modelConfig).toBeUndefined();

    // Keyless provider moved: allowed; then an agent switched onto openai: refused.
    expect((await call("/api/agent-teams/team-1/config", "PUT", { model: "ollama/llama", baseURL: stranger.url })).status).toBe(200);
    const moved = await call("/api/agent-teams/team-1", "PUT", { ...definition, agents: [{ ...definition.agents[0], model: "openai/gpt-test" }] });
    expect(moved.status).toBe(400);
    expect(moved.body.error).toMatch(/provider "openai"/);

    expect((await call("/api/agent-teams/team-1/config", "PUT", { model: "openai/gpt-test", baseURL: stranger.url, apiKey: TEAM_KEY })).status).toBe(200);
    expect(stranger.requests).toHaveLength(0);
  });
});
