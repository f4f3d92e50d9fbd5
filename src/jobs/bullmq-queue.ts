/**
 * The BullMQ JobQueue: jobs live in Redis and run on whichever worker process takes them.
 *
 * - Recovery: a worker renews the lock of each job it runs. When its process dies the lock lapses,
 *   and the stalled checker of any live worker puts the job back in the queue (`maxStalledCount`
 *   = `maxRecoveries`). Past that limit BullMQ marks it to fail, and the next worker that takes it
 *   fails it without running it: onFailed `lost` fires there, once, from the Worker's `failed`
 *   event (only the worker holding a job's lock can move it to failed).
 * - Cancel: a job not started yet is removed (onFailed `cancelled` fires in the cancelling
 *   process). A running one gets a cancel mark in Redis and a message on `{prefix}:jobs:cancel`;
 *   the process running it aborts its signal. The mark stops a run that has not seen the message:
 *   one starting at the same moment, the recovery of a run whose process died, or a run whose
 *   subscriber was reconnecting (running jobs look for marks every `cancelCheckIntervalMs`).
 * - Close: running jobs get the grace period, then their signals fire; a job whose handler then
 *   rejects goes back to the queue for another worker (attempt + 1).
 */
import { Queue, WaitingError, Worker, type Job as BullJob } from "bullmq";
// BullMQ takes ioredis connections (see BullmqConnection), so this module keeps ioredis's type.
import type { BullmqConnection } from "../redis/client.js";
import type { Logger } from "pino";
import { CancelledError, errorMessage } from "../errors.js";
import type { JobCounts, JobFailure, JobHandler, JobQueue, JobQueueEvents, ProcessOptions } from "./job-queue.js";
import { finishesWithin } from "./finishes-within.js";
import { inJobSpan } from "./job-span.js";
import { currentTraceCarrier, parseCarrier, serializeCarrier } from "../tracing.js";

const DAY_MS = 24 * 60 * 60 * 1000;
/** How long close() still waits for handlers after it aborted them. */
const SETTLE_AFTER_ABORT_MS = 1_000;

export interface BullmqQueueOptions<Data> {
  /** The BullMQ queue name, e.g. `subagents`. */
  name: string;
  /**
   * Commands. Never closed here; duplicated for the worker (which needs `maxRetriesPerRequest:
   * null`) and for the cancel subscription. Must not use an ioredis `keyPrefix`.
   */
  connection: BullmqConnection;
  /** Key prefix; keys live under the hash tag `{prefix}`. */
  prefix: string;
  /** How many times a job whose process died is run again before it fails as `lost`. Default 1. */
  maxRecoveries?: number;
  /** Lock on a running job, renewed at half this; once it lapses the job counts as stalled. Default 30 s. */
  lockDurationMs?: number;
  /** How often a worker looks for stalled jobs. Default 30 s. */
  stalledIntervalMs?: number;
  /** How long finished jobs are kept and their ids refuse a second add. Default 24 h. */
  keepMs?: number;
  /** How often running jobs look for a cancel whose message they missed (subscription down). Default 5 s. */
  cancelCheckIntervalMs?: number;
  events?: JobQueueEvents<Data>;
  logger?: Logger;
}

interface Running {
  controller: AbortController;
  stop?: "cancel" | "shutdown";
}

interface CancelRequest {
  queue: string;
  jobId: string;
}

/** Job data is JSON in Redis: typed `unknown` inside, `Data` where it leaves this module. */
type QueuedJob = BullJob<unknown, void, string>;

export function createBullmqQueue<Data>(options: BullmqQueueOptions<Data>): JobQueue<Data> {
  return new BullmqQueue(options);
}

class BullmqQueue<Data> implements JobQueue<Data> {
  private readonly redis: BullmqConnection;
  private readonly hashTag: string;
  private readonly keepMs: number;
  private readonly queue: Queue<unknown, void, string>;
  private readonly running = new Map<string, Running>();
  private worker: Worker<unknown, void, string> | undefined;
  private workerConnection: BullmqConnection | undefined;
  private subscriber: BullmqConnection | undefined;
  private cancelCheck: NodeJS.Timeout | undefined;
  private closed = false;

  constructor(private readonly options: BullmqQueueOptions<Data>) {
    this.redis = options.connection;
    this.hashTag = `{${options.prefix}}`;
    this.keepMs = options.keepMs ?? DAY_MS;
    this.queue = new Queue<unknown, void, string>(options.name, { connection: this.redis, prefix: this.hashTag });
    this.queue.on("error", (error) => this.options.logger?.warn({ err: error, queue: options.name }, "job queue error"));
  }

