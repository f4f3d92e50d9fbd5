/**
 * The agent-teams API. Bodies are the team's fields as the config file's `teams` entries have them
 * (camelCase), plus `name`; every answer names the bad field (`agents[2].dependsOn[0]: unknown
 * agent "x": ...`).
 *
 *   GET    /api/agent-teams              every team (config file and API), by name
 *   POST   /api/agent-teams              create; 201, 409 when the name (without case) is taken
 *   GET    /api/agent-teams/:id          one team
 *   PUT    /api/agent-teams/:id          replace its definition (its model settings stay); 409 for a
 *                                        config-file team or a name another team has
 *   DELETE /api/agent-teams/:id          409 for a config-file team
 *   GET    /api/agent-teams/:id/config   its model settings, the API key masked
 *   PUT    /api/agent-teams/:id/config   replace them; an apiKey sent back masked keeps the stored one
 *   DELETE /api/agent-teams/:id/config   remove them (the team uses agent.model again)
 *
 * Teams never leave this API with their key: the model settings only through `/config`, masked.
 * A team whose model settings would send a provider's configured key to another base URL than the
 * provider's is refused with a 400 saying so (`endpointIssue`, see src/jobs/workflows/models.ts),
 * whether its settings or its agents' models changed.
 * Register it inside the scope that checks the bearer token.
 */
import { randomUUID } from "node:crypto";
import type { FastifyInstance } from "fastify";
import { z } from "zod";
import { maskSecret } from "../config/mask.js";
import { TeamModelConfigSchema, TeamNameSchema, checkTeam, teamShape } from "../config/team.js";
import { RequestError, parseRequest } from "../gateway/http-request.js";
import type { TeamCatalog } from "../jobs/workflows/team-catalog.js";
import { TeamConflictError, type TeamRecord } from "../store/team-record.js";

export interface TeamRoutesOptions {
  teams: Pick<TeamCatalog, "list" | "get" | "findByName" | "isDeclared" | "store">;
  now?: () => number;
  newId?: () => string;
  /** Why a team's model settings may not be used (a key would leave for another URL); undefined when they may. */
  endpointIssue?: (team: TeamRecord) => string | undefined;
}

const { modelConfig: _modelConfig, ...definitionShape } = teamShape;
/** A team's definition as POST and PUT take it: everything but its model settings. */
export const TeamBodySchema = z.strictObject({ name: TeamNameSchema, ...definitionShape }).superRefine(checkTeam);

const TeamParamsSchema = z.object({
  id: z
    .string()
    .min(1)
    .max(128)
    .regex(/^[\w.-]+$/, "letters, digits, _ . and - only"),
});

export type TeamJson = Omit<TeamRecord, "modelConfig" | "createdAt" | "updatedAt"> & {
  /** `config`: declared in the config file (read-only here); `api`: created through this API. */
  source: "config" | "api";
  /** Whether the team has model settings of its own (see `/config`). */
  hasModelConfig: boolean;
  createdAt: string;
  updatedAt: string;
};

export function registerTeamRoutes(scope: FastifyInstance, options: TeamRoutesOptions): void {
  const teams = new TeamAccess(options);
  registerDefinitionRoutes(scope, teams);
  registerModelConfigRoutes(scope, teams);
}

/** The team catalog as the routes use it: lookups that answer 404 and 409 with the field, and the JSON shape. */
class TeamAccess {
  readonly now: () => number;
  readonly newId: () => string;
  readonly store: TeamRoutesOptions["teams"]["store"];

  constructor(private readonly options: TeamRoutesOptions) {
    this.now = options.now ?? Date.now;
    this.newId = options.newId ?? (() => `team-${randomUUID()}`);
    this.store = options.teams.store;
  }

  list(): Promise<TeamRecord[]> {
    return this.options.teams.list();
  }

  /** Refuses (400) a team whose model settings would send a provider's key elsewhere. */
  endpointAllowed(team: TeamRecord): void {
    const issue = this.options.endpointIssue?.(team);
    if (issue !== undefined) throw new RequestError(issue, 400);
  }

  toJson(team: TeamRecord): TeamJson {
    const { modelConfig, createdAt, updatedAt, ...definition } = team;
    return { ...definition, source: this.options.teams.isDeclared(team.id) ? "config" : "api", hasModelConfig: modelConfig !== undefined, createdAt: new Date(createdAt).toISOString(), updatedAt: new Date(updatedAt).toISOString() };
  }

  async find(params: unknown): Promise<TeamRecord> {
    const { id } = parseRequest(TeamParamsSchema, params, "params");
    const team = await this.options.teams.get(id);
    if (!team) throw new RequestError(`team ${id} not found`, 404);
    return team;
  }

