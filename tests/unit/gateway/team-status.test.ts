/** The team status message: one per run, edited in place, paced, never wound back, settled at the end. */
import { describe, expect, it } from "vitest";
import pino from "pino";
import type { OutboundMessage } from "../../../src/bus/message.js";
import { ChannelError } from "../../../src/errors.js";
import { stripInternalMarkers } from "../../../src/gateway/internal-markers.js";
import { type RunProgress, createTeamStatus, renderStatus } from "../../../src/gateway/team-status.js";

const logger = pino({ level: "silent" });

interface Call {
  op: "send" | "edit";
  chatId: string;
  id: string;
  text: string;
  replyTo?: string;
}

function fakePlatform() {
  const calls: Call[] = [];
  const recorded = new Map<string, string>();
  let sent = 0;
  let failNext: ChannelError | undefined;
  const adapter = {
    name: "fake",
    capabilities: { maxMessageLength: 2000, markdown: "plain" as const, streaming: "edit" as const, draftIntervalMs: 1_000, minSendIntervalMs: 0 },
    async send(chatId: string, text: string, options: { replyTo?: string }) {
      if (failNext) throw [failNext, (failNext = undefined)][0];
      sent += 1;
      calls.push({ op: "send", chatId, id: `m${sent}`, text, ...(options.replyTo ? { replyTo: options.replyTo } : {}) });
      return { platformMessageId: `m${sent}` };
    },
    async edit(chatId: string, id: string, text: string) {
      if (failNext) throw [failNext, (failNext = undefined)][0];
      calls.push({ op: "edit", chatId, id, text });
    },
  };
  const bus = {
    recordDraftMessage: async (_channel: string, replyId: string, id: string) => void recorded.set(replyId, id),
    draftMessageOf: async (_channel: string, replyId: string) => recorded.get(replyId),
  };
  return { calls, adapter, bus, recorded, fail: (error: ChannelError) => (failNext = error) };
}

const START = 1_000_000;
function progress(statuses: string[], run = "running", extra: Partial<RunProgress> = {}): RunProgress {
  return {
    id: "wf-1",
    team: "Crew",
    status: run,
    createdAt: START,
    replyTo: "trigger-1",
    agents: statuses.map((status, index) => ({
      id: `a${index}`,
      label: `Agent ${index} (a${index})`,
      status,
      ...(status === "pending" ? {} : { startedAt: START + 1_000 }),
      ...(["completed", "failed"].includes(status) ? { completedAt: START + 4_000 } : {}),
    })),
    ...extra,
  };
}
function notice(run: RunProgress, chatId = "chat"): OutboundMessage {
  return { id: `n-${Math.random()}`, channel: "fake", chatId, content: "line", kind: "notice", media: [], metadata: { workflow: { runId: run.id, run } } };
}

