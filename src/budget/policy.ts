/**
 * Which budgets a model call counts against: its person's, its chat's, its team run's, its
 * channel's, its agent profile's and the deployment's, each the named one (`people`, `chats`,
 * `teams`, `channels`, `agents`) or else the default (`person`, `chat`, `teamRun`, `channel`,
 * `agent`); a named `null` exempts it.
 */
import type { BudgetsConfig, PeriodBudgetConfig, RunBudgetConfig } from "../config/budgets.js";
import type { BudgetUnit, BudgetWindow } from "../store/budget-ledger.js";
import { type PeriodSpec, WHOLE_RUN, type Window, windowOf } from "./periods.js";

/** Who and what a model call is for. */
export interface CallScope {
  /** `channel:senderId` of the person whose message started the turn. */
  person?: string;
  /** The session key `channel:chat_id`. */
  chat?: string;
  /** The platform, e.g. `telegram`. */
  channel?: string;
  /** A team agent's call: its run and the team's name. */
  teamRun?: { id: string; team: string };
  /** The agent profile the call is made for (src/config/agents.ts). */
  agent?: string;
}

export type BudgetKind = "person" | "chat" | "team" | "channel" | "agent" | "deployment";
export const BUDGET_KINDS: readonly BudgetKind[] = ["person", "chat", "team", "channel", "agent", "deployment"];

export interface AppliedBudget extends BudgetWindow {
  kind: BudgetKind;
  /** Whose: the person, chat, run id, channel name, or `deployment`. */
  subject: string;
  /** Undefined for a team run's budget, which lasts the run. */
  spec?: PeriodSpec;
  resetsAt?: number;
}

export { personOf } from "../bus/message.js";

/** The channel of a session key `channel:chat_id`. */
export function channelOfChat(chat: string): string {
  return chat.slice(0, Math.max(0, chat.indexOf(":"))) || chat;
}

export function budgetsFor(config: BudgetsConfig, scope: CallScope, now: number): AppliedBudget[] {
  const applied: AppliedBudget[] = [];
  const add = (kind: BudgetKind, subject: string, budget: PeriodBudgetConfig | RunBudgetConfig | null | undefined) => {
    if (!budget) return;
    const unit: BudgetUnit = budget.unit;
    // Money is counted in millionths of the currency.
    const limit = unit === "tokens" ? budget.limit : Math.round(budget.limit * 1_000_000);
    const spec = "period" in budget ? { period: budget.period, reset: budget.reset ?? config.reset, timeZone: budget.timeZone ?? config.timeZone } : undefined;
    const window: Window = spec ? windowOf(spec, now) : WHOLE_RUN;
    applied.push({
      kind,
      subject,
      scope: kind === "deployment" ? "deployment" : `${kind}:${subject}`,
      unit,
      limit,
      from: window.from,
      bucket: window.bucket,
      keepMs: window.keepMs,
      ...(spec ? { spec } : {}),
      ...(window.resetsAt === undefined ? {} : { resetsAt: window.resetsAt }),
    });
  };
  if (scope.person) add("person", scope.person, named(config.people, scope.person, config.person));
  if (scope.chat) add("chat", scope.chat, named(config.chats, scope.chat, config.chat));
  if (scope.teamRun) add("team", scope.teamRun.id, named(config.teams, scope.teamRun.team, config.teamRun));
  const channel = scope.channel ?? (scope.chat ? channelOfChat(scope.chat) : undefined);
  if (channel) add("channel", channel, named(config.channels, channel, config.channel));
  if (scope.agent) add("agent", scope.agent, named(config.agents, scope.agent, config.agent));
  add("deployment", "deployment", config.deployment);
  return applied;
}

function named<T>(overrides: Record<string, T | null>, name: string, fallback: T | undefined): T | undefined {
  if (Object.hasOwn(overrides, name)) return overrides[name] ?? undefined;
  return fallback;
}

/** Whether any budget is configured at all (else no call needs a reservation). */
export function anyBudget(config: BudgetsConfig): boolean {
  return Boolean(
    config.person || config.chat || config.channel || config.teamRun || config.agent || config.deployment ||
      [config.people, config.chats, config.channels, config.teams, config.agents].some((overrides) => Object.values(overrides).some((budget) => budget !== null)),
  );
}