  /** A team the API may change: not one the config file declares. */
  async findWritable(params: unknown): Promise<TeamRecord> {
    const team = await this.find(params);
    if (this.options.teams.isDeclared(team.id)) throw new RequestError(`team "${team.name}" is declared in the config file (teams["${team.name}"]): change it there`, 409);
    return team;
  }

  async nameFree(name: string, id?: string): Promise<void> {
    const holder = await this.options.teams.findByName(name);
    if (holder && holder.id !== id) throw new RequestError(`name: a team named "${holder.name}" exists already (id ${holder.id}); team names are compared without case`, 409);
  }

  /** Runs a store write, a conflict the store found answered as 409 naming its field. */
  async stored(write: () => Promise<unknown>): Promise<void> {
    try {
      await write();
    } catch (error) {
      if (error instanceof TeamConflictError) throw new RequestError(`${error.field}: ${error.message}`, 409);
      throw error;
    }
  }
}

/** `/api/agent-teams` and `/api/agent-teams/:id`: the teams' definitions. */
function registerDefinitionRoutes(scope: FastifyInstance, teams: TeamAccess): void {
  scope.get("/api/agent-teams", async () => (await teams.list()).map((team) => teams.toJson(team)));

  scope.post("/api/agent-teams", async (request, reply) => {
    const body = parseRequest(TeamBodySchema, request.body, "body");
    await teams.nameFree(body.name);
    const time = teams.now();
    const team: TeamRecord = { ...body, id: teams.newId(), createdAt: time, updatedAt: time };
    teams.endpointAllowed(team);
    await teams.stored(() => teams.store.create(team));
    request.log.info({ teamId: team.id, team: team.name, mode: team.mode }, "team created through the API");
    return reply.code(201).send(teams.toJson(team));
  });

  scope.get("/api/agent-teams/:id", async (request) => teams.toJson(await teams.find(request.params)));

  scope.put("/api/agent-teams/:id", async (request) => {
    const current = await teams.findWritable(request.params);
    const body = parseRequest(TeamBodySchema, request.body, "body");
    await teams.nameFree(body.name, current.id);
    const team: TeamRecord = { ...body, id: current.id, createdAt: current.createdAt, updatedAt: teams.now(), ...(current.modelConfig ? { modelConfig: current.modelConfig } : {}) };
    teams.endpointAllowed(team);
    await teams.stored(async () => {
      if (!(await teams.store.replace(team))) throw new RequestError(`team ${current.id} not found`, 404);
    });
    return teams.toJson(team);
  });

  scope.delete("/api/agent-teams/:id", async (request) => {
    const team = await teams.findWritable(request.params);
    if (!(await teams.store.delete(team.id))) throw new RequestError(`team ${team.id} not found`, 404);
    request.log.info({ teamId: team.id, team: team.name }, "team deleted through the API");
    return { id: team.id, deleted: true };
  });
}

/** `/api/agent-teams/:id/config`: a team's model settings, the API key never shown whole. */
function registerModelConfigRoutes(scope: FastifyInstance, teams: TeamAccess): void {
  scope.get("/api/agent-teams/:id/config", async (request) => maskedConfig(await teams.find(request.params)));

  scope.put("/api/agent-teams/:id/config", async (request) => {
    const current = await teams.findWritable(request.params);
    const body = parseRequest(TeamModelConfigSchema, request.body, "body");
    // A form that shows the masked key and sends it back unchanged means "keep the key".
    const previousKey = current.modelConfig?.apiKey;
    const apiKey = body.apiKey !== undefined && previousKey !== undefined && body.apiKey === maskSecret(previousKey) ? previousKey : body.apiKey;
    const team: TeamRecord = { ...current, modelConfig: { ...body, ...(apiKey === undefined ? {} : { apiKey }) }, updatedAt: teams.now() };
    teams.endpointAllowed(team);
    await teams.stored(() => teams.store.replace(team));
    request.log.info({ teamId: team.id, team: team.name, model: team.modelConfig?.model }, "team model settings changed through the API");
    return maskedConfig(team);
  });

  scope.delete("/api/agent-teams/:id/config", async (request) => {
    const current = await teams.findWritable(request.params);
    const { modelConfig: _removed, ...rest } = current;
    await teams.stored(() => teams.store.replace({ ...rest, updatedAt: teams.now() }));
    return { id: current.id, modelConfig: {} };
  });
}

function maskedConfig(team: TeamRecord): { id: string; modelConfig: Record<string, unknown> } {
  const config = team.modelConfig ?? {};
  return { id: team.id, modelConfig: { ...config, ...(config.apiKey === undefined ? {} : { apiKey: maskSecret(config.apiKey) }) } };
}
