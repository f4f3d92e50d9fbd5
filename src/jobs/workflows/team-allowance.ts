/**
 * The teams an agent profile may start (`agents.<id>.teams`, src/config/agents.ts): the catalogue
 * as that profile's chats and tools see it. No list: every team.
 */
import { teamNameKey } from "../../config/team.js";
import type { TeamCatalog } from "./team-catalog.js";

export function allowedTeams<Catalog extends Pick<TeamCatalog, "findByName" | "enabled">>(catalog: Catalog, names: readonly string[] | undefined): Pick<TeamCatalog, "findByName" | "enabled"> {
  if (names === undefined) return catalog;
  const keys = new Set(names.map(teamNameKey));
  return {
    async findByName(name) {
      const team = await catalog.findByName(name);
      return team && keys.has(teamNameKey(team.name)) ? team : undefined;
    },
    async enabled() {
      return (await catalog.enabled()).filter((team) => keys.has(teamNameKey(team.name)));
    },
  };
}
