/**
 * The in-process JobQueue for the embedded mode (no Redis): a FIFO in memory, run `concurrency` at
 * a time. Nothing outlives the process, so there is nothing to recover: a job still queued or
 * running when the queue closes ends with `lost`.
 */
import type { Logger } from "pino";
import { CancelledError, errorMessage } from "../errors.js";
import type { Job, JobCounts, JobFailure, JobHandler, JobQueue, JobQueueEvents, ProcessOptions } from "./job-queue.js";
import { finishesWithin } from "./finishes-within.js";
import { inJobSpan } from "./job-span.js";
import { type TraceCarrier, currentTraceCarrier } from "../tracing.js";

const DAY_MS = 24 * 60 * 60 * 1000;
/** How long close() still waits for handlers after it aborted them. */
const SETTLE_AFTER_ABORT_MS = 1_000;

export interface InProcessQueueOptions<Data> {
  /** The queue's name, for logs. */
  name: string;
  events?: JobQueueEvents<Data>;
  /** How long the id of a finished job still refuses a second add. Default 24 h. */
  keepMs?: number;
  now?: () => number;
  logger?: Logger;
}

interface Entry<Data> {
  id: string;
  name: string;
  data: Data;
  /** The trace of whoever queued it. */
  trace?: TraceCarrier;
}

interface Running<Data> {
  entry: Entry<Data>;
  controller: AbortController;
  stop?: "cancel" | "shutdown";
  done: Promise<void>;
}

export function createInProcessQueue<Data>(options: InProcessQueueOptions<Data>): JobQueue<Data> {
  return new InProcessQueue(options);
}

class InProcessQueue<Data> implements JobQueue<Data> {
  private readonly queued: Array<Entry<Data>> = [];
  private readonly running = new Map<string, Running<Data>>();
  /** Ids of finished jobs and when they finished, so a late duplicate add is still refused. */
  private readonly finished = new Map<string, number>();
  private readonly keepMs: number;
  private readonly now: () => number;
  private handler: JobHandler<Data> | undefined;
  private concurrency = 1;
  private closed = false;

  constructor(private readonly options: InProcessQueueOptions<Data>) {
    this.keepMs = options.keepMs ?? DAY_MS;
    this.now = options.now ?? Date.now;
  }

  async add(name: string, data: Data, options: { jobId: string }): Promise<boolean> {
    if (this.closed) throw new Error(`job queue ${this.options.name} is closed`);
    const id = options.jobId;
    // The same rule as the BullMQ runner, so an id that works embedded also works over Redis.
    if (id === "" || String(Number.parseInt(id, 10)) === id || id.includes(":")) throw new Error(`job id must not be empty, an integer or contain ":", got "${id}"`);
    this.forgetOldJobs();
    if (this.finished.has(id) || this.running.has(id) || this.queued.some((entry) => entry.id === id)) return false;
    // A copy, as a Redis queue would store it: later changes by the caller do not reach the job.
    const trace = currentTraceCarrier();
    this.queued.push({ id, name, data: structuredClone(data), ...(trace ? { trace } : {}) });
    this.pump();
    return true;
  }

  async process(handler: JobHandler<Data>, options: ProcessOptions): Promise<void> {
    if (this.closed) throw new Error(`job queue ${this.options.name} is closed`);
    if (this.handler) throw new Error(`job queue ${this.options.name} is already processing`);
    if (!Number.isInteger(options.concurrency) || options.concurrency < 1) {
      throw new Error(`concurrency must be a whole number of at least 1, got ${options.concurrency}`);
    }
    this.handler = handler;
    // One process is the whole deployment: the global limit is a local one.
    this.concurrency = Math.min(options.concurrency, options.globalConcurrency ?? Number.POSITIVE_INFINITY);
    this.pump();
  }

  async counts(): Promise<JobCounts> {
    return { waiting: this.queued.length, active: this.running.size, failed: 0 };
  }

  async cancel(jobId: string): Promise<void> {
    const index = this.queued.findIndex((entry) => entry.id === jobId);
    if (index >= 0) {
      const [entry] = this.queued.splice(index, 1);
      this.finished.set(jobId, this.now());
      await this.notify(entry!, { reason: "cancelled" });
      return;
    }
    const running = this.running.get(jobId);
    if (running && !running.stop) {
      running.stop = "cancel";
      running.controller.abort(new CancelledError(`job ${jobId} was cancelled`));
    }
  }

  async close(graceMs = 10_000): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    const dropped = this.queued.splice(0);
    for (const entry of dropped) {
      this.finished.set(entry.id, this.now());
      await this.notify(entry, { reason: "lost", message: "the job queue shut down before the job started" });
    }
    const settled = () => Promise.all([...this.running.values()].map((running) => running.done));
    if (await finishesWithin(settled(), graceMs)) return;
    for (const running of this.running.values()) {
      if (running.stop) continue;
      running.stop = "shutdown";
      running.controller.abort(new CancelledError("the job queue is shutting down"));
    }
    await finishesWithin(settled(), SETTLE_AFTER_ABORT_MS);
  }

  private pump(): void {
    const handler = this.handler;
    if (!handler) return;
    while (!this.closed && this.running.size < this.concurrency && this.queued.length > 0) {
      this.start(this.queued.shift()!, handler);
    }
  }

  private start(entry: Entry<Data>, handler: JobHandler<Data>): void {
    const controller = new AbortController();
    const running: Running<Data> = { entry, controller, done: Promise.resolve() };
    this.running.set(entry.id, running);
    const job: Job<Data> = { id: entry.id, name: entry.name, data: entry.data, attempt: 1, signal: controller.signal };
    running.done = (async () => {
      let failure: JobFailure | undefined;
      try {
        await inJobSpan(this.options.name, job, entry.trace, () => handler(job));
      } catch (error) {
        if (!running.stop) failure = { reason: "error", message: errorMessage(error) };
        else if (running.stop === "shutdown") failure = { reason: "lost", message: "the job queue shut down before the job finished" };
      }
      // A cancelled job counts as cancelled however its handler ended.
      if (running.stop === "cancel") failure = { reason: "cancelled" };
      this.running.delete(entry.id);
      this.finished.set(entry.id, this.now());
      if (failure) await this.notify(entry, failure);
      this.pump();
    })();
  }

  private async notify(entry: Entry<Data>, failure: JobFailure): Promise<void> {
    try {
      await this.options.events?.onFailed?.({ id: entry.id, name: entry.name, data: entry.data }, failure);
    } catch (error) {
      this.options.logger?.error({ err: error, queue: this.options.name, jobId: entry.id }, "onFailed listener threw");
    }
  }

  private forgetOldJobs(): void {
    const cutoff = this.now() - this.keepMs;
    for (const [id, finishedAt] of this.finished) {
      if (finishedAt >= cutoff) break; // insertion order is finish order
      this.finished.delete(id);
    }
  }
}
