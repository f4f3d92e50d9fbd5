/**
 * The JobQueue conformance suite: every runner passes it. The guarantees: a job runs with its
 * data intact, an id is added once, `concurrency` bounds the running handlers, cancel stops a
 * queued job and aborts a running one, a throwing handler reports its message, close gives
 * running jobs a grace period and then aborts them.
 */
import { afterEach, describe, expect, it } from "vitest";
import { CancelledError } from "../../src/errors.js";
import type { Job, JobFailure, JobQueue, JobQueueEvents } from "../../src/jobs/job-queue.js";

export interface TestData {
  label: string;
  payload?: unknown;
}

export interface JobQueueFactory {
  /** A queue on fresh storage; `cleanup` closes it and removes what it stored. */
  (events: JobQueueEvents<TestData>): Promise<{ queue: JobQueue<TestData>; cleanup: () => Promise<void> }>;
}

export interface FailureRecord {
  id: string;
  name: string;
  data: TestData;
  failure: JobFailure;
}

/** Collects onFailed calls. */
export function failureRecorder(): { events: JobQueueEvents<TestData>; failures: FailureRecord[] } {
  const failures: FailureRecord[] = [];
  return {
    failures,
    events: { onFailed: (job, failure) => void failures.push({ ...job, failure }) },
  };
}

