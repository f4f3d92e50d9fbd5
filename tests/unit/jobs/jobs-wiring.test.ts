/** The jobs wiring: silent heartbeat replies are dropped and delivered ones count toward the cap. */
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import pino from "pino";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { createJobsOn } from "../../../src/app/jobs.js";
import { type Infrastructure, createInfrastructure } from "../../../src/app/infrastructure.js";
import type { InboundMessage } from "../../../src/bus/message.js";
import { loadConfig } from "../../../src/config/load.js";
import type { Jobs } from "../../../src/jobs/jobs.js";
import { heartbeatPrompt } from "../../../src/jobs/heartbeat.js";

let root: string;
let jobs: Jobs;
let infrastructure: Infrastructure;

beforeEach(async () => {
  root = await mkdtemp(path.join(tmpdir(), "countbot-jobs-wiring-"));
  const file = path.join(root, "countbot.json");
  await writeFile(file, JSON.stringify({ heartbeat: { enabled: true, target: "telegram:42", dailyCap: 5 } }));
  const config = loadConfig({ env: { COUNTBOT_DATA_DIR: root }, cwd: root, file });
  const logger = pino({ level: "silent" });
  infrastructure = await createInfrastructure(config, logger);
  jobs = createJobsOn(infrastructure, config, logger, { workspace: root });
});
afterEach(async () => {
  await jobs.close();
  await infrastructure.close();
  await rm(root, { recursive: true, force: true });
});

function system(content: string): InboundMessage {
  return { id: "s1", channel: "system", chatId: "telegram:42", senderId: "countbot", content, media: [], mentions: [], receivedAt: 0, metadata: {} };
}

describe("jobs.replyFilter", () => {
  it("drops HEARTBEAT_OK answers to a heartbeat and counts the others as delivered", () => {
    const prompt = system(heartbeatPrompt(Date.now(), "UTC"));
    expect(jobs.replyFilter([prompt], "HEARTBEAT_OK")).toBe(false);
    expect(jobs.heartbeat!.deliveredToday()).toBe(0);
    expect(jobs.replyFilter([prompt], "Your 3 pm meeting moved to 4 pm.")).toBe(true);
    expect(jobs.heartbeat!.deliveredToday()).toBe(1);
  });

  it("never drops a reply to anything but a heartbeat", () => {
    const user: InboundMessage = { ...system("hello"), channel: "telegram", chatId: "42" };
    expect(jobs.replyFilter([user], "HEARTBEAT_OK")).toBe(true);
    expect(jobs.replyFilter([system("Subagent [x] completed.")], "HEARTBEAT_OK")).toBe(true);
  });
});

describe("jobs.cleanup", () => {
  const DAY = 24 * 60 * 60 * 1000;
  const finishedRun = (id: string, endedDaysAgo: number, status: "completed" | "running" = "completed") => {
    const time = Date.now() - endedDaysAgo * DAY;
    return {
      id,
      teamId: "t1",
      teamName: "Research",
      mode: "pipeline" as const,
      goal: "g",
      sessionKey: "web:1",
      status,
      team: {
        id: "t1",
        name: "Research",
        description: "",
        mode: "pipeline" as const,
        enabled: true,
        crossReview: false,
        maxIterations: 10,
        nodeTimeoutSeconds: 600,
        agents: [{ id: "a", role: "r", task: "t", dependsOn: [] }],
        createdAt: time,
        updatedAt: time,
      },
      nodes: [{ id: "a", agentId: "a", kind: "agent" as const, status: "completed" as const, toolCalls: [], attempts: 1 }],
      createdAt: time - 1_000,
      ...(status === "completed" ? { completedAt: time } : {}),
    };
  };

  it("deletes team runs that ended more than workflows.keepRunsDays ago (30 by default), never an unfinished one", async () => {
    const runs = infrastructure.store.runs;
    await runs.create(finishedRun("ended-40-days-ago", 40));
    await runs.create(finishedRun("ended-20-days-ago", 20));
    await runs.create(finishedRun("running-for-90-days", 90, "running"));
    expect(await jobs.cleanup()).toEqual({ tasks: 0, runs: 1 });
    expect((await runs.list()).map((run) => run.id).sort()).toEqual(["ended-20-days-ago", "running-for-90-days"]);
  });

  it("keeps every run when keepRunsDays is 0", async () => {
    const file = path.join(root, "keep.json");
    await writeFile(file, JSON.stringify({ workflows: { keepRunsDays: 0 } }));
    const config = loadConfig({ env: { COUNTBOT_DATA_DIR: root }, cwd: root, file });
    const keeping = createJobsOn(infrastructure, config, pino({ level: "silent" }), { workspace: root });
    try {
      await infrastructure.store.runs.create(finishedRun("ended-long-ago", 3_000));
      expect(await keeping.cleanup()).toEqual({ tasks: 0, runs: 0 });
      expect(await infrastructure.store.runs.get("ended-long-ago")).toBeDefined();
    } finally {
      await keeping.close();
    }
  });
});
