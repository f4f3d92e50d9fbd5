/**
 * The JobQueue contract: background work that outlives a chat turn. Two runners implement it:
 * in-process (embedded mode) and BullMQ (Redis). One conformance suite checks both.
 *
 * Guarantees: a job added with a jobId that already exists is not added twice; a job runs at most
 * `concurrency` at a time per process; a job whose process died is run again at most
 * `maxRecoveries` times, then fails with a reason; `cancel` reaches the running handler wherever
 * it runs (its AbortSignal fires) and stops a job that has not started yet.
 */

export interface Job<Data> {
  id: string;
  name: string;
  data: Data;
  /** 1 for the first run, 2 when the job was recovered after its process died. */
  attempt: number;
  /** Fires when the job is cancelled (from any process) or the runner shuts down. */
  signal: AbortSignal;
}

export type JobHandler<Data> = (job: Job<Data>) => Promise<void>;

/** Why a job ended without its handler finishing. */
export type JobFailure =
  | { reason: "cancelled" }
  /** Its process died more than `maxRecoveries` times. */
  | { reason: "lost"; message: string }
  | { reason: "error"; message: string };

export interface JobQueueEvents<Data> {
  /** A job ended without success (its handler threw, or it was lost or cancelled before finishing). */
  onFailed?: (job: { id: string; name: string; data: Data }, failure: JobFailure) => void | Promise<void>;
}

export interface ProcessOptions {
  /** Jobs this process runs at once. */
  concurrency: number;
  /** Jobs of this queue the whole deployment runs at once, over every process (BullMQ's global concurrency); unset: no such limit. */
  globalConcurrency?: number;
}

export interface JobQueue<Data> {
  /** Queue a job. false when a job with this id already exists (idempotent add). */
  add(name: string, data: Data, options: { jobId: string }): Promise<boolean>;
  /** Start running jobs in this process. */
  process(handler: JobHandler<Data>, options: ProcessOptions): Promise<void>;
  /** Cancel a job, queued or running, in whichever process holds it. */
  cancel(jobId: string): Promise<void>;
  /** Stop taking jobs; running ones get `graceMs`, then their signals fire. */
  close(graceMs?: number): Promise<void>;
  /** How many jobs wait and run (deployment-wide over BullMQ; this process's in memory), for metrics. */
  counts(): Promise<JobCounts>;
}

export interface JobCounts {
  waiting: number;
  active: number;
  /** Failed and kept (BullMQ); the in-process queue keeps none. */
  failed: number;
}
