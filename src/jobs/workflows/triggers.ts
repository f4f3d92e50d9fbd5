/**
 * Starting a team from a chat, recognized by code rather than left to the model:
 *
 * - `@TeamName goal`: an `@` at the start of the text or after a space, followed by the name of an
 *   enabled team (compared without case) and then a word boundary (a space, punctuation or the
 *   end). When several names fit (`Research` and `Research Team`) the longest wins. The goal is
 *   the rest of the text.
 * - `/team <name> <goal>` (also `/team@bot ...`): the same longest-name rule on what follows;
 *   `/team` alone, or with a name no team has, answers with the list of teams.
 *
 * The gateway's admission has already run: in groups the bot was addressed as its group policy
 * requires (and a leading @bot mention is gone), so `@CountBot @Reviewers check this` starts the
 * Reviewers and `@Reviewers check this` in a group, with the bot not mentioned, never arrives here.
 * Background (`system`) messages never start teams.
 */
import { createHash } from "node:crypto";
import type { Logger } from "pino";
import { labelledContent, speakerIdOf } from "../../prompt/speakers.js";
import type { TurnIntercept } from "../../bus/turn-intercept.js";
import { type InboundMessage, SYSTEM_CHANNEL, sessionKeyOf } from "../../bus/message.js";
import { personOf } from "../../budget/policy.js";
import { ToolError, errorMessage } from "../../errors.js";
import type { SessionStore } from "../../store/store.js";
import type { TeamRecord } from "../../store/team-record.js";
import type { WorkflowEngine } from "./engine.js";
import { startedReply } from "./messages.js";
import { allowedTeams } from "./team-allowance.js";
import type { TeamCatalog } from "./team-catalog.js";

export type Recognized = { kind: "run"; team: TeamRecord; goal: string } | { kind: "reply"; text: string };

const COMMAND = /^\s*\/team(?:@[\w]+)?(?=\s|$)/i;
const WORD = /[\p{L}\p{N}_]/u;

/** Whether the text may start a team (an `@` after a space or at the start, or `/team`): such a message is a turn of its own. */
export function mayStartTeam(content: string): boolean {
  return COMMAND.test(content) || /(?:^|\s)@[^\s@]/u.test(content);
}

/** The longest enabled team whose name starts `text` at `at` and ends at a word boundary; its length in `text`. */
function longestNameAt(text: string, at: number, teams: readonly TeamRecord[]): { team: TeamRecord; end: number } | undefined {
  let best: { team: TeamRecord; end: number } | undefined;
  for (const team of teams) {
    const end = at + team.name.length;
    if (end > text.length || (best && team.name.length <= best.end - at)) continue;
    if (text.slice(at, end).toLocaleLowerCase() !== team.name.toLocaleLowerCase()) continue;
    const next = text[end];
    if (next !== undefined && WORD.test(next)) continue;
    best = { team, end };
  }
  return best;
}

function listTeams(teams: readonly TeamRecord[]): string {
  if (teams.length === 0) return "No team is enabled. Teams are declared under `teams` in the config file or created with POST /api/agent-teams.";
  return `Teams: ${teams.map((team) => `${team.name} (${team.mode}${team.description ? `: ${team.description}` : ""})`).join("; ")}.\nStart one with @<team> <goal> or /team <team> <goal>.`;
}

function tidyGoal(text: string): string {
  return text.replace(/^[\s,:;.-]+/, "").trim();
}

/** What the text asks for, given the enabled teams; undefined when it starts no team. */
export function recognizeTrigger(content: string, teams: readonly TeamRecord[]): Recognized | undefined {
  const command = COMMAND.exec(content);
  if (command) {
    const rest = content.slice(command[0].length).replace(/^\s+/, "");
    const found = rest === "" ? undefined : longestNameAt(rest, 0, teams);
    if (!found) return { kind: "reply", text: rest === "" ? listTeams(teams) : `No enabled team is called that. ${listTeams(teams)}` };
    return goalFor(found.team, rest.slice(found.end));
  }
  for (let at = content.indexOf("@"); at !== -1; at = content.indexOf("@", at + 1)) {
    if (at > 0 && !/\s/u.test(content[at - 1]!)) continue;
    const found = longestNameAt(content, at + 1, teams);
    if (!found) continue;
    return goalFor(found.team, `${content.slice(0, at)} ${content.slice(found.end)}`);
  }
  return undefined;
}

