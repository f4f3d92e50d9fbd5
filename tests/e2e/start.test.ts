/**
 * `countbot start` as one process (in-memory bus, file store): the HTTP API answers, a message
 * posted to the web channel is answered on its WebSocket, SIGTERM shuts it down cleanly.
 * `gateway` and `worker` refuse to run without Redis and say what to set.
 */
import { randomUUID } from "node:crypto";
import { mkdtemp, readFile, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import WebSocket from "ws";
import { type FakeOpenAIServer, startFakeOpenAI } from "../support/fake-openai-server.js";
import { startService, stopAllServices } from "../support/processes.js";
import { deleteKeys, redisUrl } from "../support/redis.js";
import { runCli } from "../support/run-cli.js";

let root: string;
let llm: FakeOpenAIServer;

beforeAll(async () => {
  root = await mkdtemp(path.join(tmpdir(), "countbot-start-"));
  llm = await startFakeOpenAI({ script: () => ({ text: ["Hello ", "from the fake model."] }) });
});
afterAll(async () => {
  await stopAllServices();
  await llm.close();
  await rm(root, { recursive: true, force: true });
});

async function waitFor(condition: () => boolean): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error("timed out");
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

describe("countbot start", () => {
  const modes = [
    { name: "in-memory bus and file store", bus: "memory", env: {} as Record<string, string> },
    { name: "Redis when REDIS_URL is set", bus: "redis", env: { REDIS_URL: redisUrl } as Record<string, string> },
  ];
  for (const mode of modes) {
    it(`serves the API and answers a web message, then shuts down on SIGTERM (${mode.name})`, async () => {
      const prefix = `countbot-start-${randomUUID()}`;
      const configFile = path.join(root, `${prefix}.json`);
      await writeFile(configFile, JSON.stringify({ redis: { prefix } }));
      const service = startService(["start"], {
        HOME: root,
        COUNTBOT_CONFIG: configFile,
        COUNTBOT_DATA_DIR: path.join(root, `data-${mode.bus}`),
        COUNTBOT_API_PORT: "0",
        OPENAI_API_KEY: "sk-start-0123456789",
        OPENAI_BASE_URL: llm.url,
        LOG_LEVEL: "info",
        ...mode.env,
      });
      try {
        const started = await service.waitForLog(/countbot started/);
        expect(started.bus).toBe(mode.bus);
        const base = String(started.url);
        expect((await fetch(`${base}/health`)).status).toBe(200);
        expect((await fetch(`${base}/ready`)).status).toBe(200);

        // No token configured: one was made, 0600, and the API wants it even on loopback.
        const tokenFile = path.join(root, `data-${mode.bus}`, "api-token");
        const token = (await readFile(tokenFile, "utf8")).trim();
        expect((await stat(tokenFile)).mode & 0o777).toBe(0o600);
        expect((await fetch(`${base}/api/chat/visitor-1/messages`, { method: "POST", headers: { "content-type": "application/json" }, body: "{}" })).status).toBe(401);
        await waitFor(() => service.output().includes(`${base}/login?token=`));
        expect(service.output()).not.toMatch(new RegExp(`"[^"]*":"[^"]*${token}`)); // never inside a log record
        // The browser's way in: the login URL sets an HttpOnly, SameSite=Strict cookie.
        const login = await fetch(`${base}/login?token=${encodeURIComponent(token)}`, { redirect: "manual" });
        expect(login.status).toBe(303);
        const cookie = login.headers.get("set-cookie") ?? "";
        expect(cookie).toMatch(/^countbot_token=[^;]+; HttpOnly; SameSite=Strict; Path=\//);
        expect((await fetch(`${base}/login?token=wrong`, { redirect: "manual" })).status).toBe(401);

        const socket = new WebSocket(`${base.replace("http", "ws")}/ws?chatId=visitor-1`, { headers: { cookie: cookie.split(";")[0]!, origin: base } });
        const final = new Promise<{ content: string; answers: string[] }>((resolve) =>
          socket.on("message", (data) => {
            const event = JSON.parse(String(data)) as { type: string; content: string; answers: string[] };
            if (event.type === "message") resolve(event);
          }),
        );
        await new Promise((resolve) => socket.once("open", resolve));
        const response = await fetch(`${base}/api/chat/visitor-1/messages`, {
          method: "POST",
          headers: { "content-type": "application/json", authorization: `Bearer ${token}` },
          body: JSON.stringify({ content: "hi there" }),
        });
        expect(response.status).toBe(202);
        const { id } = (await response.json()) as { id: string };
        expect(await final).toMatchObject({ content: "Hello from the fake model.", answers: [id] });
        socket.close();
        expect(await service.stop("SIGTERM")).toBe(0);
      } finally {
        if (mode.bus === "redis") {
          const redis = new Redis(redisUrl);
          await deleteKeys(redis, prefix);
          await redis.quit();
        }
      }
    });
  }
});

describe("gateway and worker without Redis", () => {
  for (const command of ["gateway", "worker"]) {
    it(`\`countbot ${command}\` says to set REDIS_URL`, async () => {
      const run = await runCli([command], { env: { HOME: root, COUNTBOT_DATA_DIR: path.join(root, "data"), OPENAI_API_KEY: "sk-x" } });
      expect(run.code).toBe(2);
      expect(run.stderr).toContain("REDIS_URL");
      expect(run.stderr.trim().split("\n")).toHaveLength(1);
    });
  }
});
