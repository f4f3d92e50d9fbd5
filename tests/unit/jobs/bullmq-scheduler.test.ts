import { randomUUID } from "node:crypto";
import type { Redis } from "ioredis";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { createBullmqScheduler } from "../../../src/jobs/cron/bullmq-scheduler.js";
import type { CronJob, Scheduler } from "../../../src/jobs/cron/scheduler.js";
import { connectRedis } from "../../../src/redis/client.js";
import { deleteKeys, redisUrl } from "../../support/redis.js";

let prefix: string;
const connections: Redis[] = [];
const schedulers: Scheduler[] = [];

/** A scheduler on a connection of its own, as another process would have. */
function open(): Scheduler {
  const connection = connectRedis(redisUrl);
  connections.push(connection);
  const scheduler = createBullmqScheduler({ connection, prefix: `{${prefix}}` });
  schedulers.push(scheduler);
  return scheduler;
}

function recorder(name = "a") {
  const fired: Array<{ by: string; id: string; firedAt: number }> = [];
  const fire = async (job: CronJob, firedAt: number) => {
    fired.push({ by: name, id: job.id, firedAt });
  };
  return { fired, fire };
}

/** Every `seconds`, the first firing due about now (the scheduler starts one interval after createdAt). */
function everyJob(id: string, seconds: number, sessionKey = "telegram:42"): CronJob {
  return { id, sessionKey, message: `message of ${id}`, schedule: { kind: "every", seconds }, createdAt: Date.now() - seconds * 1000 };
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

beforeEach(() => {
  prefix = `countbot-test-${randomUUID()}`;
});

afterEach(async () => {
  await Promise.all(schedulers.splice(0).map((scheduler) => scheduler.close()));
  const cleaner = connectRedis(redisUrl);
  await deleteKeys(cleaner, prefix);
  await cleaner.quit();
  await Promise.all(connections.splice(0).map((connection) => connection.quit()));
});

describe("BullMQ scheduler", () => {
  it("fires an `every` job repeatedly, once per due time", async () => {
    const scheduler = open();
    const { fired, fire } = recorder();
    await scheduler.add(everyJob("every-1", 1));
    await scheduler.start(fire);
    await vi.waitFor(() => expect(fired.length).toBeGreaterThanOrEqual(2), { timeout: 10_000, interval: 50 });
    expect(fired.every((entry) => entry.id === "every-1")).toBe(true);
    expect(new Set(fired.map((entry) => entry.firedAt)).size).toBe(fired.length);
  });

  it("fires an `at` job once and then no longer lists it", async () => {
    const scheduler = open();
    const { fired, fire } = recorder();
    const at = Date.now() + 300;
    await scheduler.add({ id: "at-1", sessionKey: "telegram:42", message: "once", schedule: { kind: "at", at }, createdAt: Date.now() });
    expect((await scheduler.list()).map((job) => job.id)).toEqual(["at-1"]);
    await scheduler.start(fire);
    await vi.waitFor(() => expect(fired).toEqual([{ by: "a", id: "at-1", firedAt: at }]), { timeout: 10_000, interval: 50 });
    await vi.waitFor(async () => expect(await scheduler.list()).toEqual([]), { timeout: 5_000, interval: 50 });
    await sleep(1_000);
    expect(fired).toHaveLength(1);
  });

  it("lists a session's jobs of every kind and removes them", async () => {
    const scheduler = open();
    const now = Date.now();
    const jobs: CronJob[] = [
      { id: "every-1", sessionKey: "telegram:42", message: "m1", schedule: { kind: "every", seconds: 3_600 }, createdAt: now },
      { id: "cron-1", sessionKey: "telegram:42", message: "m2", schedule: { kind: "cron", expression: "0 9 * * *", timezone: "Asia/Shanghai" }, createdAt: now + 1 },
      { id: "at-1", sessionKey: "telegram:42", message: "m3", schedule: { kind: "at", at: now + 3_600_000 }, createdAt: now + 2 },
      { id: "other-1", sessionKey: "discord:7", message: "m4", schedule: { kind: "every", seconds: 60 }, createdAt: now + 3 },
    ];
    for (const job of jobs) await scheduler.add(job);
    // Adding again changes nothing.
    for (const job of jobs) await scheduler.add(job);
    expect(await scheduler.list("telegram:42")).toEqual(jobs.slice(0, 3));
    expect((await scheduler.list()).map((job) => job.id)).toEqual(["every-1", "cron-1", "at-1", "other-1"]);

    expect(await scheduler.remove("at-1")).toBe(true);
    expect(await scheduler.remove("cron-1")).toBe(true);
    expect(await scheduler.remove("cron-1")).toBe(false);
    expect(await scheduler.remove("nothing")).toBe(false);
    expect((await scheduler.list()).map((job) => job.id)).toEqual(["every-1", "other-1"]);

    // An id can change kind: the old schedule goes.
    await scheduler.add({ ...jobs[0]!, schedule: { kind: "at", at: now + 60_000 } });
    expect(await scheduler.list("telegram:42")).toEqual([{ ...jobs[0]!, schedule: { kind: "at", at: now + 60_000 } }]);
  });

  it("keeps firing after a restart, from the schedule stored in Redis", async () => {
    const first = open();
    const before = recorder("first");
    await first.add(everyJob("every-1", 1));
    await first.start(before.fire);
    await vi.waitFor(() => expect(before.fired.length).toBeGreaterThanOrEqual(1), { timeout: 10_000, interval: 50 });
    await first.close();
    const firedBefore = before.fired.length;

    const second = open();
    const after = recorder("second");
    await second.start(after.fire);
    await vi.waitFor(() => expect(after.fired.length).toBeGreaterThanOrEqual(2), { timeout: 10_000, interval: 50 });
    expect(before.fired).toHaveLength(firedBefore);
    const dueTimes = [...before.fired, ...after.fired].map((entry) => entry.firedAt);
    expect(new Set(dueTimes).size).toBe(dueTimes.length);
  });

  it("fires each due time once with two processes that both add the job and both run", async () => {
    const one = open();
    const two = open();
    const { fired, fire: fireOne } = recorder("one");
    const fireTwo = async (job: CronJob, firedAt: number) => {
      fired.push({ by: "two", id: job.id, firedAt });
    };
    const job = everyJob("every-1", 1);
    const at = Date.now() + 500;
    const once: CronJob = { id: "at-1", sessionKey: "telegram:42", message: "once", schedule: { kind: "at", at }, createdAt: Date.now() };
    await Promise.all([one.add(job), two.add(job), one.add(once), two.add(once)]);
    await Promise.all([one.start(fireOne), two.start(fireTwo)]);
    await vi.waitFor(() => expect(fired.filter((entry) => entry.id === "every-1").length).toBeGreaterThanOrEqual(4), { timeout: 15_000, interval: 50 });

    const everyDueTimes = fired.filter((entry) => entry.id === "every-1").map((entry) => entry.firedAt);
    expect(new Set(everyDueTimes).size).toBe(everyDueTimes.length);
    expect(fired.filter((entry) => entry.id === "at-1")).toHaveLength(1);
    expect((await one.list()).map((entry) => entry.id)).toEqual(["every-1"]);
  });
});
