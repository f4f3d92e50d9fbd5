import { mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { createInProcessScheduler, type SetTimer } from "../../../src/jobs/cron/in-process-scheduler.js";
import type { CronJob, Scheduler } from "../../../src/jobs/cron/scheduler.js";

/** A clock and timers that move only when the test says so. */
function fakeClock(start: number) {
  let time = start;
  const timers: Array<{ at: number; callback: () => void; done: boolean }> = [];
  const setTimer: SetTimer = (callback, delayMs) => {
    const timer = { at: time + delayMs, callback, done: false };
    timers.push(timer);
    return () => {
      timer.done = true;
    };
  };
  /** Moves the clock forward, running each timer that comes due on the way, in order. */
  const advance = async (ms: number): Promise<void> => {
    const target = time + ms;
    for (;;) {
      const next = timers.filter((timer) => !timer.done && timer.at <= target).sort((a, b) => a.at - b.at)[0];
      if (!next) break;
      time = Math.max(time, next.at);
      next.done = true;
      next.callback();
      await settle();
    }
    time = target;
  };
  const pending = () => timers.filter((timer) => !timer.done).length;
  return { now: () => time, setTimer, advance, pending };
}

async function settle(): Promise<void> {
  for (let round = 0; round < 5; round += 1) await new Promise((resolve) => setImmediate(resolve));
}

const t0 = Date.parse("2025-01-01T00:00:00.000Z");

function job(id: string, schedule: CronJob["schedule"], sessionKey = "telegram:42"): CronJob {
  return { id, sessionKey, message: `message of ${id}`, schedule, createdAt: t0 };
}

let directory: string;
let file: string;
let clock: ReturnType<typeof fakeClock>;
const opened: Scheduler[] = [];

function open(): Scheduler {
  const scheduler = createInProcessScheduler({ file, now: clock.now, setTimer: clock.setTimer });
  opened.push(scheduler);
  return scheduler;
}

function recorder() {
  const fired: Array<{ id: string; firedAt: number }> = [];
  const fire = async (firedJob: CronJob, firedAt: number) => {
    fired.push({ id: firedJob.id, firedAt });
  };
  return { fired, fire };
}

beforeEach(() => {
  directory = mkdtempSync(join(tmpdir(), "countbot-cron-"));
  file = join(directory, "cron", "jobs.json");
  clock = fakeClock(t0);
});

afterEach(async () => {
  await Promise.all(opened.splice(0).map((scheduler) => scheduler.close()));
  rmSync(directory, { recursive: true, force: true });
});

describe("in-process scheduler", () => {
  it("fires an `every` job every N seconds, at the due times", async () => {
    const scheduler = open();
    const { fired, fire } = recorder();
    await scheduler.add(job("every-1", { kind: "every", seconds: 60 }));
    await scheduler.start(fire);
    await clock.advance(59_000);
    expect(fired).toEqual([]);
    await clock.advance(1_000);
    await clock.advance(60_000);
    expect(fired).toEqual([
      { id: "every-1", firedAt: t0 + 60_000 },
      { id: "every-1", firedAt: t0 + 120_000 },
    ]);
  });

  it("fires an `at` job once, then removes it from the list and the file", async () => {
    const scheduler = open();
    const { fired, fire } = recorder();
    await scheduler.add(job("at-1", { kind: "at", at: t0 + 5_000 }));
    await scheduler.start(fire);
    await clock.advance(5_000);
    await vi.waitFor(() => expect(fired).toEqual([{ id: "at-1", firedAt: t0 + 5_000 }]));
    expect(await scheduler.list()).toEqual([]);
    await scheduler.close();
    expect(JSON.parse(readFileSync(file, "utf8"))).toEqual({ version: 1, jobs: [] });
    await clock.advance(60_000);
    expect(fired).toHaveLength(1);
  });

  it("runs a cron expression in its time zone", async () => {
    const scheduler = open();
    const { fired, fire } = recorder();
    // 09:00 in Shanghai is 01:00 UTC; t0 is 08:00 there.
    await scheduler.add(job("cron-1", { kind: "cron", expression: "0 9 * * *", timezone: "Asia/Shanghai" }));
    await scheduler.start(fire);
    await clock.advance(59 * 60_000);
    expect(fired).toEqual([]);
    await clock.advance(60_000);
    expect(fired).toEqual([{ id: "cron-1", firedAt: Date.parse("2025-01-01T01:00:00.000Z") }]);
    await clock.advance(24 * 3_600_000);
    expect(fired.map((entry) => entry.firedAt)).toEqual([Date.parse("2025-01-01T01:00:00.000Z"), Date.parse("2025-01-02T01:00:00.000Z")]);
  });

  it("keeps jobs across a restart and re-arms them on start; an `at` missed while down fires at start", async () => {
    const first = open();
    await first.add(job("every-1", { kind: "every", seconds: 60 }));
    await first.add(job("at-1", { kind: "at", at: t0 + 30_000 }, "discord:7"));
    await first.close();

    await clock.advance(90_000);
    const second = open();
    expect((await second.list()).map((entry) => entry.id)).toEqual(["every-1", "at-1"]);
    expect((await second.list("discord:7")).map((entry) => entry.id)).toEqual(["at-1"]);
    const { fired, fire } = recorder();
    await second.start(fire);
    await clock.advance(0);
    await vi.waitFor(() => expect(fired).toEqual([{ id: "at-1", firedAt: t0 + 30_000 }]));
    // The `every` slot at 60 s passed while down: skipped, the rhythm goes on at 120 s.
    await clock.advance(30_000);
    expect(fired).toEqual([
      { id: "at-1", firedAt: t0 + 30_000 },
      { id: "every-1", firedAt: t0 + 120_000 },
    ]);
  });

  it("does not fire twice when the same job is added twice, and replaces a job with the same id", async () => {
    const scheduler = open();
    const { fired, fire } = recorder();
    await scheduler.start(fire);
    await scheduler.add(job("every-1", { kind: "every", seconds: 60 }));
    await scheduler.add(job("every-1", { kind: "every", seconds: 60 }));
    expect(clock.pending()).toBe(1);
    await clock.advance(60_000);
    expect(fired).toHaveLength(1);

    await scheduler.add(job("every-1", { kind: "every", seconds: 600 }));
    await clock.advance(539_000);
    expect(fired).toHaveLength(1);
    await clock.advance(1_000);
    expect(fired).toEqual([
      { id: "every-1", firedAt: t0 + 60_000 },
      { id: "every-1", firedAt: t0 + 600_000 },
    ]);
    expect(await scheduler.list()).toHaveLength(1);
  });

  it("does not fire before start, nor after remove or close", async () => {
    const scheduler = open();
    const { fired, fire } = recorder();
    await scheduler.add(job("every-1", { kind: "every", seconds: 60 }));
    await scheduler.add(job("every-2", { kind: "every", seconds: 60 }));
    await clock.advance(120_000);
    expect(fired).toEqual([]);
    await scheduler.start(fire);
    expect(await scheduler.remove("every-1")).toBe(true);
    expect(await scheduler.remove("every-1")).toBe(false);
    await clock.advance(60_000);
    expect(fired).toEqual([{ id: "every-2", firedAt: t0 + 180_000 }]);
    await scheduler.close();
    await clock.advance(600_000);
    expect(fired).toHaveLength(1);
  });

  it("keeps firing when `fire` throws", async () => {
    const scheduler = open();
    let calls = 0;
    await scheduler.add(job("every-1", { kind: "every", seconds: 60 }));
    await scheduler.start(async () => {
      calls += 1;
      throw new Error("bus is down");
    });
    await clock.advance(120_000);
    expect(calls).toBe(2);
  });

  it("writes the file atomically, leaving no temp files, and refuses a corrupt one", async () => {
    const scheduler = open();
    await Promise.all([1, 2, 3, 4, 5].map((index) => scheduler.add(job(`every-${index}`, { kind: "every", seconds: 60 }))));
    await scheduler.close();
    expect(readdirSync(join(directory, "cron"))).toEqual(["jobs.json"]);
    expect((JSON.parse(readFileSync(file, "utf8")) as { jobs: unknown[] }).jobs).toHaveLength(5);

    writeFileSync(file, "{ not json");
    await expect(open().list()).rejects.toThrow(file);
  });
});
