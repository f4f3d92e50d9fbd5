/**
 * A worker process for the BullMQ job-queue tests, run with `node --import tsx`. It starts every
 * job it takes, prints `{"event":"started","id":...,"attempt":...}` on stdout and never finishes
 * one, so the test can SIGKILL it in the middle of a job.
 *
 * Environment: REDIS_URL, JOB_QUEUE_PREFIX, JOB_QUEUE_NAME, JOB_QUEUE_LOCK_MS, JOB_QUEUE_STALLED_MS.
 */
import { Redis } from "ioredis";
import { createBullmqQueue } from "../../src/jobs/bullmq-queue.js";

function required(name: string): string {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set`);
  return value;
}

function say(record: Record<string, unknown>): void {
  process.stdout.write(`${JSON.stringify(record)}\n`);
}

const connection = new Redis(process.env.REDIS_URL ?? "redis://127.0.0.1:6379");
const queue = createBullmqQueue<unknown>({
  name: required("JOB_QUEUE_NAME"),
  connection,
  prefix: required("JOB_QUEUE_PREFIX"),
  lockDurationMs: Number(required("JOB_QUEUE_LOCK_MS")),
  stalledIntervalMs: Number(required("JOB_QUEUE_STALLED_MS")),
});
await queue.process(
  async (job) => {
    say({ event: "started", id: job.id, attempt: job.attempt });
    await new Promise<never>(() => undefined);
  },
  { concurrency: 1 },
);
say({ event: "ready" });
