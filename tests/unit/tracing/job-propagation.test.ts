/**
 * A job runs in the trace of whoever queued it: over BullMQ the context travels in the job's
 * `telemetry.metadata` (stored in Redis; the runner is a second queue instance on its own
 * connection, a stand-in for a worker process), in process in the queued entry. The run is a
 * `process <queue>` span under the adder's span, active for the handler.
 */
import { randomUUID } from "node:crypto";
import { Redis } from "ioredis";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { createBullmqQueue } from "../../../src/jobs/bullmq-queue.js";
import { createInProcessQueue } from "../../../src/jobs/in-process-queue.js";
import type { JobQueue } from "../../../src/jobs/job-queue.js";
import { activeTraceFields, inSpan } from "../../../src/tracing.js";
import { deleteKeys, redisUrl } from "../../support/redis.js";
import { installTestTracing } from "../../support/tracing.js";

interface Data {
  n: number;
}

const redisConnections: Redis[] = [];
const prefixes: string[] = [];
let redis: Redis;
beforeAll(() => {
  redis = new Redis(redisUrl, { maxRetriesPerRequest: null });
});
afterAll(async () => {
  for (const prefix of prefixes) await deleteKeys(redis, prefix);
  await Promise.all(redisConnections.map((connection) => connection.quit()));
  await redis.quit();
});

const queues: Record<string, () => { adder: JobQueue<Data>; runner: JobQueue<Data> }> = {
  "in-process": () => {
    const queue = createInProcessQueue<Data>({ name: "traced" });
    return { adder: queue, runner: queue };
  },
  bullmq: () => {
    const prefix = `countbot-test-${randomUUID()}`;
    prefixes.push(prefix);
    const runnerConnection = new Redis(redisUrl, { maxRetriesPerRequest: null });
    redisConnections.push(runnerConnection);
    return { adder: createBullmqQueue<Data>({ name: "traced", connection: redis, prefix }), runner: createBullmqQueue<Data>({ name: "traced", connection: runnerConnection, prefix }) };
  },
};

for (const [kind, make] of Object.entries(queues)) {
  describe(`trace context through the ${kind} job queue`, () => {
    const open: Array<JobQueue<Data>> = [];
    afterEach(async () => {
      await Promise.all(open.splice(0).map((queue) => queue.close(0)));
    });

    it("runs the job in a span under the span that queued it", async () => {
      const tracing = installTestTracing();
      try {
        const { adder, runner } = make();
        open.push(adder, runner);
        let resolveRun!: (fields: ReturnType<typeof activeTraceFields>) => void;
        const ran = new Promise<ReturnType<typeof activeTraceFields>>((resolve) => (resolveRun = resolve));
        await runner.process(async () => resolveRun(activeTraceFields()), { concurrency: 1 });
        await inSpan("spawn", {}, () => adder.add("work", { n: 1 }, { jobId: `job-${randomUUID()}` }));
        const fields = await ran;
        const spawn = tracing.named("spawn")[0]!.spanContext();
        expect(fields.trace_id).toBe(spawn.traceId);
        const processed = await tracing.ended("process traced");
        expect(processed.spanContext().spanId).toBe(fields.span_id);
        expect(processed.parentSpanContext?.spanId).toBe(spawn.spanId);
        expect(processed.attributes).toMatchObject({ "messaging.destination.name": "traced", "countbot.job.name": "work", "countbot.job.attempt": 1 });
      } finally {
        await tracing.uninstall();
      }
    });
  });
}
