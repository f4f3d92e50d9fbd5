/**
 * Every team a deployment knows: the ones declared in the config file (`teams`, read-only, ids
 * `config-<hash of the name>`) and the ones created through the API (the TeamStore). A name
 * belongs to one team: the API refuses a name the config file has, and should the file gain one
 * later, its team wins.
 */
import { createHash } from "node:crypto";
import type { Config } from "../../config/schema.js";
import { teamNameKey } from "../../config/team.js";
import type { TeamStore } from "../../store/store.js";
import type { TeamRecord } from "../../store/team-record.js";

export interface TeamCatalog {
  /** Config teams and stored teams, by name. */
  list(): Promise<TeamRecord[]>;
  get(id: string): Promise<TeamRecord | undefined>;
  /** Compared without case. */
  findByName(name: string): Promise<TeamRecord | undefined>;
  /** The names of the teams that can be started now, for trigger recognition. */
  enabled(): Promise<TeamRecord[]>;
  /** Whether the team comes from the config file (and cannot be changed through the API). */
  isDeclared(id: string): boolean;
  store: TeamStore;
}

export function configTeamId(name: string): string {
  return `config-${createHash("sha256").update(teamNameKey(name)).digest("hex").slice(0, 12)}`;
}

export function createTeamCatalog(options: { store: TeamStore; teams: Config["teams"]; now?: () => number }): TeamCatalog {
  const { store } = options;
  const loadedAt = (options.now ?? Date.now)();
  const declared: TeamRecord[] = Object.entries(options.teams).map(([name, team]) => ({ id: configTeamId(name), name, ...team, createdAt: loadedAt, updatedAt: loadedAt }));
  const declaredIds = new Set(declared.map((team) => team.id));
  const declaredNames = new Set(declared.map((team) => teamNameKey(team.name)));

  async function list(): Promise<TeamRecord[]> {
    const stored = (await store.list()).filter((team) => !declaredNames.has(teamNameKey(team.name)));
    return [...declared, ...stored].sort((left, right) => (teamNameKey(left.name) < teamNameKey(right.name) ? -1 : teamNameKey(left.name) > teamNameKey(right.name) ? 1 : 0));
  }

  return {
    list,
    async get(id) {
      return declared.find((team) => team.id === id) ?? (await store.get(id));
    },
    async findByName(name) {
      const key = teamNameKey(name);
      return declared.find((team) => teamNameKey(team.name) === key) ?? (await store.findByName(name));
    },
    async enabled() {
      return (await list()).filter((team) => team.enabled);
    },
    isDeclared: (id) => declaredIds.has(id),
    store,
  };
}
