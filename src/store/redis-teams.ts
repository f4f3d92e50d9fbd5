/**
 * Agent teams in the Redis store, shared by every gateway and worker of a deployment.
 *
 * Layout, under the deployment's hash tag:
 * - `{p}:team:<id>` HASH `json` → the team record, `nameKey` → its name as compared (without case)
 * - `{p}:teams:names` HASH nameKey → team id, every team: the unique-name index and the listing
 *
 * Create, replace and delete are Lua scripts (./lua) that check the name index and write the team
 * in one step, so two gateways creating the same name at once cannot both succeed.
 */
import { teamNameKey } from "../config/team.js";
import { hashTag, type RedisClient } from "../redis/client.js";
import { loadScript, runScript } from "../redis/scripts.js";
import { byTeamName, validTeam } from "./file-teams.js";
import type { TeamStore } from "./store.js";
import { TeamConflictError, type TeamRecord, TeamRecordSchema } from "./team-record.js";

export interface RedisTeamStoreOptions {
  redis: RedisClient;
  /** The deployment's key prefix; keys live under the hash tag `{prefix}`. */
  prefix: string;
}

export function redisTeamKeys(prefix: string): { team(id: string): string; names: string } {
  const tag = hashTag(prefix);
  return { team: (id) => `${tag}:team:${id}`, names: `${tag}:teams:names` };
}

const scriptsDirectory = new URL("./lua/", import.meta.url);
const scripts = {
  create: loadScript(scriptsDirectory, "create-team-2.lua"),
  replace: loadScript(scriptsDirectory, "replace-team-2.lua"),
  delete: loadScript(scriptsDirectory, "delete-team-2.lua"),
};

function decodeTeam(json: string | null | undefined): TeamRecord | undefined {
  if (!json) return undefined;
  try {
    const parsed = TeamRecordSchema.safeParse(JSON.parse(json));
    return parsed.success ? parsed.data : undefined;
  } catch {
    return undefined;
  }
}

type ScriptReply = [number, string?, string?];

export function createRedisTeamStore(options: RedisTeamStoreOptions): TeamStore & { close(): Promise<void> } {
  const { redis } = options;
  const keys = redisTeamKeys(options.prefix);
  let closed = false;

  function assertOpen(): void {
    if (closed) throw new Error("the redis store is closed");
  }

  async function read(id: string): Promise<TeamRecord | undefined> {
    const team = decodeTeam(await redis.hget(keys.team(id), "json"));
    return team?.id === id ? team : undefined;
  }

  function refused(reply: ScriptReply, team: TeamRecord): never {
    if (reply[1] === "id") throw new TeamConflictError(`team ${team.id} exists already`, "id");
    throw new TeamConflictError(`a team named "${team.name}" exists already (id ${reply[2] ?? "?"})`, "name");
  }

  return {
    async create(input) {
      assertOpen();
      const team = validTeam(input);
      const reply = (await runScript(redis, scripts.create, [keys.team(team.id), keys.names], [team.id, teamNameKey(team.name), JSON.stringify(team)])) as ScriptReply;
      if (reply[0] !== 1) refused(reply, team);
    },

    async get(id) {
      assertOpen();
      return id === "" ? undefined : read(id);
    },

    async findByName(name) {
      assertOpen();
      const id = await redis.hget(keys.names, teamNameKey(name));
      return id === null ? undefined : read(id);
    },

    async list() {
      assertOpen();
      const ids = Object.values(await redis.hgetall(keys.names));
      const teams = await Promise.all(ids.map((id) => read(id)));
      return teams.filter((team): team is TeamRecord => team !== undefined).sort(byTeamName);
    },

    async replace(input) {
      assertOpen();
      const team = validTeam(input);
      const reply = (await runScript(redis, scripts.replace, [keys.team(team.id), keys.names], [team.id, teamNameKey(team.name), JSON.stringify(team)])) as ScriptReply;
      if (reply[0] === 1) return true;
      if (reply[1] === undefined) return false;
      return refused(reply, team);
    },

    async delete(id) {
      assertOpen();
      if (id === "") return false;
      return ((await runScript(redis, scripts.delete, [keys.team(id), keys.names], [id])) as number) === 1;
    },

    async close() {
      closed = true;
    },
  };
}