function goalFor(team: TeamRecord, text: string): Recognized {
  const goal = tidyGoal(text.replace(/\s+/g, " "));
  if (goal === "") return { kind: "reply", text: `What should ${team.name} do? Write @${team.name} <goal>.` };
  return { kind: "run", team, goal };
}

/** The run id a trigger message gets: the same for a re-run of its turn, so it never starts two runs. */
export function triggerRunId(message: Pick<InboundMessage, "channel" | "chatId" | "id">): string {
  return `wf-${createHash("sha256").update(`${sessionKeyOf(message)}\n${message.id}`).digest("hex").slice(0, 32)}`;
}

export interface TeamTriggerOptions {
  catalog: Pick<TeamCatalog, "enabled" | "findByName">;
  engine: Pick<WorkflowEngine, "start" | "get">;
  /** Where the exchange is recorded, fenced by the turn's lease. */
  sessions: Pick<SessionStore, "append">;
  /** The agent profile a message's chat is routed to (src/config/agents.ts): the run runs as it. Default: none recorded (`default`). */
  profileOf?: (message: InboundMessage) => string;
  /** The team names a message's chat may start (its profile's `teams`); undefined: every team. */
  teamsOf?: (message: InboundMessage) => readonly string[] | undefined;
  now?: () => number;
  logger?: Logger;
}

/** The TurnConsumer's intercept: starts the team a message names and answers at once. */
export function createTeamTrigger(options: TeamTriggerOptions): TurnIntercept {
  const now = options.now ?? Date.now;
  return {
    mayTake: (message) => message.channel !== SYSTEM_CHANNEL && mayStartTeam(message.content),

    async take(message, claim) {
      if (message.channel === SYSTEM_CHANNEL) return undefined;
      const recognized = recognizeTrigger(message.content, await allowedTeams(options.catalog, options.teamsOf?.(message)).enabled());
      if (!recognized) return undefined;
      let reply: string;
      if (recognized.kind === "reply") {
        reply = recognized.text;
      } else {
        const runId = triggerRunId(message);
        try {
          const replyTo = platformMessageIdOf(message);
          const run = (await options.engine.get(runId)) ?? (await options.engine.start({ team: recognized.team, goal: recognized.goal, sessionKey: claim.sessionKey, runId, origin: "mention", ...(replyTo ? { replyTo } : {}), person: personOf(message), ...profileField(options.profileOf?.(message)) }));
          reply = startedReply(run);
        } catch (error) {
          if (!(error instanceof ToolError)) throw error;
          reply = `Could not start ${recognized.team.name}: ${errorMessage(error)}.${error.hint ? ` ${error.hint}` : ""}`;
        }
      }
      const at = now();
      await options.sessions.append(
        claim.sessionKey,
        [
          { role: "user", content: labelledContent(message), at, messageIds: [message.id], speakers: [speakerIdOf(message)] },
          { role: "assistant", content: reply, at },
        ],
        { token: claim.token },
      );
      options.logger?.info({ session: claim.sessionKey, message: message.id, team: recognized.kind === "run" ? recognized.team.name : undefined }, "team trigger answered");
      return reply;
    },
  };
}

/** The platform's id of the trigger message, which the run's status message and result thread to. */
function platformMessageIdOf(message: InboundMessage): string | undefined {
  const value = message.metadata.platformMessageId;
  return typeof value === "string" || typeof value === "number" ? String(value) : undefined;
}

/** A run's `profile`, recorded only for a profile besides `default`. */
function profileField(profile: string | undefined): { profile?: string } {
  return profile === undefined || profile === "default" ? {} : { profile };
}
