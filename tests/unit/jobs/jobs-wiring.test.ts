/** The jobs wiring: silent heartbeat replies are dropped and delivered ones count toward the cap. */
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import pino from "pino";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { createJobsOn } from "../../../src/app/agent.js";
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