export async function waitFor<T>(probe: () => T | undefined | false, what: string, limitMs = 10_000): Promise<T> {
  const deadline = Date.now() + limitMs;
  while (Date.now() < deadline) {
    const value = probe();
    if (value !== undefined && value !== false) return value;
    await sleep(10);
  }
  throw new Error(`timed out waiting for ${what}`);
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** A promise the test resolves by hand. */
export function gate(): { opened: Promise<void>; open: () => void } {
  let open!: () => void;
  const opened = new Promise<void>((resolve) => (open = resolve));
  return { opened, open };
}

/** Resolves never; rejects with the signal's reason once it fires. */
export function untilAborted(signal: AbortSignal): Promise<never> {
  return new Promise((_resolve, reject) => {
    if (signal.aborted) reject(signal.reason);
    signal.addEventListener("abort", () => reject(signal.reason), { once: true });
  });
}

export function runJobQueueSuite(name: string, factory: JobQueueFactory): void {
  describe(`JobQueue conformance: ${name}`, () => {
    let queue: JobQueue<TestData>;
    let failures: FailureRecord[];
    let cleanup: (() => Promise<void>) | undefined;

    async function open(): Promise<JobQueue<TestData>> {
      const recorder = failureRecorder();
      failures = recorder.failures;
      const made = await factory(recorder.events);
      queue = made.queue;
      cleanup = made.cleanup;
      return queue;
    }

    afterEach(async () => {
      await cleanup?.();
      cleanup = undefined;
    });

    it("runs a job with its id, name, data and attempt 1", async () => {
      await open();
      const seen: Array<Job<TestData>> = [];
      await queue.process(async (job) => void seen.push(job), { concurrency: 1 });
      expect(await queue.add("greet", { label: "a" }, { jobId: "job-a" })).toBe(true);
      const job = await waitFor(() => seen[0], "the job to run");
      expect(job).toMatchObject({ id: "job-a", name: "greet", data: { label: "a" }, attempt: 1 });
      expect(job.signal.aborted).toBe(false);
      await sleep(100);
      expect(failures).toEqual([]);
    });

    it("counts the jobs waiting and running", async () => {
      await open();
      expect(await queue.counts()).toEqual({ waiting: 0, active: 0, failed: 0 });
      for (const label of ["a", "b", "c"]) await queue.add("count", { label }, { jobId: `count-${label}` });
      expect(await queue.counts()).toMatchObject({ waiting: 3, active: 0 });
      let release!: () => void;
      const gate = new Promise<void>((resolve) => (release = resolve));
      const started: string[] = [];
      await queue.process(async (job) => {
        started.push(job.id);
        await gate;
      }, { concurrency: 1 });
      await waitFor(() => (started.length === 1 ? true : undefined), "one job to start");
      const countsUntil = async (done: (counts: Awaited<ReturnType<typeof queue.counts>>) => boolean, what: string) => {
        const deadline = Date.now() + 10_000;
        for (;;) {
          const counts = await queue.counts();
          if (done(counts)) return counts;
          if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}: ${JSON.stringify(counts)}`);
          await sleep(10);
        }
      };
      await countsUntil((counts) => counts.active === 1 && counts.waiting === 2, "one running and two waiting");
      release();
      await countsUntil((counts) => counts.active === 0 && counts.waiting === 0, "all done");
    });

    it("hands the data over as it was added", async () => {
      await open();
      const data: TestData = {
        label: "round trip",
        payload: {
          text: 'héllo 👋 "quoted"\nsecond line',
          count: 42,
          ratio: 0.25,
          flag: false,
          nothing: null,
          list: [1, "two", { three: 3 }],
          nested: { deep: { deeper: ["x", ""] } },
        },
      };
      const seen: TestData[] = [];
      await queue.add("carry", data, { jobId: "job-data" });
      await queue.process(async (job) => void seen.push(job.data), { concurrency: 1 });
      expect(await waitFor(() => seen[0], "the job to run")).toEqual(data);
    });

    it("adds a job id once, while it waits, while it runs and after it ran", async () => {
      await open();
      const runs: string[] = [];
      const release = gate();
      expect(await queue.add("once", { label: "first" }, { jobId: "job-once" })).toBe(true);
      expect(await queue.add("once", { label: "second" }, { jobId: "job-once" })).toBe(false);
      await queue.process(
        async (job) => {
          runs.push(job.data.label);
          await release.opened;
        },
        { concurrency: 2 },
      );
      await waitFor(() => runs.length === 1, "the job to start");
      expect(await queue.add("once", { label: "third" }, { jobId: "job-once" })).toBe(false);
      release.open();
      await sleep(200);
      expect(await queue.add("once", { label: "fourth" }, { jobId: "job-once" })).toBe(false);
      await sleep(300);
      expect(runs).toEqual(["first"]);
    });

    it("runs at most `concurrency` handlers at a time", async () => {
      await open();
      let active = 0;
      let most = 0;
      const done: string[] = [];
      const release = gate();
      await queue.process(
        async (job) => {
          active += 1;
          most = Math.max(most, active);
          await release.opened;
          active -= 1;
          done.push(job.id);
        },
        { concurrency: 2 },
      );
      for (let index = 0; index < 6; index += 1) await queue.add("work", { label: `w${index}` }, { jobId: `job-w${index}` });
      await waitFor(() => active === 2, "two jobs to run");
      await sleep(400); // a third would have started by now
      expect(active).toBe(2);
      release.open();
      await waitFor(() => done.length === 6, "every job to finish");
      expect(most).toBe(2);
    });

    it("runs at most `globalConcurrency` handlers when it is below `concurrency`", async () => {
      await open();
      let active = 0;
      let most = 0;
      const done: string[] = [];
      const release = gate();
      await queue.process(
        async (job) => {
          active += 1;
          most = Math.max(most, active);
          await release.opened;
          active -= 1;
          done.push(job.id);
        },
        { concurrency: 4, globalConcurrency: 1 },
      );
      for (let index = 0; index < 3; index += 1) await queue.add("work", { label: `g${index}` }, { jobId: `job-g${index}` });
      await waitFor(() => active === 1, "one job to run");
      await sleep(400); // a second would have started by now
      expect(active).toBe(1);
      release.open();
      await waitFor(() => done.length === 3, "every job to finish");
      expect(most).toBe(1);
    });

    it("cancels a queued job: it never runs and onFailed says cancelled", async () => {
      await open();
      const started: string[] = [];
      const release = gate();
      await queue.process(
        async (job) => {
          started.push(job.id);
          if (job.id === "job-blocker") await release.opened;
        },
        { concurrency: 1 },
      );
      await queue.add("block", { label: "blocker" }, { jobId: "job-blocker" });
      await waitFor(() => started.includes("job-blocker"), "the blocker to start");
      await queue.add("wait", { label: "queued" }, { jobId: "job-queued" });
      await queue.cancel("job-queued");
      const record = await waitFor(() => failures.find((failure) => failure.id === "job-queued"), "onFailed for the queued job");
      expect(record).toEqual({ id: "job-queued", name: "wait", data: { label: "queued" }, failure: { reason: "cancelled" } });
      release.open();
      await queue.add("after", { label: "after" }, { jobId: "job-after" });
      await waitFor(() => started.includes("job-after"), "the next job to run");
      await queue.cancel("job-queued"); // already gone: nothing more happens
      await sleep(100);
      expect(started).toEqual(["job-blocker", "job-after"]);
      expect(failures).toHaveLength(1);
    });

    it("cancels a running job: its signal fires with a CancelledError and onFailed says cancelled", async () => {
      await open();
      const running: Array<Job<TestData>> = [];
      await queue.process(
        async (job) => {
          running.push(job);
          await untilAborted(job.signal);
        },
        { concurrency: 1 },
      );
      await queue.add("long", { label: "long" }, { jobId: "job-long" });
      const job = await waitFor(() => running[0], "the job to start");
      await queue.cancel("job-long");
      const record = await waitFor(() => failures[0], "onFailed");
      expect(record).toEqual({ id: "job-long", name: "long", data: { label: "long" }, failure: { reason: "cancelled" } });
      expect(job.signal.aborted).toBe(true);
      expect(job.signal.reason).toBeInstanceOf(CancelledError);
      await sleep(200);
      expect(failures).toHaveLength(1);
      expect(running).toHaveLength(1);
    });

    it("reports a throwing handler through onFailed with its message, and keeps running jobs", async () => {
      await open();
      const ran: string[] = [];
      await queue.process(
        async (job) => {
          ran.push(job.id);
          if (job.data.label === "bad") throw new Error("the disk is full");
        },
        { concurrency: 1 },
      );
      await queue.add("try", { label: "bad" }, { jobId: "job-bad" });
      const record = await waitFor(() => failures[0], "onFailed");
      expect(record).toEqual({ id: "job-bad", name: "try", data: { label: "bad" }, failure: { reason: "error", message: "the disk is full" } });
      await queue.add("try", { label: "good" }, { jobId: "job-good" });
      await waitFor(() => ran.includes("job-good"), "the next job to run");
      await sleep(100);
      expect(failures).toHaveLength(1);
    });

    it("closes with a grace period: a short job finishes, a long one is aborted", async () => {
      await open();
      const started = new Map<string, Job<TestData>>();
      const finished: string[] = [];
      await queue.process(
        async (job) => {
          started.set(job.data.label, job);
          if (job.data.label === "short") await sleep(300);
          else await untilAborted(job.signal);
          finished.push(job.data.label);
        },
        { concurrency: 2 },
      );
      await queue.add("short", { label: "short" }, { jobId: "job-short" });
      await queue.add("long", { label: "long" }, { jobId: "job-long" });
      await waitFor(() => started.size === 2, "both jobs to start");
      const startedAt = Date.now();
      await queue.close(800);
      const elapsed = Date.now() - startedAt;
      expect(finished).toEqual(["short"]);
      expect(started.get("short")!.signal.aborted).toBe(false);
      expect(started.get("long")!.signal.aborted).toBe(true);
      expect(started.get("long")!.signal.reason).toBeInstanceOf(CancelledError);
      expect(elapsed).toBeGreaterThanOrEqual(700);
      expect(elapsed).toBeLessThan(5_000);
      await queue.close(); // a second close is a no-op
    });
  });
}
