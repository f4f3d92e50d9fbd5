import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { ToolError } from "../../../src/errors.js";
import { createInProcessScheduler } from "../../../src/jobs/cron/in-process-scheduler.js";
import type { Scheduler } from "../../../src/jobs/cron/scheduler.js";
import { createCronTool, parseIsoTime } from "../../../src/jobs/cron/cron-tool.js";
import { ToolRegistry } from "../../../src/tools/registry.js";
import type { ToolContext } from "../../../src/tools/tool.js";

const now = Date.parse("2025-06-01T00:00:00.000Z");

function contextFor(sessionKey: string): ToolContext {
  const separator = sessionKey.indexOf(":");
  return {
    sessionKey,
    channel: sessionKey.slice(0, separator),
    chatId: sessionKey.slice(separator + 1),
    workspace: "/nonexistent",
    restrictToWorkspace: true,
    signal: new AbortController().signal,
  };
}

let directory: string;
let scheduler: Scheduler;
let counter: number;

function setup(defaultTimezone?: string) {
  const tool = createCronTool(scheduler, { now: () => now, newId: () => `cron-${(counter += 1)}`, defaultTimezone, maxJobsPerSession: 3 });
  const registry = new ToolRegistry().register(tool);
  const call = (args: Record<string, unknown>, sessionKey = "telegram:42") =>
    registry.execute({ id: "call-1", name: "cron", arguments: JSON.stringify(args) }, contextFor(sessionKey));
  const run = (args: Parameters<typeof tool.execute>[0], sessionKey = "telegram:42") => tool.execute(args, contextFor(sessionKey));
  return { tool, call, run };
}

async function toolError(promise: Promise<unknown>): Promise<ToolError> {
  const error = await promise.then(
    () => undefined,
    (reason: unknown) => reason,
  );
  expect(error).toBeInstanceOf(ToolError);
  return error as ToolError;
}

beforeEach(() => {
  directory = mkdtempSync(join(tmpdir(), "countbot-cron-tool-"));
  scheduler = createInProcessScheduler({ file: join(directory, "jobs.json"), now: () => now });
  counter = 0;
});

afterEach(async () => {
  await scheduler.close();
  rmSync(directory, { recursive: true, force: true });
});

