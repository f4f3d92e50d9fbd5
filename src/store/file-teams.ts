/**
 * Agent teams in the file store: all of them in one JSON file, `<dataDir>/teams.json`
 * (`{ "version": 1, "teams": [...] }`), replaced atomically on every write. Teams are few and
 * small, and one file makes the name check and the write one step: every operation runs through
 * one in-memory queue (one process owns a data dir, as for the rest of the file store).
 */
import { mkdir, readFile } from "node:fs/promises";
import path from "node:path";
import { z } from "zod";
import { teamNameKey } from "../config/team.js";
import { createKeyedQueue, writeFileAtomic } from "./file-io.js";
import type { TeamStore } from "./store.js";
import { TeamConflictError, type TeamRecord, TeamRecordSchema, validRecord } from "./team-record.js";

export interface FileTeamStoreOptions {
  /** `<dataDir>/teams.json`. */
  file: string;
}

const FileSchema = z.object({ version: z.literal(1), teams: z.array(z.unknown()) });

/** By name, compared without case; ties by id. */
export function byTeamName(left: TeamRecord, right: TeamRecord): number {
  const a = teamNameKey(left.name);
  const b = teamNameKey(right.name);
  return a < b ? -1 : a > b ? 1 : left.id < right.id ? -1 : left.id > right.id ? 1 : 0;
}

export function validTeam(team: TeamRecord): TeamRecord {
  return validRecord(TeamRecordSchema, team, "team");
}

export function createFileTeamStore(options: FileTeamStoreOptions): TeamStore & { close(): Promise<void> } {
  const queue = createKeyedQueue();
  let closed = false;

  async function readAll(): Promise<TeamRecord[]> {
    const text = await readFile(options.file, "utf8").catch((error: unknown) => ((error as NodeJS.ErrnoException).code === "ENOENT" ? undefined : Promise.reject(error)));
    if (text === undefined) return [];
    const file = FileSchema.parse(JSON.parse(text));
    // A team this version cannot read is skipped rather than failing every listing.
    return file.teams.flatMap((team) => {
      const parsed = TeamRecordSchema.safeParse(team);
      return parsed.success ? [parsed.data] : [];
    });
  }

  async function writeAll(teams: TeamRecord[]): Promise<void> {
    await mkdir(path.dirname(options.file), { recursive: true });
    await writeFileAtomic(options.file, `${JSON.stringify({ version: 1, teams }, null, 2)}\n`);
  }

  function serialized<T>(operation: () => Promise<T>): Promise<T> {
    if (closed) return Promise.reject(new Error("the file store is closed"));
    return queue.run("teams", operation);
  }

  function conflict(teams: TeamRecord[], team: TeamRecord): void {
    const other = teams.find((candidate) => candidate.id !== team.id && teamNameKey(candidate.name) === teamNameKey(team.name));
    if (other) throw new TeamConflictError(`a team named "${other.name}" exists already (id ${other.id})`, "name");
  }

  return {
    create(input) {
      return serialized(async () => {
        const team = validTeam(input);
        const teams = await readAll();
        if (teams.some((candidate) => candidate.id === team.id)) throw new TeamConflictError(`team ${team.id} exists already`, "id");
        conflict(teams, team);
        await writeAll([...teams, team]);
      });
    },
    get: (id) => serialized(async () => (await readAll()).find((team) => team.id === id)),
    findByName: (name) => serialized(async () => (await readAll()).find((team) => teamNameKey(team.name) === teamNameKey(name))),
    list: () => serialized(async () => (await readAll()).sort(byTeamName)),
    replace(input) {
      return serialized(async () => {
        const team = validTeam(input);
        const teams = await readAll();
        const index = teams.findIndex((candidate) => candidate.id === team.id);
        if (index === -1) return false;
        conflict(teams, team);
        teams[index] = team;
        await writeAll(teams);
        return true;
      });
    },
    delete(id) {
      return serialized(async () => {
        const teams = await readAll();
        const kept = teams.filter((team) => team.id !== id);
        if (kept.length === teams.length) return false;
        await writeAll(kept);
        return true;
      });
    },
    async close() {
      closed = true;
      await queue.drain();
    },
  };
}