  async add(name: string, data: Data, options: { jobId: string }): Promise<boolean> {
    this.assertOpen();
    const id = options.jobId;
    // BullMQ refuses these ids itself; say so before any key is written.
    if (id === "" || String(Number.parseInt(id, 10)) === id || id.includes(":")) {
      throw new Error(`job id must not be empty, an integer or contain ":", got "${id}"`);
    }
    // BullMQ's add returns the existing job for a known id without saying so: the guard key is
    // the atomic "first add wins" that outlives the job by keepMs.
    const first = await this.redis.set(this.key("added", id), "1", "PX", this.keepMs, "NX");
    if (first !== "OK") return false;
    try {
      if (await this.queue.getJob(id)) return false; // it outlived its guard
      await this.redis.del(this.key("cancelled", id)); // a stale mark must not cancel the new job
      const keepSeconds = Math.ceil(this.keepMs / 1000);
      // The adder's trace goes with the job (BullMQ keeps this option in Redis for exactly that).
      const metadata = serializeCarrier(currentTraceCarrier());
      const telemetry = metadata === undefined ? {} : { telemetry: { metadata } };
      await this.queue.add(name, data, { jobId: id, attempts: 1, removeOnComplete: { age: keepSeconds }, removeOnFail: { age: keepSeconds }, ...telemetry });
      return true;
    } catch (error) {
      await this.redis.del(this.key("added", id)).catch(() => undefined);
      throw error;
    }
  }

  async process(handler: JobHandler<Data>, options: ProcessOptions): Promise<void> {
    this.assertOpen();
    if (this.worker) throw new Error(`job queue ${this.options.name} is already processing`);
    if (!Number.isInteger(options.concurrency) || options.concurrency < 1) {
      throw new Error(`concurrency must be a whole number of at least 1, got ${options.concurrency}`);
    }
    const logger = this.options.logger;
    if (options.globalConcurrency !== undefined) await this.queue.setGlobalConcurrency(options.globalConcurrency);
    this.subscriber = this.redis.duplicate();
    this.subscriber.on("error", (error) => logger?.warn({ err: error, queue: this.options.name }, "cancel subscription error"));
    this.subscriber.on("message", (_channel: string, payload: string) => this.onCancelRequest(payload));
    await this.subscriber.subscribe(this.cancelChannel);
    // Pub/sub drops what is published while the subscriber reconnects; the cancel marks do not.
    this.cancelCheck = setInterval(() => void this.checkCancelMarks(), this.options.cancelCheckIntervalMs ?? 5_000);
    this.cancelCheck.unref();

    this.workerConnection = this.redis.duplicate({ maxRetriesPerRequest: null });
    const worker = new Worker<unknown, void, string>(this.options.name, (job, token) => this.run(job, token, handler), {
      connection: this.workerConnection,
      prefix: this.hashTag,
      concurrency: options.concurrency,
      maxStalledCount: this.options.maxRecoveries ?? 1,
      lockDuration: this.options.lockDurationMs ?? 30_000,
      stalledInterval: this.options.stalledIntervalMs ?? 30_000,
    });
    this.worker = worker;
    worker.on("failed", (job, error) => void this.onJobFailed(job, error));
    worker.on("stalled", (jobId) => logger?.warn({ queue: this.options.name, jobId }, "job stalled: its worker stopped renewing the lock"));
    worker.on("error", (error) => logger?.warn({ err: error, queue: this.options.name }, "job worker error"));
    await worker.waitUntilReady();
  }

  async counts(): Promise<JobCounts> {
    const counts = await this.queue.getJobCounts("waiting", "prioritized", "delayed", "active", "failed");
    return { waiting: (counts.waiting ?? 0) + (counts.prioritized ?? 0) + (counts.delayed ?? 0), active: counts.active ?? 0, failed: counts.failed ?? 0 };
  }

  async cancel(jobId: string): Promise<void> {
    const local = this.running.get(jobId);
    if (local) this.stop(local, "cancel", jobId);
    const state = await this.queue.getJobState(jobId);
    if (state === "unknown" || state === "completed" || state === "failed") return;
    if (state !== "active") {
      const job = await this.queue.getJob(jobId);
      // remove refuses a job some worker has locked meanwhile: that one is cancelled as running.
      if (job && (await this.queue.remove(jobId)) === 1) {
        await this.notify(job, { reason: "cancelled" });
        return;
      }
    }
    // Mark first, then tell: a run that starts after the mark sees it, one already running hears it.
    await this.redis.set(this.key("cancelled", jobId), "1", "PX", this.keepMs);
    await this.redis.publish(this.cancelChannel, JSON.stringify({ queue: this.options.name, jobId } satisfies CancelRequest));
  }

