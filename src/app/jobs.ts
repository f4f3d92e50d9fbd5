/**
 * Background jobs (subagents, team runs, cron, heartbeat) on the deployment's queue, scheduler,
 * leader election and counters. Apart from the agent wiring (./agent.ts): a gateway creates its
 * jobs here only to start and cancel tasks and runs through the API, and loads no agent code.
 */
import type { Logger } from "pino";
import type { ResolvedConfig } from "../config/schema.js";
import { type Jobs, createJobs } from "../jobs/jobs.js";
import type { Infrastructure } from "./infrastructure.js";

/** Background jobs on this deployment's queue, scheduler, leader election and counters. */
export function createJobsOn(
  infrastructure: Infrastructure,
  config: ResolvedConfig,
  logger: Logger,
  options: Pick<Parameters<typeof createJobs>[0], "workspace" | "runTask" | "runTeamAgent" | "teamToolNames" | "profileOf" | "teamsOf" | "now">,
): Jobs {
  const { counters } = infrastructure;
  const heartbeatKey = (day: string) => `heartbeat:delivered:${day}`;
  return createJobs({
    config,
    logger,
    bus: infrastructure.bus,
    store: infrastructure.store,
    queue: infrastructure.queue,
    scheduler: infrastructure.scheduler(),
    elect: infrastructure.elect,
    heartbeatCounter: { increment: (day) => counters.increment(heartbeatKey(day), 3 * 24 * 60 * 60 * 1000), get: (day) => counters.get(heartbeatKey(day)) },
    ...options,
  });
}