describe("cron tool", () => {
  it("adds an interval job for the current session and describes it", async () => {
    const { run } = setup();
    await expect(run({ action: "add", message: "Remind the user to stretch", every_seconds: 300 })).resolves.toBe(
      "Scheduled cron-1: every 5 minutes (next at 2025-06-01 00:05 UTC).",
    );
    expect(await scheduler.list()).toEqual([
      { id: "cron-1", sessionKey: "telegram:42", message: "Remind the user to stretch", schedule: { kind: "every", seconds: 300 }, createdAt: now },
    ]);
  });

  it("adds a one-time job from an ISO time, with an offset or in the given time zone", async () => {
    const { run } = setup();
    await expect(run({ action: "add", message: "standup", at: "2025-06-01T09:00:00+08:00" })).resolves.toBe("Scheduled cron-1: once at 2025-06-01 01:00 UTC.");
    await expect(run({ action: "add", message: "lunch", at: "2025-06-01T12:30", timezone: "Europe/Berlin" })).resolves.toBe(
      "Scheduled cron-2: once at 2025-06-01 12:30 Europe/Berlin.",
    );
    const schedules = (await scheduler.list()).map((job) => job.schedule);
    expect(schedules).toEqual([
      { kind: "at", at: Date.parse("2025-06-01T01:00:00Z") },
      { kind: "at", at: Date.parse("2025-06-01T10:30:00Z") },
    ]);
  });

  it("reads an `at` without an offset in the default time zone", async () => {
    const { run } = setup("Asia/Shanghai");
    await run({ action: "add", message: "m", at: "2025-06-01 09:15" });
    expect((await scheduler.list())[0]?.schedule).toEqual({ kind: "at", at: Date.parse("2025-06-01T01:15:00Z") });
  });

  it("adds a cron job in a time zone", async () => {
    const { run } = setup();
    await expect(run({ action: "add", message: "weekday brief", cron: "0  9 * * 1-5", timezone: "Asia/Shanghai" })).resolves.toBe(
      'Scheduled cron-1: cron "0 9 * * 1-5" in Asia/Shanghai (next at 2025-06-02 09:00 Asia/Shanghai).',
    );
    expect((await scheduler.list())[0]?.schedule).toEqual({ kind: "cron", expression: "0 9 * * 1-5", timezone: "Asia/Shanghai" });
  });

  it("needs a message and exactly one of at, every_seconds, cron", async () => {
    const { run, call } = setup();
    expect((await toolError(run({ action: "add", every_seconds: 60 }))).message).toContain("`message` is required");
    const none = await toolError(run({ action: "add", message: "m" }));
    expect(none.message).toBe("add needs exactly one of `at`, `every_seconds` or `cron` (got none of them)");
    const two = await toolError(run({ action: "add", message: "m", at: "2025-07-01T00:00:00Z", cron: "0 9 * * *" }));
    expect(two.message).toContain("(got `at` and `cron`)");
    // As the model reads it.
    const outcome = await call({ action: "add", message: "m", every_seconds: 60, cron: "0 9 * * *", at: null });
    expect(outcome.success).toBe(false);
    expect(outcome.content).toMatch(/^Error: add needs exactly one of `at`, `every_seconds` or `cron` \(got `every_seconds` and `cron`\)\. Next: /);
    expect(await scheduler.list()).toEqual([]);
  });

  it("refuses a past `at`, a bad time, a bad cron expression, an unknown time zone and a short interval", async () => {
    const { run } = setup();
    expect((await toolError(run({ action: "add", message: "m", at: "2025-05-31T23:59:00Z" }))).message).toBe(
      "`at` 2025-05-31T23:59:00Z is in the past (it is now 2025-06-01 00:00 UTC)",
    );
    expect((await toolError(run({ action: "add", message: "m", at: "tomorrow at nine" }))).message).toContain('`at` is not an ISO time: "tomorrow at nine"');
    expect((await toolError(run({ action: "add", message: "m", at: "2025-02-30T10:00" }))).message).toContain("not an ISO time");
    expect((await toolError(run({ action: "add", message: "m", cron: "61 * * * *" }))).message).toContain('invalid cron expression "61 * * * *"');
    expect((await toolError(run({ action: "add", message: "m", cron: "* * *" }))).message).toContain('invalid cron expression "* * *": it has 3 field(s)');
    expect((await toolError(run({ action: "add", message: "m", cron: "0 9 * * *", timezone: "Mars/Olympus" }))).message).toBe('unknown time zone "Mars/Olympus"');
    const short = await toolError(run({ action: "add", message: "m", every_seconds: 5 }));
    expect(short.message).toBe("`every_seconds` must be at least 10 (got 5)");
    expect(await scheduler.list()).toEqual([]);
  });

  it("lists only the current session's jobs", async () => {
    const { run } = setup();
    await expect(run({ action: "list" })).resolves.toBe("No scheduled jobs in this chat.");
    await run({ action: "add", message: "mine", every_seconds: 3_600 });
    await run({ action: "add", message: "theirs", every_seconds: 60 }, "discord:7");
    await expect(run({ action: "list" })).resolves.toBe('1 scheduled job(s) in this chat:\n- cron-1: every hour (next at 2025-06-01 01:00 UTC) — "mine"');
  });

  it("removes only the session's own jobs", async () => {
    const { run } = setup();
    await run({ action: "add", message: "mine", every_seconds: 60 });
    await run({ action: "add", message: "theirs", every_seconds: 60 }, "discord:7");
    expect((await toolError(run({ action: "remove" }))).message).toBe("`id` is required to remove a job");
    expect((await toolError(run({ action: "remove", id: "cron-2" }))).message).toBe('there is no job "cron-2" in this chat');
    expect((await toolError(run({ action: "remove", id: "cron-9" }))).message).toBe('there is no job "cron-9" in this chat');
    await expect(run({ action: "remove", id: "cron-1" })).resolves.toBe("Removed cron-1.");
    expect((await scheduler.list()).map((job) => job.id)).toEqual(["cron-2"]);
  });

  it("caps the jobs of one session", async () => {
    const { run } = setup();
    for (let index = 0; index < 3; index += 1) await run({ action: "add", message: `m${index}`, every_seconds: 60 });
    expect((await toolError(run({ action: "add", message: "one more", every_seconds: 60 }))).message).toContain("already has 3 scheduled jobs");
    await expect(run({ action: "add", message: "elsewhere", every_seconds: 60 }, "discord:7")).resolves.toMatch(/^Scheduled cron-/);
  });
});

describe("parseIsoTime", () => {
  it("handles offsets, fractions and daylight saving time", () => {
    expect(parseIsoTime("2025-06-01T09:00:00.250Z", "UTC")).toBe(Date.parse("2025-06-01T09:00:00.250Z"));
    expect(parseIsoTime("2025-06-01T09:00-0130", "UTC")).toBe(Date.parse("2025-06-01T10:30:00Z"));
    // Berlin is UTC+1 in winter and UTC+2 in summer.
    expect(parseIsoTime("2025-01-15T12:00", "Europe/Berlin")).toBe(Date.parse("2025-01-15T11:00:00Z"));
    expect(parseIsoTime("2025-07-15T12:00", "Europe/Berlin")).toBe(Date.parse("2025-07-15T10:00:00Z"));
    expect(parseIsoTime("2025-07-15", "UTC")).toBeUndefined();
  });
});
