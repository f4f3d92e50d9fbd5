/**
 * The SessionStore conformance suite: every Store implementation (file, Redis) runs it unchanged.
 * A harness may expose what the contract has no method for (reading the archive, reopening the
 * same backing storage); those checks run only when it does.
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { BusError } from "../../src/errors.js";
import type { HistoryEntry, Store } from "../../src/store/store.js";

export interface SessionStoreHarness {
  store: Store;
  cleanup: () => Promise<void>;
  /** Everything archived for a key by `compact` and `reset`, oldest first. */
  archived?: (key: string) => Promise<HistoryEntry[]>;
  /** A new Store over the same backing storage, as after a restart. */
  reopen?: () => Promise<Store>;
  /** What the bus does on a claim: `token` becomes the current holder of the session's lease, live for the whole test. */
  grantLease: (key: string, token: number) => Promise<void>;
}

export interface SessionStoreHarnessOptions {
  /** The clock the store must use, so timestamps can be asserted. */
  now: () => number;
}

const START = 1_700_000_000_000;

function entry(content: string, role: HistoryEntry["role"] = "user", at = START): HistoryEntry {
  return { role, content, at };
}

export function runSessionStoreSuite(
  name: string,
  makeStore: (options: SessionStoreHarnessOptions) => Promise<SessionStoreHarness>,
): void {
  describe(`SessionStore conformance: ${name}`, () => {
    let harness: SessionStoreHarness;
    let clock: number;
    const reopened: Store[] = [];

    beforeEach(async () => {
      clock = START;
      // Each read of the clock moves it on, so every write gets a distinct, predictable time.
      harness = await makeStore({ now: () => (clock += 1000) });
    });

    afterEach(async () => {
      for (const store of reopened.splice(0)) await store.close();
      await harness.store.close();
      await harness.cleanup();
    });

    const sessions = () => harness.store.sessions;

    async function expectLeaseLost(write: Promise<void>): Promise<void> {
      const error = await write.then(
        () => undefined,
        (reason: unknown) => reason,
      );
      expect(error).toBeInstanceOf(BusError);
      expect((error as BusError).code).toBe("lease-lost");
    }

    /** What a refused write must leave exactly as it was. */
    async function observe(key: string) {
      return { snapshot: await sessions().load(key), list: await sessions().list(), archived: await harness.archived?.(key) };
    }

    it("returns an empty generation-0 session for an unknown key and does not persist it", async () => {
      const snapshot = await sessions().load("telegram:-100123");
      expect(snapshot.history).toEqual([]);
      expect(snapshot.meta.key).toBe("telegram:-100123");
      expect(snapshot.meta.generation).toBe(0);
      expect(await sessions().list()).toEqual([]);
    });

    it("loads appended entries in order, with every field, across several appends", async () => {
      const first = [
        { role: "user", content: "hello", at: START + 1, messageIds: ["m1", "m2"] },
        { role: "assistant", content: "hi! ünïcödé ✓\nsecond line", at: START + 2 },
      ] satisfies HistoryEntry[];
      const second = [entry("how are you?", "user", START + 3), entry("fine", "assistant", START + 4)];
      await sessions().append("cli:direct", first);
      await sessions().append("cli:direct", second);
      await sessions().append("cli:other", [entry("elsewhere")]);

      const snapshot = await sessions().load("cli:direct");
      expect(snapshot.history).toEqual([...first, ...second]);
      expect(snapshot.meta.generation).toBe(0);
      expect(snapshot.meta.updatedAt).toBeGreaterThan(snapshot.meta.createdAt);
      expect((await sessions().load("cli:other")).history).toEqual([entry("elsewhere")]);
    });

    it("compacts to exactly `keep`, archives what was dropped, and appends after it", async () => {
      const history = ["one", "two", "three", "four", "five"].map((content, index) => entry(content, "user", START + index));
      await sessions().append("web:abc", history);
      const keep = history.slice(3);
      await sessions().compact("web:abc", keep);

      expect((await sessions().load("web:abc")).history).toEqual(keep);
      if (harness.archived) expect(await harness.archived("web:abc")).toEqual(history.slice(0, 3));

      await sessions().append("web:abc", [entry("six")]);
      expect((await sessions().load("web:abc")).history).toEqual([...keep, entry("six")]);
      expect((await sessions().load("web:abc")).meta.generation).toBe(0);
    });

    it("compacts to a history that starts with a new summary entry", async () => {
      const history = [entry("a"), entry("b", "assistant"), entry("c")];
      await sessions().append("web:summary", history);
      const keep = [entry("[summary] a and b", "assistant", START + 10), history[2]!];
      await sessions().compact("web:summary", keep);
      expect((await sessions().load("web:summary")).history).toEqual(keep);
      if (harness.archived) expect(await harness.archived("web:summary")).toEqual(history.slice(0, 2));
    });

    it("refuses a compaction from a stale token once a newer token has written, leaving history and archive alone", async () => {
      const history = ["one", "two", "three", "four"].map((content, index) => entry(content, "user", START + index));
      await harness.grantLease("web:fenced", 7);
      await sessions().append("web:fenced", history.slice(0, 3), { token: 7 });
      // The lease expired and another worker claimed the session and wrote its turn.
      await harness.grantLease("web:fenced", 8);
      await sessions().append("web:fenced", history.slice(3), { token: 8 });
      const before = await observe("web:fenced");
      expect(before.snapshot.history).toEqual(history);

      // The first worker, not knowing, compacts what it summarized.
      await expectLeaseLost(sessions().compact("web:fenced", history.slice(2, 3), { token: 7 }));
      expect(await observe("web:fenced")).toEqual(before);

      await sessions().compact("web:fenced", history.slice(2), { token: 8 });
      expect((await sessions().load("web:fenced")).history).toEqual(history.slice(2));
      if (harness.archived) expect(await harness.archived("web:fenced")).toEqual(history.slice(0, 2));
    });

    it("writes with a fence while its token holds the lease", async () => {
      await harness.grantLease("telegram:held", 3);
      await sessions().append("telegram:held", [entry("one"), entry("two", "assistant")], { token: 3 });
      await sessions().append("telegram:held", [], { token: 3 });
      await sessions().compact("telegram:held", [entry("two", "assistant")], { token: 3 });
      expect((await sessions().load("telegram:held")).history).toEqual([entry("two", "assistant")]);
      await sessions().reset("telegram:held", { token: 3 });
      expect(await sessions().load("telegram:held")).toMatchObject({ history: [], meta: { generation: 1 } });
    });

    it("refuses a fenced append from a stale token and writes nothing, even an empty one", async () => {
      await harness.grantLease("telegram:stale", 7);
      await sessions().append("telegram:stale", [entry("before")], { token: 7 });
      await harness.grantLease("telegram:stale", 8);
      const before = await observe("telegram:stale");
      await expectLeaseLost(sessions().append("telegram:stale", [entry("zombie")], { token: 7 }));
      await expectLeaseLost(sessions().append("telegram:stale", [], { token: 7 }));
      expect(await observe("telegram:stale")).toEqual(before);
    });

    it("refuses fenced writes to a session nobody holds a lease on, creating nothing", async () => {
      await expectLeaseLost(sessions().append("telegram:unleased", [entry("unleased")], { token: 1 }));
      await expectLeaseLost(sessions().compact("telegram:unleased", [entry("unleased")], { token: 1 }));
      await expectLeaseLost(sessions().reset("telegram:unleased", { token: 1 }));
      expect(await sessions().list()).toEqual([]);
      if (harness.archived) expect(await harness.archived("telegram:unleased")).toEqual([]);
    });

    it("fences /new like a write: a stale token cannot reset the session", async () => {
      await sessions().append("web:renewed", [entry("keep me")]);
      await harness.grantLease("web:renewed", 9);
      const before = await observe("web:renewed");
      await expectLeaseLost(sessions().reset("web:renewed", { token: 8 }));
      expect(await observe("web:renewed")).toEqual(before);
      await sessions().reset("web:renewed", { token: 9 });
      expect((await sessions().load("web:renewed")).history).toEqual([]);
    });

    it("recognizes a kept entry whatever the key order of the object passed", async () => {
      const stored: HistoryEntry[] = [
        { role: "user", content: "question", at: 1, messageIds: ["m1"] },
        { role: "assistant", content: "answer", at: 2, usage: { inputTokens: 10, outputTokens: 3 }, model: "openai/gpt-4o-mini" },
      ];
      await sessions().append("cli:order", stored);
      const reordered = [
        { usage: { outputTokens: 3, inputTokens: 10 }, model: "openai/gpt-4o-mini", at: 2, content: "answer", role: "assistant" },
      ] as HistoryEntry[];
      await sessions().compact("cli:order", reordered);
      expect((await sessions().load("cli:order")).history).toEqual([stored[1]]);
      if (harness.archived) expect(await harness.archived("cli:order")).toEqual([stored[0]]);
    });

    it("keeps what the history-entry schema knows and drops what it does not", async () => {
      const usage = { inputTokens: 10, outputTokens: 3, cachedInputTokens: 8, reasoningTokens: 1 };
      const written = { role: "assistant", content: "answer", at: 2, usage: { ...usage, costUsd: 0.1 }, model: "m", debug: "x" } as HistoryEntry;
      await sessions().append("cli:schema", [written]);
      expect((await sessions().load("cli:schema")).history).toStrictEqual([{ role: "assistant", content: "answer", at: 2, usage, model: "m" }]);
    });

    it("resets to an empty history, bumps the generation and archives the old history", async () => {
      const history = [entry("before"), entry("reply", "assistant")];
      await sessions().append("discord:42", history);
      await sessions().reset("discord:42");

      const afterReset = await sessions().load("discord:42");
      expect(afterReset.history).toEqual([]);
      expect(afterReset.meta.generation).toBe(1);
      if (harness.archived) expect(await harness.archived("discord:42")).toEqual(history);

      await sessions().append("discord:42", [entry("after")]);
      await sessions().reset("discord:42");
      const afterSecond = await sessions().load("discord:42");
      expect(afterSecond.meta.generation).toBe(2);
      expect(afterSecond.history).toEqual([]);
      if (harness.archived) expect(await harness.archived("discord:42")).toEqual([...history, entry("after")]);
    });

    it("resets an unknown key to generation 1 and lists it", async () => {
      await sessions().reset("feishu:oc_new");
      const snapshot = await sessions().load("feishu:oc_new");
      expect(snapshot.history).toEqual([]);
      expect(snapshot.meta.generation).toBe(1);
      expect((await sessions().list()).map((meta) => meta.key)).toEqual(["feishu:oc_new"]);
    });

    it("lists the meta of every stored session", async () => {
      await sessions().append("telegram:1", [entry("x")]);
      await sessions().append("telegram:2", [entry("y")]);
      await sessions().reset("telegram:2");
      await sessions().load("telegram:never-written");

      const metas = await sessions().list();
      const byKey = new Map(metas.map((meta) => [meta.key, meta]));
      expect([...byKey.keys()].sort()).toEqual(["telegram:1", "telegram:2"]);
      expect(byKey.get("telegram:1")?.generation).toBe(0);
      expect(byKey.get("telegram:2")?.generation).toBe(1);
      for (const meta of metas) {
        expect(meta.createdAt).toBeGreaterThan(START);
        expect(meta.updatedAt).toBeGreaterThanOrEqual(meta.createdAt);
      }
    });

    it("moves updatedAt forward on every write", async () => {
      await sessions().append("cli:clock", [entry("one")]);
      const [created] = await sessions().list();
      await sessions().append("cli:clock", [entry("two")]);
      const [appended] = await sessions().list();
      await sessions().compact("cli:clock", [entry("two")]);
      const [compacted] = await sessions().list();
      expect(appended!.updatedAt).toBeGreaterThan(created!.updatedAt);
      expect(compacted!.updatedAt).toBeGreaterThan(appended!.updatedAt);
      expect(compacted!.createdAt).toBe(created!.createdAt);
      expect((await sessions().load("cli:clock")).meta).toEqual(compacted);
    });

    it("keeps keys with odd characters apart and returns them unchanged", async () => {
      const keys = [
        "a:b",
        "a_b",
        "a%3Ab",
        "A:b",
        "../../x",
        "..",
        ".",
        "/etc/passwd",
        "..\\..\\windows",
        "with space:and\ttab",
        "emoji:🦀",
        "中文:聊天",
        "telegram:-100123",
        `long:${"z".repeat(300)}`,
        `long:${"z".repeat(299)}y`,
      ];
      for (const [index, key] of keys.entries()) await sessions().append(key, [entry(`content ${index}`)]);
      for (const [index, key] of keys.entries()) {
        const snapshot = await sessions().load(key);
        expect(snapshot.meta.key).toBe(key);
        expect(snapshot.history).toEqual([entry(`content ${index}`)]);
      }
      expect((await sessions().list()).map((meta) => meta.key).sort()).toEqual([...keys].sort());
    });

    it("stores every one of many concurrent appends to one key, in the order they were called", async () => {
      const count = 200;
      await Promise.all(
        Array.from({ length: count }, (_unused, index) =>
          sessions().append("telegram:busy", [entry(`message ${index}`), entry(`reply ${index}`, "assistant")]),
        ),
      );
      const contents = (await sessions().load("telegram:busy")).history.map((item) => item.content);
      expect(contents).toEqual(Array.from({ length: count }, (_unused, index) => [`message ${index}`, `reply ${index}`]).flat());
    });

    it("keeps concurrent writes to different keys apart", async () => {
      const keys = ["k:1", "k:2", "k:3", "k:4"];
      await Promise.all(
        Array.from({ length: 25 }, (_unused, round) => keys.map((key) => sessions().append(key, [entry(`${key} ${round}`)]))).flat(),
      );
      for (const key of keys) {
        const contents = (await sessions().load(key)).history.map((item) => item.content);
        expect(contents).toEqual(Array.from({ length: 25 }, (_unused, round) => `${key} ${round}`));
      }
    });

    it("keeps everything across a restart", async () => {
      if (!harness.reopen) return;
      await sessions().append("cli:durable", [entry("one"), entry("two", "assistant")]);
      await sessions().reset("cli:other");
      const before = await sessions().list();
      await harness.store.close();
      const store = await harness.reopen();
      reopened.push(store);
      harness = { ...harness, store: { ...store, close: async () => {} } };
      expect((await store.sessions.load("cli:durable")).history).toEqual([entry("one"), entry("two", "assistant")]);
      expect(await store.sessions.list()).toEqual(before);
    });
  });
}
