/**
 * The Scheduler for gateway + worker deployments: BullMQ job schedulers on queue `cron`.
 *
 * - `every` and `cron` jobs are job schedulers (`upsertJobScheduler(job.id, …)`). BullMQ keeps one
 *   job per due time (`repeat:<id>:<due>`) and creates the next one atomically when a worker takes
 *   the current one, so any number of processes calling `add` with the same id and running `start`
 *   fire each due time once. Upserting the same id again replaces the schedule, keeping its slot.
 * - `at` jobs are plain delayed jobs with jobId = job.id (BullMQ drops a second add of that id), and
 *   are removed once fired.
 * - `every` starts one interval after `createdAt` (BullMQ alone would fire at once); `cron` uses
 *   the expression in its time zone.
 *
 * Firing is at least once: a worker that dies mid-`fire` has its job recovered by another (stalled
 * job), and a `fire` that throws is retried twice. `firedAt` is the due time, the same on every
 * retry, so a caller that derives the system message id from (job.id, firedAt) dedupes repeats.
 *
 * Job ids must not be integers nor contain ":" (BullMQ's rule for custom job ids); the cron tool's
 * ids (`cron-<hex>`) qualify.
 */
import { Queue, Worker, type Job, type JobsOptions } from "bullmq";
import type { BullmqConnection } from "../../redis/client.js";
import { errorMessage } from "../../errors.js";
import { StoredCronJobSchema, type SchedulerLogger } from "./in-process-scheduler.js";
import type { CronJob, CronSchedule, Scheduler } from "./scheduler.js";

export const CRON_QUEUE = "cron";
const JOB_NAME = "cron";

export interface BullmqSchedulerOptions {
  /**
   * Shared connection, created with `maxRetriesPerRequest: null` (connectRedis does). The worker
   * duplicates it for its blocking reads. Not closed by `close()`.
   */
  connection: BullmqConnection;
  /** BullMQ key prefix, hash-tagged so the queue's keys share a Redis Cluster slot: `{countbot}`. */
  prefix: string;
  logger?: SchedulerLogger;
  /** Firings this process runs at once. Default 4. */
  concurrency?: number;
}

const jobOptions = {
  attempts: 3,
  backoff: { type: "exponential", delay: 1_000 },
  removeOnComplete: true,
  removeOnFail: { count: 100 },
} satisfies JobsOptions;

/** States in which a job has not fired yet. */
const PENDING_STATES = ["delayed", "waiting", "prioritized", "paused"] as const;

export function createBullmqScheduler(options: BullmqSchedulerOptions): Scheduler {
  const queue = new Queue<CronJob>(CRON_QUEUE, { connection: options.connection, prefix: options.prefix });
  queue.on("error", (error) => options.logger?.warn({ queue: CRON_QUEUE, error: errorMessage(error) }, "cron queue error"));
  let worker: Worker<CronJob> | undefined;

  const pendingAtJob = (id: string) => pendingAtJobOf(queue, id);

  return {
    async add(job) {
      assertJobId(job.id);
      if (job.schedule.kind === "at") {
        await queue.removeJobScheduler(job.id);
        const existing = await pendingAtJob(job.id);
        if (existing) {
          if (JSON.stringify(existing.data) === JSON.stringify(job)) return;
          await existing.remove();
        }
        await queue.add(JOB_NAME, job, { ...jobOptions, jobId: job.id, delay: Math.max(0, job.schedule.at - Date.now()) });
        return;
      }
      const existing = await pendingAtJob(job.id);
      if (existing) await existing.remove();
      await queue.upsertJobScheduler(job.id, repeatOptions(job, job.schedule), { name: JOB_NAME, data: job, opts: jobOptions });
    },

    async remove(id) {
      const removedScheduler = await queue.removeJobScheduler(id);
      let removedJob = false;
      if (isValidJobId(id)) {
        const job = await pendingAtJob(id);
        if (job) {
          try {
            await job.remove();
            removedJob = true;
          } catch (error) {
            // It started firing in the meantime: nothing left to remove.
            options.logger?.warn({ jobId: id, error: errorMessage(error) }, "could not remove a cron job");
          }
        }
      }
      return removedScheduler || removedJob;
    },

    async list(sessionKey) {
      return (await cronJobsOn(queue)).filter((job) => sessionKey === undefined || job.sessionKey === sessionKey).sort((a, b) => a.createdAt - b.createdAt);
    },

    async start(fire) {
      if (worker) throw new Error("the cron scheduler is already started");
      worker = new Worker<CronJob>(
        CRON_QUEUE,
        async (bullJob) => {
          const job = parseJob(bullJob.data);
          if (!job) {
            options.logger?.warn({ jobId: bullJob.id }, "skipping a cron job with invalid data");
            return;
          }
          await fire(job, dueTime(bullJob, job));
        },
        { connection: options.connection, prefix: options.prefix, concurrency: options.concurrency ?? 4 },
      );
      worker.on("error", (error) => options.logger?.warn({ queue: CRON_QUEUE, error: errorMessage(error) }, "cron worker error"));
      worker.on("failed", (bullJob, error) =>
        options.logger?.warn(
          { jobId: bullJob?.id, sessionKey: bullJob?.data.sessionKey, attempt: bullJob?.attemptsMade, error: errorMessage(error) },
          "firing a cron job failed",
        ),
      );
      await worker.waitUntilReady();
    },

    async close() {
      await worker?.close();
      worker = undefined;
      await queue.close();
    },
  };
}

