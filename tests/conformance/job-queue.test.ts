/**
 * Runs the JobQueue conformance suite against both runners, then the BullMQ-only guarantees that
 * need more than one process: cancel from another instance, recovery after a worker is SIGKILLed
 * (real child processes), hand-off on close.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { Redis } from "ioredis";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { CancelledError } from "../../src/errors.js";
import { createBullmqQueue } from "../../src/jobs/bullmq-queue.js";
import { createInProcessQueue } from "../../src/jobs/in-process-queue.js";
import type { Job, JobQueue, JobQueueEvents } from "../../src/jobs/job-queue.js";
import { deleteKeys, redisUrl } from "../support/redis.js";
import { type TestData, failureRecorder, runJobQueueSuite, sleep, untilAborted, waitFor } from "./job-queue.suite.js";

const LOCK_MS = 2_000;
const STALLED_MS = 1_000;
const QUEUE_NAME = "test-jobs";

let redis: Redis;

beforeAll(() => {
  redis = new Redis(redisUrl, { maxRetriesPerRequest: null });
});
afterAll(async () => {
  await redis.quit();
});

runJobQueueSuite("in-process", async (events) => {
  const queue = createInProcessQueue<TestData>({ name: QUEUE_NAME, events });
  return { queue, cleanup: () => queue.close(0) };
});

runJobQueueSuite("bullmq", async (events) => {
  const prefix = `countbot-test-${randomUUID()}`;
  const queue = createBullmqQueue<TestData>({ name: QUEUE_NAME, connection: redis, prefix, lockDurationMs: LOCK_MS, stalledIntervalMs: STALLED_MS, events });
  return {
    queue,
    cleanup: async () => {
      await queue.close(0);
      await deleteKeys(redis, prefix);
    },
  };
});

describe("JobQueue in-process runner", () => {
  it("ends a job aborted by close, and the jobs still queued, as lost", async () => {
    const { events, failures } = failureRecorder();
    const queue = createInProcessQueue<TestData>({ name: QUEUE_NAME, events });
    const started: string[] = [];
    await queue.process(
      async (job) => {
        started.push(job.id);
        await untilAborted(job.signal);
      },
      { concurrency: 1 },
    );
    await queue.add("long", { label: "running" }, { jobId: "job-running" });
    await queue.add("long", { label: "waiting" }, { jobId: "job-waiting" });
    await waitFor(() => started.length === 1, "the first job to start");
    await queue.close(50);
    expect(failures.map((record) => [record.id, record.failure.reason])).toEqual([
      ["job-waiting", "lost"],
      ["job-running", "lost"],
    ]);
    expect(started).toEqual(["job-running"]);
    await expect(queue.add("late", { label: "late" }, { jobId: "job-late" })).rejects.toThrow(/closed/);
  });
});

const projectRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const workerScript = path.join(projectRoot, "tests", "support", "job-queue-worker.ts");

interface WorkerProcess {
  pid: number;
  /** Resolves with the first stdout record that matches. */
  waitForRecord(match: (record: Record<string, unknown>) => boolean, what: string, limitMs?: number): Promise<Record<string, unknown>>;
  kill(): Promise<void>;
}

