/**
 * The Scheduler of the embedded mode (`countbot start` without Redis): jobs live in one JSON file
 * under the data dir and timers in this process fire them.
 *
 * When things fire:
 * - `at`: once, then the job is removed. The removal is written before `fire` runs, so a crash in
 *   between loses that one firing rather than repeating it (the embedded bus is in memory anyway).
 *   An `at` that came due while the process was down fires as soon as the scheduler starts.
 * - `every`: at `createdAt + k × seconds`, so a restart keeps the rhythm. Slots missed while the
 *   process was down are skipped, not caught up in a burst.
 * - `cron`: the next time the expression matches in its time zone (cron-parser); missed ones skipped.
 *
 * One timer per job, and each due time is fired at most once by this process. Only one process may
 * use a given file: two would both fire every job (the BullMQ scheduler is for several processes).
 */
import { mkdir, readFile } from "node:fs/promises";
import path from "node:path";
import { CronExpressionParser } from "cron-parser";
import { z } from "zod";
import { errorMessage } from "../../errors.js";
import { writeFileAtomic } from "../../store/file-io.js";
import { CronJobSchema, CronScheduleSchema, type CronJob, type Scheduler } from "./scheduler.js";

/** Cancels a timer set with {@link SetTimer}. */
export type CancelTimer = () => void;
/** Runs `callback` once after `delayMs`; injected so tests can drive a fake clock. */
export type SetTimer = (callback: () => void, delayMs: number) => CancelTimer;

export interface SchedulerLogger {
  warn(fields: Record<string, unknown>, message: string): void;
}

export interface InProcessSchedulerOptions {
  /** The JSON file that holds the jobs, e.g. `<dataDir>/cron/jobs.json`. Written atomically. */
  file: string;
  /** Clock in ms since epoch. Default: Date.now. */
  now?: () => number;
  /** Default: an unref'd setTimeout, so pending jobs do not keep the process alive. */
  setTimer?: SetTimer;
  logger?: SchedulerLogger;
}

/**
 * The contract's job schema with `every` allowed below the cron tool's 10 s minimum: the minimum is
 * the tool's policy, and tests and operators may schedule shorter intervals directly.
 */
export const StoredCronJobSchema = CronJobSchema.extend({
  schedule: z.union([CronScheduleSchema, z.object({ kind: z.literal("every"), seconds: z.number().int().positive() })]),
});

const FileSchema = z.object({ version: z.literal(1), jobs: z.array(z.unknown()) });

/** setTimeout cannot wait longer than this (about 24.8 days); longer waits are re-armed. */
const MAX_TIMER_DELAY_MS = 2 ** 31 - 1;

/**
 * The time a schedule is next due strictly after `after`, or undefined when it never is again
 * (an `at` in the past counts as due: it is fired late rather than dropped).
 */
export function nextDueTime(job: CronJob, after: number): number | undefined {
  const schedule = job.schedule;
  switch (schedule.kind) {
    case "at":
      return schedule.at;
    case "every": {
      const period = schedule.seconds * 1000;
      const slots = Math.floor((after - job.createdAt) / period) + 1;
      return job.createdAt + Math.max(1, slots) * period;
    }
    case "cron":
      return CronExpressionParser.parse(schedule.expression, { tz: schedule.timezone, currentDate: after }).next().getTime();
  }
}

const defaultSetTimer: SetTimer = (callback, delayMs) => {
  const timer = setTimeout(callback, delayMs);
  timer.unref();
  return () => clearTimeout(timer);
};