  async close(graceMs = 10_000): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    const worker = this.worker;
    if (worker) {
      const closing = worker.close().catch((error: unknown) => this.options.logger?.warn({ err: error, queue: this.options.name }, "job worker close failed"));
      if (!(await finishesWithin(closing, graceMs))) {
        for (const [jobId, running] of this.running) this.stop(running, "shutdown", jobId);
        // A handler that ignores its signal keeps its job: the lock lapses and another worker recovers it.
        await finishesWithin(closing, SETTLE_AFTER_ABORT_MS);
      }
    }
    clearInterval(this.cancelCheck);
    this.subscriber?.disconnect();
    await this.queue.close().catch(() => undefined);
    this.workerConnection?.disconnect();
  }

  /** The BullMQ processor: runs the handler and turns a cancel or a shutdown into the job's end. */
  private async run(job: QueuedJob, token: string | undefined, handler: JobHandler<Data>): Promise<void> {
    const id = job.id!;
    const running: Running = { controller: new AbortController() };
    this.running.set(id, running);
    try {
      if ((await this.redis.exists(this.key("cancelled", id))) === 1) this.stop(running, "cancel", id);
      let threw = false;
      let failure: unknown;
      if (!running.stop) {
        try {
          const run = { id, name: job.name, data: job.data as Data, attempt: Math.max(1, job.attemptsStarted), signal: running.controller.signal };
          await inJobSpan(this.options.name, run, parseCarrier(job.opts.telemetry?.metadata), () => handler(run));
        } catch (error) {
          threw = true;
          failure = error;
        }
      }
      // A cancelled job counts as cancelled however its handler ended.
      if (running.stop === "cancel") throw new CancelledError(`job ${id} was cancelled`);
      if (!threw) return;
      if (running.stop === "shutdown") {
        await job.moveToWait(token);
        throw new WaitingError();
      }
      // A fresh Error, so a handler error that happens to carry one of BullMQ's control names
      // (DelayedError, RateLimitError, ...) cannot steer the worker.
      const error = new Error(errorMessage(failure), { cause: failure });
      if (failure instanceof Error && failure.stack) error.stack = failure.stack;
      throw error;
    } finally {
      this.running.delete(id);
    }
  }

  private onCancelRequest(payload: string): void {
    let request: CancelRequest;
    try {
      request = JSON.parse(payload) as CancelRequest;
    } catch {
      return;
    }
    if (request.queue !== this.options.name) return;
    const running = this.running.get(request.jobId);
    if (running) this.stop(running, "cancel", request.jobId);
  }

  private async checkCancelMarks(): Promise<void> {
    const ids = [...this.running.keys()];
    if (ids.length === 0) return;
    try {
      const marks = await this.redis.mget(ids.map((id) => this.key("cancelled", id)));
      ids.forEach((id, index) => {
        const running = this.running.get(id);
        if (running && marks[index] !== null) this.stop(running, "cancel", id);
      });
    } catch (error) {
      this.options.logger?.warn({ err: error, queue: this.options.name }, "could not check for cancelled jobs");
    }
  }

  private stop(running: Running, why: "cancel" | "shutdown", jobId: string): void {
    if (running.stop) return;
    running.stop = why;
    running.controller.abort(new CancelledError(why === "cancel" ? `job ${jobId} was cancelled` : "the job queue is shutting down"));
  }

  /** The Worker's `failed` event: it fires only in the process whose worker moved the job to failed. */
  private async onJobFailed(job: QueuedJob | undefined, error: Error): Promise<void> {
    if (!job?.id) return;
    let failure: JobFailure;
    if (error instanceof CancelledError) {
      failure = { reason: "cancelled" };
      void this.redis.del(this.key("cancelled", job.id)).catch(() => undefined);
    } else if (job.deferredFailure && error.message === job.deferredFailure) {
      // Set by the stalled checker: "job stalled more than allowable limit".
      failure = { reason: "lost", message: error.message };
    } else {
      failure = { reason: "error", message: error.message };
    }
    await this.notify(job, failure);
  }

  private async notify(job: QueuedJob, failure: JobFailure): Promise<void> {
    const logger = this.options.logger;
    logger?.info({ queue: this.options.name, jobId: job.id, failure: failure.reason }, "job failed");
    try {
      await this.options.events?.onFailed?.({ id: job.id!, name: job.name, data: job.data as Data }, failure);
    } catch (error) {
      logger?.error({ err: error, queue: this.options.name, jobId: job.id }, "onFailed listener threw");
    }
  }

  private get cancelChannel(): string {
    return `${this.hashTag}:jobs:cancel`;
  }

  private key(kind: "added" | "cancelled", jobId: string): string {
    return `${this.hashTag}:jobs:${this.options.name}:${kind}:${jobId}`;
  }

  private assertOpen(): void {
    if (this.closed) throw new Error(`job queue ${this.options.name} is closed`);
  }
}