describe("JobQueue BullMQ runner across processes", () => {
  let prefix: string;
  const connections: Redis[] = [];
  const queues: Array<JobQueue<TestData>> = [];
  const children = new Set<ChildProcess>();

  function connect(): Redis {
    const connection = new Redis(redisUrl);
    connections.push(connection);
    return connection;
  }

  /** Another queue instance on its own connection: a stand-in for another process. */
  function instance(events?: JobQueueEvents<TestData>): JobQueue<TestData> {
    const queue = createBullmqQueue<TestData>({ name: QUEUE_NAME, connection: connect(), prefix, lockDurationMs: LOCK_MS, stalledIntervalMs: STALLED_MS, events });
    queues.push(queue);
    return queue;
  }

  /** A real worker process that starts jobs and never finishes them. */
  async function startWorkerProcess(): Promise<WorkerProcess> {
    const child = spawn(process.execPath, ["--import", "tsx", workerScript], {
      cwd: projectRoot,
      env: {
        ...process.env,
        REDIS_URL: redisUrl,
        JOB_QUEUE_PREFIX: prefix,
        JOB_QUEUE_NAME: QUEUE_NAME,
        JOB_QUEUE_LOCK_MS: String(LOCK_MS),
        JOB_QUEUE_STALLED_MS: String(STALLED_MS),
      },
      stdio: ["ignore", "pipe", "pipe"],
    });
    children.add(child);
    const exited = new Promise<void>((resolve) => child.on("exit", () => resolve()));
    const records: Array<Record<string, unknown>> = [];
    let output = "";
    let partial = "";
    child.stdout!.on("data", (chunk: Buffer) => {
      const text = chunk.toString("utf8");
      output += text;
      partial += text;
      const lines = partial.split("\n");
      partial = lines.pop() ?? "";
      for (const line of lines) {
        try {
          records.push(JSON.parse(line) as Record<string, unknown>);
        } catch {
          // not one of ours
        }
      }
    });
    child.stderr!.on("data", (chunk: Buffer) => (output += chunk.toString("utf8")));
    const worker: WorkerProcess = {
      pid: child.pid!,
      async waitForRecord(match, what, limitMs = 20_000) {
        try {
          return await waitFor(() => records.find(match), what, limitMs);
        } catch (error) {
          throw new Error(`${(error as Error).message}; worker ${child.pid} said:\n${output}`);
        }
      },
      async kill() {
        if (child.exitCode === null && child.signalCode === null) process.kill(child.pid!, "SIGKILL");
        await exited;
        children.delete(child);
      },
    };
    await worker.waitForRecord((record) => record.event === "ready", "the worker process to be ready");
    return worker;
  }

  beforeAll(() => {
    prefix = `countbot-test-${randomUUID()}`;
  });

  afterEach(async () => {
    for (const child of children) {
      if (child.exitCode === null && child.signalCode === null && child.pid) process.kill(child.pid, "SIGKILL");
    }
    children.clear();
    await Promise.all(queues.splice(0).map((queue) => queue.close(0)));
    await deleteKeys(redis, prefix);
    await Promise.all(connections.splice(0).map((connection) => connection.quit().catch(() => undefined)));
    prefix = `countbot-test-${randomUUID()}`;
  });

  it("cancel from another instance reaches the handler; onFailed fires where the job ran", async () => {
    const runnerEvents = failureRecorder();
    const otherEvents = failureRecorder();
    const runner = instance(runnerEvents.events);
    const other = instance(otherEvents.events);
    const running: Array<Job<TestData>> = [];
    await runner.process(
      async (job) => {
        running.push(job);
        await untilAborted(job.signal);
      },
      { concurrency: 1 },
    );
    await other.add("long", { label: "long" }, { jobId: "job-remote" });
    const job = await waitFor(() => running[0], "the job to start");
    await other.cancel("job-remote");
    const record = await waitFor(() => runnerEvents.failures[0], "onFailed in the running instance");
    expect(record.failure).toEqual({ reason: "cancelled" });
    expect(job.signal.reason).toBeInstanceOf(CancelledError);
    await sleep(200);
    expect(runnerEvents.failures).toHaveLength(1);
    expect(otherEvents.failures).toEqual([]);
  });

  it("runs a job whose worker was SIGKILLed again on another worker, with attempt 2", async () => {
    const doomed = await startWorkerProcess();
    const { events, failures } = failureRecorder();
    const survivor = instance(events);
    await survivor.add("long", { label: "survives" }, { jobId: "job-recover" });
    await doomed.waitForRecord((record) => record.event === "started" && record.attempt === 1, "the first run");
    await doomed.kill();
    const runs: Array<Job<TestData>> = [];
    await survivor.process(async (job) => void runs.push(job), { concurrency: 1 });
    const job = await waitFor(() => runs[0], "the recovered run", 15_000);
    expect(job).toMatchObject({ id: "job-recover", attempt: 2, data: { label: "survives" } });
    await sleep(STALLED_MS * 2);
    expect(runs).toHaveLength(1);
    expect(failures).toEqual([]);
  });

  it("fails a job whose worker died twice as lost, once, in a live process", async () => {
    const first = await startWorkerProcess();
    const { events, failures } = failureRecorder();
    const survivor = instance(events);
    await survivor.add("long", { label: "doomed" }, { jobId: "job-lost" });
    await first.waitForRecord((record) => record.event === "started" && record.attempt === 1, "the first run");
    await first.kill();
    const second = await startWorkerProcess();
    await second.waitForRecord((record) => record.event === "started" && record.attempt === 2, "the recovered run", 15_000);
    await second.kill();
    const runs: string[] = [];
    await survivor.process(async (job) => void runs.push(job.id), { concurrency: 1 });
    const record = await waitFor(() => failures[0], "onFailed lost", 15_000);
    expect(record).toEqual({
      id: "job-lost",
      name: "long",
      data: { label: "doomed" },
      failure: { reason: "lost", message: "job stalled more than allowable limit" },
    });
    await sleep(STALLED_MS * 2);
    expect(failures).toHaveLength(1);
    expect(runs).toEqual([]);
  });

  it("cancels a job whose worker died before it is recovered: the recovery does not run it", async () => {
    const doomed = await startWorkerProcess();
    const { events, failures } = failureRecorder();
    const survivor = instance(events);
    await survivor.add("long", { label: "orphan" }, { jobId: "job-orphan" });
    await doomed.waitForRecord((record) => record.event === "started", "the first run");
    await doomed.kill();
    await survivor.cancel("job-orphan");
    const runs: string[] = [];
    await survivor.process(async (job) => void runs.push(job.id), { concurrency: 1 });
    const record = await waitFor(() => failures[0], "onFailed cancelled", 15_000);
    expect(record.failure).toEqual({ reason: "cancelled" });
    expect(runs).toEqual([]);
  });

  it("hands a job aborted by close back to the queue; another worker runs it with attempt 2", async () => {
    const firstEvents = failureRecorder();
    const secondEvents = failureRecorder();
    const first = instance(firstEvents.events);
    const firstRuns: Array<Job<TestData>> = [];
    await first.process(
      async (job) => {
        firstRuns.push(job);
        await untilAborted(job.signal);
      },
      { concurrency: 1 },
    );
    await first.add("long", { label: "handed over" }, { jobId: "job-handoff" });
    await waitFor(() => firstRuns[0], "the first run");
    await first.close(100);
    expect(firstRuns[0]!.signal.aborted).toBe(true);
    const second = instance(secondEvents.events);
    const secondRuns: Array<Job<TestData>> = [];
    await second.process(async (job) => void secondRuns.push(job), { concurrency: 1 });
    const job = await waitFor(() => secondRuns[0], "the second run");
    expect(job).toMatchObject({ id: "job-handoff", attempt: 2, data: { label: "handed over" } });
    await sleep(200);
    expect(firstEvents.failures).toEqual([]);
    expect(secondEvents.failures).toEqual([]);
  });
});
