/** The BullMQ dashboard on a Redis gateway: behind the token, listing the subagents and workflows queues. */
import { randomUUID } from "node:crypto";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { Redis } from "ioredis";
import pino from "pino";
import { afterEach, describe, expect, it } from "vitest";
import { webChannel } from "../../../channels/web/plugin.js";
import { createJobsOn } from "../../../src/app/jobs.js";
import { createGateway } from "../../../src/app/gateway.js";
import { createInfrastructure } from "../../../src/app/infrastructure.js";
import { loadConfig } from "../../../src/config/load.js";
import { deleteKeys, redisUrl } from "../../support/redis.js";

const TOKEN = "board-test-token-0123456789";
const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

describe("/admin/queues", () => {
  it("shows the deployment's BullMQ queues to whoever holds the token", async () => {
    const root = await mkdtemp(path.join(tmpdir(), "countbot-board-"));
    const prefix = `countbot-board-${randomUUID()}`;
    cleanups.push(async () => {
      const redis = new Redis(redisUrl);
      await deleteKeys(redis, prefix);
      await redis.quit();
      await rm(root, { recursive: true, force: true });
    });
    const file = path.join(root, "countbot.json");
    await writeFile(file, JSON.stringify({ api: { port: 0, token: TOKEN }, redis: { url: redisUrl, prefix } }));
    const config = loadConfig({ env: { COUNTBOT_DATA_DIR: path.join(root, "data") }, cwd: root, file, channels: [webChannel] });
    const logger = pino({ level: "silent" });
    const infrastructure = await createInfrastructure(config, logger);
    cleanups.push(() => infrastructure.close());
    const jobs = createJobsOn(infrastructure, config, logger, { workspace: root });
    cleanups.push(() => jobs.close());
    const gateway = await createGateway({ config, logger, infrastructure, subagents: jobs.subagents, workflows: jobs.workflows, teams: jobs.teams, plugins: [webChannel] });
    cleanups.push(() => gateway.close());
    const { url } = await gateway.start();

    expect((await fetch(`${url}/admin/queues`)).status).toBe(401);
    const page = await fetch(`${url}/admin/queues`, { headers: { authorization: `Bearer ${TOKEN}` } });
    expect(page.status).toBe(200);
    expect(page.headers.get("content-type")).toContain("text/html");
    const listing = await fetch(`${url}/admin/queues/api/queues`, { headers: { authorization: `Bearer ${TOKEN}` } });
    expect(listing.status).toBe(200);
    const body = (await listing.json()) as { queues: Array<{ name: string }> };
    expect(body.queues.map((queue) => queue.name).sort()).toEqual(["subagents", "workflows"]);
  });
});
