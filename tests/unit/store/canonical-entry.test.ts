import { describe, expect, it } from "vitest";
import { canonicalEntryJson } from "../../../src/store/redis-store.js";
import { type HistoryEntry, HistoryEntrySchema } from "../../../src/store/store.js";

/** The generic form: object keys sorted at every level, by a replacer. */
function canonicalJson(value: unknown): string {
  return JSON.stringify(value, (_key, item: unknown) => {
    if (item === null || typeof item !== "object" || Array.isArray(item)) return item;
    const record = item as Record<string, unknown>;
    return Object.fromEntries(Object.keys(record).sort().map((key) => [key, record[key]]));
  });
}

describe("canonicalEntryJson", () => {
  const full: HistoryEntry = HistoryEntrySchema.parse({
    usage: { reasoningTokens: 4, outputTokens: 3, inputTokens: 2, cachedInputTokens: 1, cacheWriteInputTokens: 1 },
    role: "assistant",
    model: "openai/gpt",
    messageIds: ["m-2", "m-1"],
    speakers: ["discord:2", "discord:1"],
    content: 'quote " and \u2028 and emoji \u{1F600}',
    at: 1_700_000_000_123,
  });

  it("writes the text the generic canonical JSON writes, for every field of the schema and for entries with fields absent", () => {
    const cases: HistoryEntry[] = [
      full,
      { role: "user", content: "hi", at: 1 },
      { role: "user", content: "", at: 2, messageIds: [] },
      { role: "assistant", content: "x", at: 3, usage: { inputTokens: 0, outputTokens: 0 } },
    ];
    for (const entry of cases) expect(canonicalEntryJson(entry)).toBe(canonicalJson(entry));
  });

  it("covers every key of the history-entry schema, so a field added to the schema cannot be dropped silently", () => {
    const written = JSON.parse(canonicalEntryJson(full)) as Record<string, unknown>;
    expect(Object.keys(written).sort()).toEqual(Object.keys(HistoryEntrySchema.shape).sort());
    const usageShape = HistoryEntrySchema.shape.usage.unwrap().shape;
    expect(Object.keys(written.usage as object).sort()).toEqual(Object.keys(usageShape).sort());
  });
});
