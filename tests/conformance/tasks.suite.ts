/**
 * The TaskStore conformance suite: the file store and the Redis store run it unchanged.
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { SubagentTask } from "../../src/store/task-record.js";
import type { TaskStore } from "../../src/store/store.js";

export interface TaskStoreHarness {
  tasks: TaskStore;
  close: () => Promise<void>;
  cleanup: () => Promise<void>;
  /** A new store over the same backing storage, as after a restart. */
  reopen?: () => Promise<{ tasks: TaskStore; close: () => Promise<void> }>;
}

const START = 1_700_000_000_000;
const HOUR = 60 * 60 * 1000;

function task(id: string, overrides: Partial<SubagentTask> = {}): SubagentTask {
  return {
    id,
    label: `label ${id}`,
    task: `do ${id}`,
    sessionKey: "telegram:1",
    status: "pending",
    progress: 0,
    toolCalls: [],
    createdAt: START,
    attempts: 0,
    ...overrides,
  };
}

export function runTaskStoreSuite(name: string, makeStore: () => Promise<TaskStoreHarness>): void {
  describe(`TaskStore conformance: ${name}`, () => {
    let harness: TaskStoreHarness;
    const reopened: Array<() => Promise<void>> = [];

    beforeEach(async () => {
      harness = await makeStore();
    });

    afterEach(async () => {
      for (const close of reopened.splice(0)) await close();
      await harness.close();
      await harness.cleanup();
    });

    const tasks = () => harness.tasks;

    it("creates a task and gets it back with every field; an unknown id is undefined", async () => {
      const full = task("a", {
        status: "completed",
        progress: 100,
        result: "done: ünïcödé, \"quotes\" and\nnewlines",
        error: undefined,
        startedAt: START + 1,
        completedAt: START + 2,
        attempts: 2,
        toolCalls: [{ name: "exec", success: true, durationMs: 12, arguments: '{"command":"ls"}', result: "a\nb" }],
      });
      await tasks().create(full);
      await tasks().create(task("b"));
      const { error: _unset, ...expected } = full;
      expect(await tasks().get("a")).toEqual(expected);
      expect(await tasks().get("b")).toEqual(task("b"));
      expect(await tasks().get("missing")).toBeUndefined();
    });

    it("refuses to create a task twice, keeping the first", async () => {
      await tasks().create(task("a"));
      await expect(tasks().create(task("a", { label: "other" }))).rejects.toThrow(/exists/);
      expect((await tasks().get("a"))?.label).toBe("label a");
      expect((await tasks().stats()).total).toBe(1);
    });

    it("rejects a task it could not read back", async () => {
      await expect(tasks().create(task("bad", { progress: 150 }))).rejects.toThrow(/invalid task/);
      expect(await tasks().get("bad")).toBeUndefined();
    });

    it("updates without a guard, merging the patch and keeping the rest", async () => {
      await tasks().create(task("a"));
      const updated = await tasks().update("a", { status: "running", startedAt: START + 5, attempts: 1, result: undefined });
      expect(updated).toEqual(task("a", { status: "running", startedAt: START + 5, attempts: 1 }));
      expect(await tasks().get("a")).toEqual(updated);
      expect(await tasks().update("missing", { progress: 5 })).toBeUndefined();
      expect(await tasks().get("missing")).toBeUndefined();
    });

    it("applies an update only when the status is in `from`", async () => {
      await tasks().create(task("a"));
      expect(await tasks().update("a", { status: "running" }, ["pending"])).toMatchObject({ status: "running" });
      // A second claim from "pending" is refused: the task is running already.
      expect(await tasks().update("a", { status: "running", attempts: 9 }, ["pending"])).toBeUndefined();
      expect(await tasks().update("a", { status: "cancelled", completedAt: START + 9 }, ["pending", "running"])).toMatchObject({ status: "cancelled" });
      // The slow worker's completion must not overwrite the cancellation.
      expect(await tasks().update("a", { status: "completed", result: "late", progress: 100 }, ["running"])).toBeUndefined();
      expect(await tasks().update("a", { progress: 50 }, [])).toBeUndefined();
      expect(await tasks().get("a")).toEqual(task("a", { status: "cancelled", completedAt: START + 9 }));
      expect(await tasks().stats()).toMatchObject({ total: 1, running: 0, cancelled: 1 });
    });

    it("lets exactly one of many concurrent compare-and-sets win", async () => {
      await tasks().create(task("race", { status: "running" }));
      const outcomes = await Promise.all(
        Array.from({ length: 10 }, (_unused, index) =>
          tasks().update("race", index % 2 === 0 ? { status: "completed", result: `r${index}` } : { status: "cancelled" }, ["running"]),
        ),
      );
      const winners = outcomes.filter((outcome) => outcome !== undefined);
      expect(winners).toHaveLength(1);
      expect(await tasks().get("race")).toEqual(winners[0]);
    });

    it("rejects an invalid update and one that moves a task to another session or time", async () => {
      await tasks().create(task("a"));
      await expect(tasks().update("a", { progress: 101 })).rejects.toThrow(/invalid task update/);
      await expect(tasks().update("a", { status: "lost" as SubagentTask["status"] })).rejects.toThrow(/invalid task update/);
      await expect(tasks().update("a", { sessionKey: "web:2" })).rejects.toThrow(/cannot change/);
      await expect(tasks().update("a", { createdAt: START + 1 })).rejects.toThrow(/cannot change/);
      expect(await tasks().get("a")).toEqual(task("a"));
    });

    it("lists newest first, filtered by status and session, with a limit", async () => {
      await tasks().create(task("old", { createdAt: START }));
      await tasks().create(task("mid", { createdAt: START + 10, sessionKey: "web:2", status: "running" }));
      await tasks().create(task("new", { createdAt: START + 20, status: "running" }));
      await tasks().create(task("tie-a", { createdAt: START + 5 }));
      await tasks().create(task("tie-b", { createdAt: START + 5 }));
      const ids = (found: SubagentTask[]) => found.map((item) => item.id);

      expect(ids(await tasks().list())).toEqual(["new", "mid", "tie-b", "tie-a", "old"]);
      expect(ids(await tasks().list({ status: "running" }))).toEqual(["new", "mid"]);
      expect(ids(await tasks().list({ sessionKey: "telegram:1" }))).toEqual(["new", "tie-b", "tie-a", "old"]);
      expect(ids(await tasks().list({ sessionKey: "telegram:1", status: "running" }))).toEqual(["new"]);
      expect(ids(await tasks().list({ sessionKey: "web:2", status: "pending" }))).toEqual([]);
      expect(ids(await tasks().list({ sessionKey: "nobody" }))).toEqual([]);
      expect(ids(await tasks().list({ limit: 2 }))).toEqual(["new", "mid"]);
      expect(ids(await tasks().list({ sessionKey: "telegram:1", limit: 3 }))).toEqual(["new", "tie-b", "tie-a"]);

      // Status changes move a task between the status filters.
      await tasks().update("new", { status: "completed", completedAt: START + 30 }, ["running"]);
      expect(ids(await tasks().list({ status: "running" }))).toEqual(["mid"]);
      expect(ids(await tasks().list({ status: "completed" }))).toEqual(["new"]);
    });

    it("lists past one page of tasks", async () => {
      const count = 450;
      await Promise.all(Array.from({ length: count }, (_unused, index) => tasks().create(task(`t${String(index).padStart(3, "0")}`, { createdAt: START + index }))));
      const listed = await tasks().list({ status: "pending" });
      expect(listed).toHaveLength(count);
      expect(listed[0]!.id).toBe("t449");
      expect(listed.at(-1)!.id).toBe("t000");
      expect((await tasks().list({ limit: 301 })).map((item) => item.id).slice(-1)).toEqual(["t149"]);
    });

    it("deletes a task, once", async () => {
      await tasks().create(task("a", { status: "running" }));
      await tasks().create(task("b"));
      expect(await tasks().delete("a")).toBe(true);
      expect(await tasks().delete("a")).toBe(false);
      expect(await tasks().delete("missing")).toBe(false);
      expect(await tasks().get("a")).toBeUndefined();
      expect((await tasks().list()).map((item) => item.id)).toEqual(["b"]);
      expect(await tasks().list({ status: "running" })).toEqual([]);
      expect(await tasks().stats()).toEqual({ total: 1, pending: 1, running: 0, completed: 0, failed: 0, cancelled: 0 });
      // The id is free again.
      await tasks().create(task("a", { sessionKey: "web:9" }));
      expect((await tasks().list({ sessionKey: "web:9" })).map((item) => item.id)).toEqual(["a"]);
      expect(await tasks().list({ sessionKey: "telegram:1", status: "running" })).toEqual([]);
    });

    it("counts tasks by status", async () => {
      expect(await tasks().stats()).toEqual({ total: 0, pending: 0, running: 0, completed: 0, failed: 0, cancelled: 0 });
      const statuses: SubagentTask["status"][] = ["pending", "running", "running", "completed", "completed", "completed", "failed", "cancelled"];
      await Promise.all(statuses.map((status, index) => tasks().create(task(`s${index}`, { status }))));
      expect(await tasks().stats()).toEqual({ total: 8, pending: 1, running: 2, completed: 3, failed: 1, cancelled: 1 });
    });

    it("cleans up finished tasks that completed before the cut-off, and nothing else", async () => {
      const cutoff = START + 24 * HOUR;
      await tasks().create(task("old-completed", { status: "completed", completedAt: cutoff - 1 }));
      await tasks().create(task("old-failed", { status: "failed", completedAt: START + HOUR }));
      await tasks().create(task("old-cancelled", { status: "cancelled", completedAt: START }));
      await tasks().create(task("recent-completed", { status: "completed", completedAt: cutoff }));
      await tasks().create(task("created-old-finished-late", { status: "failed", completedAt: cutoff + HOUR }));
      await tasks().create(task("old-running", { status: "running", startedAt: START }));
      await tasks().create(task("old-pending"));

      expect(await tasks().cleanup(cutoff)).toBe(3);
      expect((await tasks().list()).map((item) => item.id).sort()).toEqual(["created-old-finished-late", "old-pending", "old-running", "recent-completed"]);
      expect(await tasks().stats()).toEqual({ total: 4, pending: 1, running: 1, completed: 1, failed: 1, cancelled: 0 });
      expect(await tasks().cleanup(cutoff)).toBe(0);
    });

    it("keeps tasks across a restart", async () => {
      if (!harness.reopen) return;
      await tasks().create(task("durable", { status: "running", progress: 35 }));
      const reopenedStore = await harness.reopen();
      reopened.push(reopenedStore.close);
      expect(await reopenedStore.tasks.get("durable")).toEqual(task("durable", { status: "running", progress: 35 }));
      expect(await reopenedStore.tasks.update("durable", { status: "completed", progress: 100 }, ["running"])).toMatchObject({ status: "completed" });
      expect(await tasks().get("durable")).toMatchObject({ status: "completed", progress: 100 });
    });

    it("refuses work after close", async () => {
      await harness.close();
      await expect(tasks().create(task("late"))).rejects.toThrow(/closed/);
      await expect(tasks().list()).rejects.toThrow(/closed/);
    });
  });
}
