/**
 * `/metrics` after a few turns: the web chat on the shared runtime, a worker with a scripted model
 * and one tool call, all in one process; the counters move and the text parses as Prometheus reads it.
 */
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import pino from "pino";
import { afterEach, describe, expect, it } from "vitest";
import { webChannel } from "../../../channels/web/plugin.js";
import { type Worker, createWorker } from "../../../src/app/worker.js";
import { type Gateway, createGateway } from "../../../src/app/gateway.js";
import { type Infrastructure, createInfrastructure } from "../../../src/app/infrastructure.js";
import { createPrometheusMetrics } from "../../../src/app/metrics.js";
import { loadConfig } from "../../../src/config/load.js";
import { scriptedModel } from "../../support/scripted-model.js";

const TOKEN = "metrics-test-token-0123456789";
const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** `name{labels} value` lines, as a map from `name{labels}` to the value. */
function parse(text: string): Map<string, number> {
  const samples = new Map<string, number>();
  for (const line of text.split("\n")) {
    if (line === "" || line.startsWith("#")) continue;
    const match = /^([a-zA-Z_:][\w:]*(?:\{[^}]*\})?) (\S+)$/.exec(line);
    if (!match) throw new Error(`not a Prometheus sample line: ${line}`);
    // Without the role label every sample of this process carries.
    samples.set(match[1]!.replace(/role="start",?/, "").replace(",}", "}").replace("{}", ""), Number(match[2]));
  }
  return samples;
}

describe("/metrics", () => {
  it("counts messages in and out, turns, model calls and tool calls, and reports the bus", async () => {
    const root = await mkdtemp(path.join(tmpdir(), "countbot-metrics-"));
    cleanups.push(() => rm(root, { recursive: true, force: true }));
    const file = path.join(root, "countbot.json");
    await writeFile(file, JSON.stringify({ api: { port: 0, token: TOKEN }, tools: { exec: { enabled: false } } }));
    const config = loadConfig({ env: { COUNTBOT_DATA_DIR: path.join(root, "data") }, cwd: root, file, channels: [webChannel] });
    const logger = pino({ level: "silent" });
    const infrastructure: Infrastructure = await createInfrastructure(config, logger);
    cleanups.push(() => infrastructure.close());
    const metrics = createPrometheusMetrics({ role: "start" });
    const model = scriptedModel([{ toolCalls: [{ name: "list_dir", arguments: {} }] }, { text: "Here is what I found." }, { text: "Hello again." }]);
    const worker: Worker = await createWorker(config, logger, infrastructure, { model, metrics });
    cleanups.push(() => worker.close());
    const gateway: Gateway = await createGateway({ config, logger, infrastructure, subagents: worker.jobs.subagents, workflows: worker.jobs.workflows, teams: worker.jobs.teams, metrics, plugins: [webChannel] });
    cleanups.push(() => gateway.close());
    metrics.watch({ queues: () => worker.jobs.queueCounts() });
    const { url } = await gateway.start();
    void worker.run();

    const headers = { authorization: `Bearer ${TOKEN}`, "content-type": "application/json" };
    for (const content of ["look around", "hello"]) {
      const response = await fetch(`${url}/api/chat/room/messages`, { method: "POST", headers, body: JSON.stringify({ content }) });
      expect(response.status).toBe(202);
      // One at a time: each message its own turn.
      const deadline = Date.now() + 10_000;
      while ((await infrastructure.bus.stats()).ready + (await infrastructure.bus.stats()).leased > 0 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 10));
    }
    let samples = new Map<string, number>();
    const deadline = Date.now() + 10_000;
    while (Date.now() < deadline) {
      samples = parse(await (await fetch(`${url}/metrics`, { headers })).text());
      if ((samples.get('countbot_messages_out_total{channel="web",account="default",kind="final"}') ?? 0) >= 2) break;
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    expect(samples.get('countbot_messages_in_total{channel="web",account="default",outcome="published"}')).toBe(2);
    expect(samples.get('countbot_messages_out_total{channel="web",account="default",kind="final"}')).toBe(2);
    expect(samples.get('countbot_messages_out_total{channel="web",account="default",kind="notice"}')).toBe(1);
    expect(samples.get('countbot_turn_duration_seconds_count{outcome="answered",profile="default"}')).toBe(2);
    expect(samples.get('countbot_model_call_duration_seconds_count{model="scripted/model",outcome="ok"}')).toBe(3);
    expect(samples.get('countbot_tool_calls_total{tool="list_dir",outcome="ok"}')).toBe(1);
    expect(samples.get('countbot_bus_sessions{state="ready"}')).toBe(0);
    expect(samples.get("countbot_dead_letters")).toBe(0);
    expect(samples.get('countbot_leader{name="web"}')).toBe(1);
    expect(samples.get('countbot_jobs{queue="subagents",state="waiting"}')).toBe(0);
    expect(samples.get('countbot_jobs{queue="workflows",state="active"}')).toBe(0);
    // Node's own metrics under the names dashboards expect; only CountBot's are prefixed.
    expect([...samples.keys()].some((key) => key.startsWith("process_resident_memory_bytes"))).toBe(true);
    expect([...samples.keys()].some((key) => key.startsWith("nodejs_eventloop_lag_p99_seconds"))).toBe(true);
    expect([...samples.keys()].filter((key) => /^countbot_(process|nodejs)_/.test(key))).toEqual([]);

    // Behind the token like the rest of the API.
    expect((await fetch(`${url}/metrics`)).status).toBe(401);
  });
});

describe("config/grafana-dashboard.json", () => {
  it("asks only for metrics CountBot exports", async () => {
    const dashboard = JSON.parse(await readFile(new URL("../../../config/grafana-dashboard.json", import.meta.url), "utf8")) as {
      panels: Array<{ title: string; targets: Array<{ expr: string }> }>;
    };
    const metrics = createPrometheusMetrics({ role: "test" });
    const exported = new Set((await metrics.registry.getMetricsAsJSON()).map((metric) => metric.name));
    const used = dashboard.panels.flatMap((panel) => panel.targets.flatMap((target) => [...target.expr.matchAll(/\b(?:countbot|process|nodejs)_[a-z0-9_]+/g)].map((match) => match[0])));
    expect(used.length).toBeGreaterThan(10);
    expect(used).toContain("process_resident_memory_bytes");
    for (const name of used) {
      // A histogram's series are its name plus _bucket, _sum, _count.
      const base = name.replace(/_(bucket|sum|count)$/, "");
      expect(exported.has(name) || exported.has(base), `${name} is exported`).toBe(true);
    }
  });
});
