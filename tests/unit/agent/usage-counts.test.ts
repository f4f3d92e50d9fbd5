/**
 * The usage report's counts of one call: each subject's fields named `<dimension>␟<id>␟<model>␟<metric>`,
 * whichever subjects and models came before (the names are made once per subject and kept).
 */
import { describe, expect, it } from "vitest";
import { summarize, usageCounts } from "../../../src/budget/usage-report.js";

const SEP = "\u001f";
const usage = { inputTokens: 100, outputTokens: 20, cachedInputTokens: 30 };

describe("usageCounts", () => {
  it("names every subject's metrics after that subject and model, on first and later calls alike", () => {
    const expected = (chat: string, person: string, model: string) => ({
      [`all${SEP}*${SEP}${model}${SEP}calls`]: 1,
      [`all${SEP}*${SEP}${model}${SEP}input`]: 100,
      [`all${SEP}*${SEP}${model}${SEP}cached`]: 30,
      [`all${SEP}*${SEP}${model}${SEP}output`]: 20,
      [`all${SEP}*${SEP}${model}${SEP}cost`]: 7,
      [`person${SEP}${person}${SEP}${model}${SEP}calls`]: 1,
      [`person${SEP}${person}${SEP}${model}${SEP}input`]: 100,
      [`person${SEP}${person}${SEP}${model}${SEP}cached`]: 30,
      [`person${SEP}${person}${SEP}${model}${SEP}output`]: 20,
      [`person${SEP}${person}${SEP}${model}${SEP}cost`]: 7,
      [`chat${SEP}${chat}${SEP}${model}${SEP}calls`]: 1,
      [`chat${SEP}${chat}${SEP}${model}${SEP}input`]: 100,
      [`chat${SEP}${chat}${SEP}${model}${SEP}cached`]: 30,
      [`chat${SEP}${chat}${SEP}${model}${SEP}output`]: 20,
      [`chat${SEP}${chat}${SEP}${model}${SEP}cost`]: 7,
      [`channel${SEP}web${SEP}${model}${SEP}calls`]: 1,
      [`channel${SEP}web${SEP}${model}${SEP}input`]: 100,
      [`channel${SEP}web${SEP}${model}${SEP}cached`]: 30,
      [`channel${SEP}web${SEP}${model}${SEP}output`]: 20,
      [`channel${SEP}web${SEP}${model}${SEP}cost`]: 7,
    });
    // Past the names kept (20,000 subjects) and round again; a chat's id is another's person id.
    const wrong: string[] = [];
    for (let round = 0; round < 2; round++) {
      for (let index = 0; index < 12_000; index++) {
        const chat = `web:c${index}`;
        const person = `web:c${(index + 1) % 12_000}`;
        const model = index % 2 === 0 ? "p/a" : "p/b";
        // Both in the order the subjects and metrics are counted in.
        if (JSON.stringify(Object.fromEntries(usageCounts({ chat, person }, model, usage, 7))) !== JSON.stringify(expected(chat, person, model))) wrong.push(`${round}:${index}`);
      }
    }
    expect(wrong).toEqual([]);
    expect(Object.fromEntries(usageCounts({ chat: "web:c1", person: "web:c2" }, "p/a", usage, 7))).toEqual(expected("web:c1", "web:c2", "p/a"));
  });

  it("leaves out metrics that are zero, counts an unpriced call, and adds up in the report", () => {
    const first = usageCounts({ chat: "web:1", person: "web:u", teamRun: { id: "run-1", team: "t" } }, "p/m", { inputTokens: 5, outputTokens: 0 }, undefined);
    expect([...first.keys()].filter((field) => field.startsWith(`team${SEP}run-1${SEP}`))).toEqual([
      `team${SEP}run-1${SEP}p/m${SEP}calls`,
      `team${SEP}run-1${SEP}p/m${SEP}input`,
      `team${SEP}run-1${SEP}p/m${SEP}unpriced`,
    ]);
    const second = usageCounts({ chat: "web:1", person: "web:v" }, "p/m", { inputTokens: 1, outputTokens: 2 }, undefined);
    const totals: Record<string, number> = {};
    for (const counts of [first, second]) for (const [field, value] of counts) totals[field] = (totals[field] ?? 0) + value;
    expect(summarize(totals, "chat")).toEqual([{ key: "web:1", calls: 2, inputTokens: 6, cachedInputTokens: 0, outputTokens: 2, tokens: 8, cost: 0, unpricedCalls: 2 }]);
    expect(summarize(totals, "person").map((row) => [row.key, row.calls])).toEqual([
      ["web:u", 1],
      ["web:v", 1],
    ]);
  });
});
