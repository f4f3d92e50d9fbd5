/**
 * Agent teams: RUNS runs started at once of a 4-node graph (three analysts side by side, then an
 * integrator that needs all three) against a model that takes 1 s per call. The ideal wall time is
 * the critical path, 2 s, when nothing caps concurrency; the figure is wall time over that.
 *
 * Two rows from one run, the engine as workers run it (each node a job, run and node state in the
 * store, every change a compare-and-set, the ReAct loop per node):
 *   embedded   the in-process queue and the file store (`countbot start` without Redis)
 *   redis      the BullMQ queue and the Redis store, one worker process
 * Queue concurrency is set above 3 × RUNS, so only CountBot's own overhead stands between the
 * runs and the ideal.
 */
import { randomUUID } from "node:crypto";
import { mkdtemp, realpath, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { Redis } from "ioredis";
import { TeamDefinitionSchema } from "../src/config/team.js";
import { createBullmqQueue } from "../src/jobs/bullmq-queue.js";
import { createInProcessQueue } from "../src/jobs/in-process-queue.js";
import type { JobQueue, JobQueueEvents } from "../src/jobs/job-queue.js";
import { type WorkflowEngine, type WorkflowJobData, WORKFLOW_QUEUE, createWorkflowEngine } from "../src/jobs/workflows/engine.js";
import { createTeamAgentRunner } from "../src/jobs/workflows/runner.js";
import type { ChatModel } from "../src/providers/chat-model.js";
import { connectRedis } from "../src/redis/client.js";
import { sleep } from "../src/sleep.js";
import { createFileRunStore } from "../src/store/file-workflow-runs.js";
import { createRedisRunStore } from "../src/store/redis-workflow-runs.js";
import type { WorkflowRunStore } from "../src/store/store.js";
import type { TeamRecord, WorkflowRun } from "../src/store/team-record.js";
import { ToolRegistry } from "../src/tools/registry.js";
import { deleteKeys, redisUrl } from "../tests/support/redis.js";

const RUNS = Number(process.env.BENCH_TEAM_RUNS ?? 100);
const MODEL_MS = 1_000;
const IDEAL_MS = 2 * MODEL_MS;

const team: TeamRecord = {
  id: "bench-team",
  createdAt: 0,
  updatedAt: 0,
  ...TeamDefinitionSchema.parse({
    name: "Bench Analysis",
    mode: "graph",
    agents: [
      { id: "frontend", role: "Frontend analyst", task: "front end" },
      { id: "backend", role: "Backend analyst", task: "back end" },
      { id: "database", role: "Database expert", task: "database" },
      { id: "integrator", role: "Architect", task: "combine", dependsOn: ["frontend", "backend", "database"] },
    ],
  }),
};

/** A model that answers after MODEL_MS, counting the calls in flight. */
function slowModel(stats: { active: number; peak: number; calls: number }): ChatModel {
  return {
    id: "bench/slow",
    async *stream(request) {
      stats.calls += 1;
      stats.active += 1;
      stats.peak = Math.max(stats.peak, stats.active);
      try {
        await sleep(MODEL_MS, request.signal);
        yield { type: "text-delta", text: "findings" };
        yield { type: "finish", reason: "stop", usage: { inputTokens: 1, outputTokens: 1 }, model: "bench/slow" };
      } finally {
        stats.active -= 1;
      }
    },
  };
}

interface Row {
  wallMs: number;
  peak: number;
  calls: number;
  completed: number;
}

async function measure(workspace: string, runs: WorkflowRunStore, makeQueue: (events: JobQueueEvents<WorkflowJobData>) => JobQueue<WorkflowJobData>): Promise<Row> {
  const stats = { active: 0, peak: 0, calls: 0 };
  const ended = new Map<string, () => void>();
  const done = new Set<string>();
  const events: JobQueueEvents<WorkflowJobData> = { onFailed: (job, failure) => engine.handleFailed(job, failure) };
  const queue = makeQueue(events);
  const engine: WorkflowEngine = createWorkflowEngine({
    runs,
    queue,
    runAgent: createTeamAgentRunner({ resolveModel: () => slowModel(stats), tools: new ToolRegistry(), workspace, retryDelayMs: 0, defaults: {} }),
    publishSystem: async () => undefined,
    notify: (notice) => {
      if (notice.type === "run-completed" || notice.type === "run-failed" || notice.type === "run-cancelled") {
        done.add(notice.run.id);
        ended.get(notice.run.id)?.();
      }
    },
    limits: { perRun: 8, perSession: 3 },
    promptContext: () => ({ workspace, toolNames: [] }),
  });
  await engine.process({ concurrency: RUNS * 3 + 10 });
  try {
    const started = performance.now();
    const created: WorkflowRun[] = await Promise.all(Array.from({ length: RUNS }, (_unused, index) => engine.start({ team, goal: `review system ${index}`, sessionKey: `bench:${index}` })));
    await Promise.all(created.map((run) => (done.has(run.id) ? undefined : new Promise<void>((resolve) => ended.set(run.id, resolve)))));
    const wallMs = performance.now() - started;
    const finished = await Promise.all(created.map((run) => runs.get(run.id)));
    return { wallMs, peak: stats.peak, calls: stats.calls, completed: finished.filter((run) => run?.status === "completed").length };
  } finally {
    await engine.close(1_000);
  }
}

async function embedded(): Promise<Row> {
  const root = await realpath(await mkdtemp(path.join(tmpdir(), "countbot-bench-teams-")));
  const runs = createFileRunStore({ directory: path.join(root, "workflow-runs") });
  try {
    return await measure(root, runs, (events) => createInProcessQueue({ name: WORKFLOW_QUEUE, events }));
  } finally {
    await runs.close();
    await rm(root, { recursive: true, force: true });
  }
}

async function overRedis(): Promise<Row> {
  const prefix = `countbot-bench-teams-${randomUUID()}`;
  const redis = connectRedis(redisUrl, { name: "bench-teams" });
  const cleaner = new Redis(redisUrl);
  const root = await realpath(await mkdtemp(path.join(tmpdir(), "countbot-bench-teams-")));
  const runs = createRedisRunStore({ redis, prefix });
  try {
    return await measure(root, runs, (events) => createBullmqQueue({ name: WORKFLOW_QUEUE, connection: redis, prefix, events }));
  } finally {
    await runs.close();
    await deleteKeys(cleaner, prefix);
    await cleaner.quit();
    await redis.quit();
    await rm(root, { recursive: true, force: true });
  }
}

function print(name: string, row: Row): void {
  const ratio = row.wallMs / IDEAL_MS;
  console.log(
    `${name.padEnd(9)} ${RUNS} runs × 4 nodes: ${row.completed}/${RUNS} completed, ${row.calls} model calls, peak ${row.peak} at once; wall ${(row.wallMs / 1000).toFixed(2)} s, ideal ${(IDEAL_MS / 1000).toFixed(2)} s, ratio ${ratio.toFixed(2)}`,
  );
}

export async function benchTeams(): Promise<void> {
  console.log(`\nAgent teams: ${RUNS} runs at once of a 3+1 graph, model ${MODEL_MS} ms per call (wall time / critical path)`);
  print("embedded", await embedded());
  print("redis", await overRedis());
}