/** The pending one-shot (`at`) job with this id, if any. */
async function pendingAtJobOf(queue: Queue<CronJob>, id: string): Promise<Job<CronJob> | undefined> {
  const job = await queue.getJob(id);
  if (!job || job.repeatJobKey) return undefined;
  const state = await job.getState();
  if ((PENDING_STATES as readonly string[]).includes(state)) return job;
  // A failed one still holds the id, and would make a new add of it a silent no-op.
  if (state === "failed" || state === "completed") await job.remove().catch(() => undefined);
  return undefined;
}

/** Every job the queue holds, once each: the repeating ones from their schedulers, the one-shots pending. */
async function cronJobsOn(queue: Queue<CronJob>): Promise<CronJob[]> {
  const found = new Map<string, CronJob>();
  for (const scheduler of await queue.getJobSchedulers(0, -1, true)) {
    const job = parseJob(scheduler.template?.data);
    if (job) found.set(job.id, job);
  }
  for (const pending of await queue.getJobs([...PENDING_STATES])) {
    if (!pending || pending.repeatJobKey || pending.name !== JOB_NAME) continue;
    const job = parseJob(pending.data);
    if (job && job.id === pending.id) found.set(job.id, job);
  }
  return [...found.values()];
}

function repeatOptions(job: CronJob, schedule: Exclude<CronSchedule, { kind: "at" }>) {
  if (schedule.kind === "every") {
    // Derived from the job, not the clock, so every process that adds it passes the same options.
    return { every: schedule.seconds * 1000, startDate: job.createdAt + schedule.seconds * 1000 };
  }
  return { pattern: schedule.expression, tz: schedule.timezone };
}

/** The due time of this firing: encoded in a scheduler job's id (`repeat:<id>:<due>`), else the `at`. */
function dueTime(bullJob: Job<CronJob>, job: CronJob): number {
  const encoded = /:(\d+)$/.exec(bullJob.id ?? "");
  if (bullJob.repeatJobKey && encoded) return Number(encoded[1]);
  if (job.schedule.kind === "at") return job.schedule.at;
  return bullJob.timestamp + (bullJob.opts.delay ?? 0);
}

function parseJob(data: unknown): CronJob | undefined {
  const parsed = StoredCronJobSchema.safeParse(data);
  return parsed.success ? parsed.data : undefined;
}

function isValidJobId(id: string): boolean {
  return id.length > 0 && !id.includes(":") && `${Number.parseInt(id, 10)}` !== id;
}

function assertJobId(id: string): void {
  if (!isValidJobId(id)) throw new Error(`cron job id "${id}" cannot be used: it must not be empty, an integer, or contain ":"`);
}