describe("team status message", () => {
  it("posts one message threaded to the trigger and edits it through each agent's states", async () => {
    const platform = fakePlatform();
    const status = createTeamStatus({ ...platform, logger, intervalMs: 0, now: () => START + 5_000, inLane: (_chat, call) => call() });
    const states = [progress(["pending", "pending"]), progress(["running", "pending"]), progress(["completed", "running"]), progress(["completed", "failed"], "completed", { completedAt: START + 9_000 })];
    for (const state of states) {
      expect(status.take(notice(state))).toBe(true);
      await status.idle();
    }
    expect(platform.calls.map((call) => call.op)).toEqual(["send", "edit", "edit", "edit"]);
    expect(platform.calls[0]).toMatchObject({ replyTo: "trigger-1", chatId: "chat" });
    expect(new Set(platform.calls.map((call) => call.id))).toEqual(new Set(["m1"]));
    expect(platform.calls.at(-1)!.text).toBe("Team [Crew] · done · 9 s\n✅ done · Agent 0 (a0) · 3 s\n❌ failed · Agent 1 (a1) · 3 s");
    // The message's id is on the bus, for a gateway that takes over.
    expect(platform.recorded.get("team-status:wf-1")).toBe("m1");
  });

  it("leaves other notices and messages to the dispatcher", () => {
    const platform = fakePlatform();
    const status = createTeamStatus({ ...platform, logger, inLane: (_chat, call) => call() });
    expect(status.take({ ...notice(progress(["pending"])), kind: "final" })).toBe(false);
    expect(status.take({ ...notice(progress(["pending"])), metadata: { tool: "read_file" } })).toBe(false);
    expect(status.take({ ...notice(progress(["pending"])), metadata: { workflow: { runId: "wf-1", event: "node-chunk", text: "…" } } })).toBe(false);
  });

  it("shows only the newest state after a wait, and never winds back to an older one", async () => {
    const platform = fakePlatform();
    let release!: () => void;
    const waits: number[] = [];
    const sleep = (ms: number) => {
      waits.push(ms);
      return new Promise<void>((resolve) => (release = resolve));
    };
    let clock = START;
    const status = createTeamStatus({ ...platform, logger, intervalMs: 2_000, now: () => clock, sleep, inLane: (_chat, call) => call() });
    status.take(notice(progress(["pending", "pending"])));
    await new Promise((resolve) => setImmediate(resolve));
    expect(platform.calls.map((call) => call.op)).toEqual(["send"]);
    clock += 500;
    status.take(notice(progress(["running", "pending"])));
    status.take(notice(progress(["completed", "running"])));
    // A late notice of an earlier state (another worker's) does not wind the message back.
    status.take(notice(progress(["running", "pending"])));
    await new Promise((resolve) => setImmediate(resolve));
    expect(waits).toEqual([1_500]);
    release();
    await status.idle();
    expect(platform.calls.map((call) => [call.op, call.text.split("\n").slice(1).join(" | ")])).toEqual([
      ["send", "⏸ waiting · Agent 0 (a0) | ⏸ waiting · Agent 1 (a1)"],
      ["edit", "✅ done · Agent 0 (a0) · 3 s | ⏳ running · Agent 1 (a1) · 0 s"],
    ]);
  });

  it("waits out a rate limit and posts a new message when the old one was deleted", async () => {
    const platform = fakePlatform();
    const waits: number[] = [];
    const status = createTeamStatus({ ...platform, logger, intervalMs: 0, now: () => START, sleep: async (ms) => void waits.push(ms), inLane: (_chat, call) => call() });
    status.take(notice(progress(["pending"])));
    await status.idle();
    platform.fail(new ChannelError("slow down", "fake", { kind: "rate-limit", retryAfterMs: 3_000 }));
    status.take(notice(progress(["running"])));
    await status.idle();
    expect(waits).toContain(3_000);
    expect(platform.calls.map((call) => call.op)).toEqual(["send", "edit"]);
    platform.fail(new ChannelError("gone", "fake", { kind: "not-found" }));
    status.take(notice(progress(["completed"], "completed")));
    await status.idle();
    expect(platform.calls.map((call) => [call.op, call.id])).toEqual([
      ["send", "m1"],
      ["edit", "m1"],
      ["send", "m2"],
    ]);
  });

  it("waits for room in the platform's budgets, then shows the newest state", async () => {
    const platform = fakePlatform();
    const asked: string[] = [];
    let room = false;
    const waits: number[] = [];
    const status = createTeamStatus({
      ...platform,
      logger,
      intervalMs: 1_000,
      now: () => START,
      sleep: async (ms) => void waits.push(ms),
      inLane: (_chat, call) => call(),
      budget: async (call) => {
        asked.push(call.call);
        const answer = room;
        room = true; // the next try finds room
        return answer;
      },
    });
    status.take(notice(progress(["running"])));
    await status.idle();
    expect(asked).toEqual(["send", "send"]);
    expect(waits).toEqual([1_000]);
    expect(platform.calls.map((call) => call.op)).toEqual(["send"]);
  });

  it("renders waiting, running and settled agents with their times", () => {
    const text = renderStatus(progress(["pending", "running", "skipped", "upstream-failed", "cancelled"]), START + 65_000);
    expect(text.split("\n")).toEqual([
      "Team [Crew] · running · 1 min 5 s",
      "⏸ waiting · Agent 0 (a0)",
      "⏳ running · Agent 1 (a1) · 1 min 4 s",
      "⏭ skipped · Agent 2 (a2) · 0 s",
      "❌ not run (an agent it needs failed) · Agent 3 (a3) · 0 s",
      "⛔ cancelled · Agent 4 (a4) · 0 s",
    ]);
  });
});

describe("internal markers", () => {
  it("strips the workflow metadata and any HTML comment from what a platform gets", () => {
    const result = "Team done.\n\nResult:\nall good <!-- note to self -->\n\n<!-- WORKFLOW_EXECUTION_METADATA\nrun: wf-1\nmode: graph\n-->";
    expect(stripInternalMarkers(result)).toBe("Team done.\n\nResult:\nall good");
    // A draft cut mid-comment shows nothing of it.
    expect(stripInternalMarkers("Almost there\n<!-- WORKFLOW_EXEC")).toBe("Almost there");
  });

  it("keeps a comment inside code, where the user may have asked for it, but not a marker", () => {
    const html = "Here:\n```html\n<!-- a header -->\n<h1>Hi</h1>\n<!-- WORKFLOW_EXECUTION_METADATA run: x -->\n```\nand `<!-- inline -->`";
    expect(stripInternalMarkers(html)).toBe("Here:\n```html\n<!-- a header -->\n<h1>Hi</h1>\n\n```\nand `<!-- inline -->`");
    expect(stripInternalMarkers("no comment at all  ")).toBe("no comment at all  ");
  });
});
