import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { type MemoryStore, createFileMemoryStore } from "../../../src/memory/memory.js";
import { compactHistory } from "../../../src/agent/summarizer.js";
import { BusError, ProviderError } from "../../../src/errors.js";
import { createFileStore } from "../../../src/store/file-store.js";
import type { HistoryEntry, Store } from "../../../src/store/store.js";
import { scriptedModel } from "../../support/scripted-model.js";

let root: string;
let store: Store;
let memory: MemoryStore;
const key = "test:a";

beforeEach(async () => {
  root = await mkdtemp(path.join(tmpdir(), "countbot-summary-"));
  store = createFileStore({ dataDir: path.join(root, "data") });
  memory = createFileMemoryStore({ workspace: path.join(root, "workspace"), scope: "chat" });
});
afterEach(async () => {
  await store.close();
  await rm(root, { recursive: true, force: true });
});

function conversation(turns: number): HistoryEntry[] {
  return Array.from({ length: turns }, (_, index) => [
    { role: "user" as const, content: `question ${index}`, at: index },
    { role: "assistant" as const, content: `answer ${index}`, at: index },
  ]).flat();
}

async function seed(entries: HistoryEntry[]): Promise<void> {
  await store.sessions.append(key, entries);
}

function compact(model: ReturnType<typeof scriptedModel>, history: HistoryEntry[], maxHistory: number, warnings: string[] = []) {
  return compactHistory({
    model,
    sessions: store.sessions,
    remember: (summary) => memory.append(key, summary),
    sessionKey: key,
    history,
    maxHistory,
    onWarning: (message) => warnings.push(message),
  });
}

describe("compactHistory", () => {
  it("leaves a history within the limit alone and calls no model", async () => {
    const model = scriptedModel([]);
    const history = conversation(3);
    expect(await compact(model, history, 10)).toBe(history);
    expect(model.requests).toHaveLength(0);
  });

  it("summarizes the overflow into memory and keeps the newest half, starting at a user message", async () => {
    const history = conversation(6);
    await seed(history);
    const model = scriptedModel([{ text: "- the user asked questions 0 to 3" }]);
    const kept = await compact(model, history, 5);
    expect(kept[0]!.role).toBe("user");
    expect(kept.length).toBeLessThanOrEqual(3);
    expect(kept.at(-1)!.content).toBe("answer 5");
    const prompt = model.requests[0]!.messages.at(-1)!;
    expect(JSON.stringify(prompt)).toContain("question 0");
    expect(JSON.stringify(prompt)).not.toContain("answer 5");
    expect(await memory.read(key)).toContain("the user asked questions 0 to 3");
    expect((await store.sessions.load(key)).history.map((entry) => entry.content)).toEqual(kept.map((entry) => entry.content));
  });

  it("falls back to a plain extract when the model cannot summarize, and still compacts", async () => {
    const history = conversation(6);
    await seed(history);
    const down = new ProviderError("service unavailable", { kind: "server", status: 503 });
    const model = scriptedModel(() => ({ error: down }));
    const warnings: string[] = [];
    const kept = await compact(model, history, 4, warnings);
    expect(kept.length).toBeLessThan(history.length);
    const remembered = await memory.read(key);
    expect(remembered).toContain("automatic extract");
    expect(remembered).toContain("question 0");
    expect(warnings.some((warning) => warning.includes("service unavailable"))).toBe(true);
  });

  it("splits an overflow the model rejects as too long into smaller pieces", async () => {
    const history = conversation(8);
    await seed(history);
    const model = scriptedModel((request) => {
      const text = JSON.stringify(request.messages.at(-1));
      const questions = (text.match(/question/g) ?? []).length;
      if (questions > 2) return { error: new ProviderError("maximum context length exceeded", { kind: "bad-request", status: 400 }) };
      return { text: `piece with ${questions} questions` };
    });
    await compact(model, history, 4);
    const remembered = await memory.read(key);
    expect(remembered).toContain("piece with 2 questions");
    expect(remembered).not.toContain("automatic extract");
  });

  it("compacts with the turn's fence: a worker whose lease was taken over leaves the history alone", async () => {
    const history = conversation(6);
    // Token 2 claimed the session after token 1's lease expired.
    const fenced = createFileStore({ dataDir: path.join(root, "fenced"), holdsLease: async (_key, fence) => fence.token === 2 });
    await fenced.sessions.append(key, history);
    const compaction = compactHistory({
      model: scriptedModel([{ text: "summary" }]),
      sessions: fenced.sessions,
      remember: async () => {},
      sessionKey: key,
      history,
      maxHistory: 4,
      fence: { token: 1 },
    });
    await expect(compaction).rejects.toSatisfy((error) => error instanceof BusError && error.code === "lease-lost");
    expect((await fenced.sessions.load(key)).history).toEqual(history);
    await fenced.close();
  });

  it("keeps the chat going when writing memory fails", async () => {
    const history = conversation(6);
    await seed(history);
    const model = scriptedModel([{ text: "summary" }]);
    const warnings: string[] = [];
    const kept = await compactHistory({
      model,
      sessions: store.sessions,
      remember: async () => {
        throw new Error("memory file is over its size limit");
      },
      sessionKey: key,
      history,
      maxHistory: 4,
      onWarning: (message) => warnings.push(message),
    });
    expect(kept.length).toBeLessThan(history.length);
    expect(warnings.join(" ")).toContain("size limit");
  });
});