export function createInProcessScheduler(options: InProcessSchedulerOptions): Scheduler {
  const now = options.now ?? Date.now;
  const setTimer = options.setTimer ?? defaultSetTimer;
  const jobs = new Map<string, CronJob>();
  const timers = createJobTimers(setTimer, now, (id, due) => onTimer(id, due));
  let loaded: Promise<void> | undefined;
  let writes: Promise<void> = Promise.resolve();
  let fire: ((job: CronJob, firedAt: number) => Promise<void>) | undefined;

  const load = (): Promise<void> => (loaded ??= readJobs(options.file, options.logger).then((stored) => {
    for (const job of stored) jobs.set(job.id, job);
  }));

  /** Queues a write of the jobs as they are when the write runs, so the last write wins with the latest state. */
  const persist = (): Promise<void> => (writes = writes.catch(() => undefined).then(() => writeJobs(options.file, [...jobs.values()])));

  const arm = (job: CronJob, due: number | undefined): void => {
    timers.disarm(job.id);
    if (!fire || due === undefined) return;
    timers.arm(job.id, due);
  };

  const armNext = (job: CronJob, after: number): void => {
    try {
      arm(job, nextDueTime(job, after));
    } catch (error) {
      options.logger?.warn({ jobId: job.id, error: errorMessage(error) }, "cron job has an unusable schedule; not armed");
    }
  };

  const onTimer = async (id: string, due: number): Promise<void> => {
    const handler = fire;
    // A replaced or removed job's timer may still run: only the timer that is armed now counts.
    if (!handler || !timers.take(id, due)) return;
    const job = jobs.get(id);
    if (!job) return;
    if (now() < due) {
      // Woken early (a long wait is split into several timers): wait for the rest.
      arm(job, due);
      return;
    }
    if (job.schedule.kind === "at") {
      jobs.delete(id);
      await persist().catch((error: unknown) => options.logger?.warn({ jobId: id, error: errorMessage(error) }, "could not save the cron jobs"));
    } else {
      armNext(job, Math.max(due, now()));
    }
    try {
      await handler(job, due);
    } catch (error) {
      options.logger?.warn({ jobId: id, sessionKey: job.sessionKey, error: errorMessage(error) }, "firing a cron job failed");
    }
  };

  return {
    async add(job) {
      const parsed = StoredCronJobSchema.parse(job);
      await load();
      jobs.set(parsed.id, parsed);
      await persist();
      armNext(parsed, now());
    },

    async remove(id) {
      await load();
      timers.disarm(id);
      if (!jobs.delete(id)) return false;
      await persist();
      return true;
    },

    async list(sessionKey) {
      await load();
      return [...jobs.values()].filter((job) => sessionKey === undefined || job.sessionKey === sessionKey).sort((a, b) => a.createdAt - b.createdAt);
    },

    async start(handler) {
      if (fire) throw new Error("the cron scheduler is already started");
      await load();
      fire = handler;
      const startedAt = now();
      for (const job of jobs.values()) armNext(job, startedAt);
    },

    async close() {
      fire = undefined;
      timers.disarmAll();
      await timers.settled();
      await writes.catch(() => undefined);
    },
  };
}

/**
 * One timer per job id, each remembering the due time it was armed for, so that a timer of a job
 * replaced or removed since (its callback may already be queued) finds itself stale. A long wait is
 * armed in steps of at most MAX_TIMER_DELAY_MS; `settled` waits for the firings still running.
 */
function createJobTimers(setTimer: SetTimer, now: () => number, onTimer: (id: string, due: number) => Promise<void>) {
  const timers = new Map<string, { due: number; cancel: CancelTimer }>();
  const firing = new Set<Promise<void>>();
  const disarm = (id: string): void => {
    timers.get(id)?.cancel();
    timers.delete(id);
  };
  return {
    disarm,
    arm(id: string, due: number): void {
      disarm(id);
      const delay = Math.min(Math.max(0, due - now()), MAX_TIMER_DELAY_MS);
      const cancel = setTimer(() => {
        const run = onTimer(id, due);
        firing.add(run);
        void run.finally(() => firing.delete(run));
      }, delay);
      timers.set(id, { due, cancel });
    },
    /** Whether the timer armed for `id` is the one for `due`: then it is spent, and forgotten. */
    take(id: string, due: number): boolean {
      if (timers.get(id)?.due !== due) return false;
      timers.delete(id);
      return true;
    },
    disarmAll(): void {
      for (const id of [...timers.keys()]) disarm(id);
    },
    settled(): Promise<unknown> {
      return Promise.allSettled([...firing]);
    },
  };
}

async function readJobs(file: string, logger: SchedulerLogger | undefined): Promise<CronJob[]> {
  let text: string;
  try {
    text = await readFile(file, "utf8");
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return [];
    throw error;
  }
  let content: z.infer<typeof FileSchema>;
  try {
    content = FileSchema.parse(JSON.parse(text));
  } catch (error) {
    // Refuse rather than start empty: the next write would erase the jobs that are in there.
    throw new Error(`the cron jobs file ${file} is not readable (${errorMessage(error)}); fix or remove it`, { cause: error });
  }
  const jobs: CronJob[] = [];
  for (const entry of content.jobs) {
    const parsed = StoredCronJobSchema.safeParse(entry);
    if (parsed.success) jobs.push(parsed.data);
    else logger?.warn({ file, entry, error: parsed.error.message }, "skipping an invalid cron job");
  }
  return jobs;
}

/** Readers see the old file or the new one, never half of it. */
async function writeJobs(file: string, jobs: CronJob[]): Promise<void> {
  await mkdir(path.dirname(file), { recursive: true });
  await writeFileAtomic(file, `${JSON.stringify({ version: 1, jobs }, null, 2)}\n`, { mode: 0o600 });
}
