import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import {
  HEARTBEAT_OK,
  createHeartbeat,
  isHeartbeatPrompt,
  isSilentHeartbeatReply,
  type HeartbeatOptions,
  type SetTimer,
} from "../../../src/jobs/heartbeat.js";

let workspace: string;
let time: number;
let timers: Array<{ at: number; callback: () => void; done: boolean }>;
let posted: Array<{ sessionKey: string; content: string }>;

const setTimer: SetTimer = (callback, delayMs) => {
  const timer = { at: time + delayMs, callback, done: false };
  timers.push(timer);
  return () => {
    timer.done = true;
  };
};

/** Moves the fake clock, running the timers that come due. */
async function advance(ms: number): Promise<void> {
  const target = time + ms;
  for (;;) {
    const next = timers.filter((timer) => !timer.done && timer.at <= target).sort((a, b) => a.at - b.at)[0];
    if (!next) break;
    time = next.at;
    next.done = true;
    next.callback();
    // The beat reads HEARTBEAT.md from disk before it posts.
    await vi.waitFor(() => expect(timers.some((timer) => !timer.done)).toBe(true));
  }
  time = target;
}

function heartbeat(overrides: Partial<HeartbeatOptions> = {}) {
  return createHeartbeat({
    intervalMinutes: 30,
    dailyCap: 10,
    targetSessionKey: "telegram:42",
    workspace,
    publishSystem: async (sessionKey, content) => {
      posted.push({ sessionKey, content });
    },
    now: () => time,
    setTimer,
    ...overrides,
  });
}

beforeEach(() => {
  workspace = mkdtempSync(join(tmpdir(), "countbot-heartbeat-"));
  writeFileSync(join(workspace, "HEARTBEAT.md"), "- Remind me of the dentist on Friday.\n");
  time = Date.parse("2025-06-02T10:00:00.000Z");
  timers = [];
  posted = [];
});

afterEach(() => {
  rmSync(workspace, { recursive: true, force: true });
});

describe("heartbeat", () => {
  it("posts a system prompt into the target session every interval until stopped", async () => {
    const beats = heartbeat();
    beats.start();
    await advance(29 * 60_000);
    expect(posted).toEqual([]);
    await advance(60_000);
    await advance(30 * 60_000);
    expect(posted).toHaveLength(2);
    expect(posted[0]?.sessionKey).toBe("telegram:42");
    expect(posted[0]?.content).toContain("HEARTBEAT.md");
    expect(posted[0]?.content).toContain(`reply with exactly ${HEARTBEAT_OK}`);
    expect(isHeartbeatPrompt(posted[0]?.content ?? "")).toBe(true);
    beats.stop();
    await advance(120 * 60_000);
    expect(posted).toHaveLength(2);
  });

  it("skips the quiet hours, across midnight in their time zone", async () => {
    const beats = heartbeat({ quietHours: { start: "22:00", end: "08:00", timezone: "Europe/Berlin" } });
    // Berlin is UTC+2 in June.
    time = Date.parse("2025-06-02T20:30:00Z"); // 22:30
    await expect(beats.beat()).resolves.toBe("quiet-hours");
    time = Date.parse("2025-06-02T23:00:00Z"); // 01:00
    await expect(beats.beat()).resolves.toBe("quiet-hours");
    time = Date.parse("2025-06-03T05:59:00Z"); // 07:59
    await expect(beats.beat()).resolves.toBe("quiet-hours");
    expect(posted).toEqual([]);
    time = Date.parse("2025-06-03T06:00:00Z"); // 08:00
    await expect(beats.beat()).resolves.toBe("posted");
    time = Date.parse("2025-06-03T19:59:00Z"); // 21:59
    await expect(beats.beat()).resolves.toBe("posted");
    expect(posted).toHaveLength(2);
  });

  it("stops for the day once the cap of delivered messages is reached; silent replies do not count", async () => {
    const beats = heartbeat({ dailyCap: 2, quietHours: { start: "23:00", end: "06:00", timezone: "Asia/Shanghai" } });
    await expect(beats.beat()).resolves.toBe("posted");
    // The agent answered HEARTBEAT_OK: nothing delivered.
    await expect(beats.beat()).resolves.toBe("posted");
    beats.recordDelivered();
    await expect(beats.beat()).resolves.toBe("posted");
    beats.recordDelivered();
    expect(beats.deliveredToday()).toBe(2);
    await expect(beats.beat()).resolves.toBe("daily-cap");
    expect(posted).toHaveLength(3);
    // The day turns at midnight in Shanghai (16:00 UTC).
    time = Date.parse("2025-06-02T14:59:00Z"); // 22:59 in Shanghai
    await expect(beats.beat()).resolves.toBe("daily-cap");
    time = Date.parse("2025-06-03T00:00:00Z"); // 08:00 in Shanghai
    expect(beats.deliveredToday()).toBe(0);
    await expect(beats.beat()).resolves.toBe("posted");
  });

  it("counts deliveries in a shared counter, so a worker that answered counts toward the beating one's cap", async () => {
    const counts = new Map<string, number>();
    const counter = {
      increment: async (day: string) => void counts.set(day, (counts.get(day) ?? 0) + 1),
      get: async (day: string) => counts.get(day) ?? 0,
    };
    const beating = heartbeat({ dailyCap: 1, counter });
    const answering = heartbeat({ dailyCap: 1, counter });
    await expect(beating.beat()).resolves.toBe("posted");
    answering.recordDelivered();
    await new Promise((resolve) => setImmediate(resolve));
    await expect(beating.beat()).resolves.toBe("daily-cap");
  });

  it("skips a beat when HEARTBEAT.md is missing or blank", async () => {
    const beats = heartbeat();
    rmSync(join(workspace, "HEARTBEAT.md"));
    await expect(beats.beat()).resolves.toBe("no-file");
    writeFileSync(join(workspace, "HEARTBEAT.md"), "  \n\n");
    await expect(beats.beat()).resolves.toBe("no-file");
    expect(posted).toEqual([]);
    writeFileSync(join(workspace, "HEARTBEAT.md"), "Check the build.");
    await expect(beats.beat()).resolves.toBe("posted");
  });

  it("keeps beating when posting fails", async () => {
    let attempts = 0;
    const beats = heartbeat({
      publishSystem: async () => {
        attempts += 1;
        throw new Error("bus closed");
      },
    });
    beats.start();
    await advance(60 * 60_000);
    expect(attempts).toBe(2);
    beats.stop();
  });
});

describe("isSilentHeartbeatReply", () => {
  it("recognizes HEARTBEAT_OK alone, as models write it", () => {
    for (const reply of ["HEARTBEAT_OK", "  HEARTBEAT_OK\n", "**HEARTBEAT_OK**", "`HEARTBEAT_OK`", "HEARTBEAT_OK."]) {
      expect(isSilentHeartbeatReply(reply)).toBe(true);
    }
    for (const reply of ["", "OK", "heartbeat ok", "HEARTBEAT_OK — but the build is red", "The build is red. HEARTBEAT_OK"]) {
      expect(isSilentHeartbeatReply(reply)).toBe(false);
    }
  });
});
