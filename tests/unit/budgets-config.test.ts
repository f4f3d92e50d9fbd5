/** The budgets section: errors that name the field, prices (shipped, configured, converted), and the calendar of periods. */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { dayIn, daysOfPeriod, freesAt, windowOf } from "../../src/budget/periods.js";
import { budgetsFor } from "../../src/budget/policy.js";
import { checkModelPrices } from "../../src/app/budgets.js";
import { BudgetsSchema } from "../../src/config/budgets.js";
import { loadConfig } from "../../src/config/load.js";
import { ConfigError } from "../../src/errors.js";
import { createPriceBook } from "../../src/providers/pricing.js";

let root: string;
beforeEach(() => {
  root = mkdtempSync(join(tmpdir(), "countbot-budgets-config-"));
});
afterEach(() => rmSync(root, { recursive: true, force: true }));

function load(content: unknown) {
  const file = join(root, "countbot.json");
  writeFileSync(file, JSON.stringify(content));
  return loadConfig({ env: {}, cwd: root, homeDir: root, file });
}

function loadError(content: unknown): ConfigError {
  try {
    load(content);
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigError);
    return error as ConfigError;
  }
  throw new Error("expected the config to be refused");
}

describe("budgets config", () => {
  it("names the field of every mistake", () => {
    const error = loadError({
      budgets: {
        person: { limit: 100.5 },
        people: { "telegram:42": { limit: 5, period: "year" } },
        chats: { lonely: { limit: 5 } },
        deployment: { limit: 5, unit: "dollars" },
        timeZone: "Mars/Olympus",
        warnAt: 1.5,
      },
    });
    expect(error.message).toContain('budgets.person.limit: expected a whole number of tokens, got 100.5 (for money set "unit": "money")');
    expect(error.message).toContain('budgets.deployment.unit: expected one of "tokens", "money", got "dollars"');
    expect(error.message).toContain('budgets.people["telegram:42"].period: expected one of "day", "week", "month", got "year"');
    expect(error.message).toContain("budgets.chats.lonely: invalid name: expected a chat `channel:chat_id`");
    expect(error.message).toContain("budgets.timeZone: expected an IANA time zone");
    expect(error.message).toContain("budgets.warnAt: expected");
  });

  it("refuses a money budget while a configured model has no price, naming budgets.prices", () => {
    const config = load({ agent: { model: "ollama/llama3" }, budgets: { deployment: { limit: 10, unit: "money", period: "month" } } });
    expect(() => checkModelPrices(config)).toThrow(ConfigError);
    expect(() => checkModelPrices(config)).toThrow("budgets: a money budget is set, but ollama/llama3 has no price in USD: add it to budgets.prices");
    const priced = load({ agent: { model: "ollama/llama3" }, budgets: { deployment: { limit: 10, unit: "money" }, prices: { "ollama/llama3": { input: 0, output: 0 } } } });
    expect(() => checkModelPrices(priced)).not.toThrow();
    // Token budgets need no price.
    expect(() => checkModelPrices(load({ agent: { model: "ollama/llama3" }, budgets: { person: { limit: 10 } } }))).not.toThrow();
  });

  it("applies named overrides over the defaults, and a named null exempts", () => {
    const config = BudgetsSchema.parse({ person: { limit: 100 }, people: { "web:boss": { limit: 5_000, period: "month" }, "web:owner": null }, deployment: { limit: 50, unit: "money" } });
    const now = Date.UTC(2026, 11, 4, 12);
    expect(budgetsFor(config, { person: "web:ada" }, now).map((budget) => [budget.scope, budget.unit, budget.limit])).toEqual([["person:web:ada", "tokens", 100], ["deployment", "money", 50_000_000]]);
    expect(budgetsFor(config, { person: "web:boss" }, now)[0]).toMatchObject({ limit: 5_000, from: Date.UTC(2026, 11, 1) });
    expect(budgetsFor(config, { person: "web:owner" }, now).map((budget) => budget.scope)).toEqual(["deployment"]);
  });
});

describe("prices", () => {
  it("uses the configured price over the shipped one, names dated models by their base, and converts dollars only at a given rate", () => {
    const book = createPriceBook(BudgetsSchema.parse({ prices: { "openai/gpt-4o": { input: 1, output: 2 } } }));
    expect(book.priceOf("openai/gpt-4o")).toEqual({ input: 1, cachedInput: 1, output: 2 });
    expect(book.priceOf("openai/gpt-4o-mini-2024-07-18")).toEqual({ input: 0.15, cachedInput: 0.075, output: 0.6 });
    expect(book.priceOf("local/unknown")).toBeUndefined();
    // 1,000 input of which 400 cached, 100 output, at 0.15 / 0.075 / 0.60 per million: millionths.
    expect(book.costOf("openai/gpt-4o-mini", { inputTokens: 1_000, cachedInputTokens: 400, outputTokens: 100 })).toBe(Math.ceil(600 * 0.15 + 400 * 0.075 + 100 * 0.6));
    expect(createPriceBook(BudgetsSchema.parse({ currency: "EUR" })).priceOf("openai/gpt-4o-mini")).toBeUndefined();
    expect(createPriceBook(BudgetsSchema.parse({ currency: "EUR", usdRate: 0.5 })).priceOf("openai/gpt-4o-mini")).toEqual({ input: 0.075, cachedInput: 0.0375, output: 0.3 });
  });
});

describe("periods", () => {
  it("begins calendar days, weeks (Monday) and months at midnight in the time zone, across a DST change", () => {
    // Sunday 2026-03-29 in Berlin: clocks go from +1 to +2 at 02:00.
    const now = Date.UTC(2026, 2, 29, 12);
    const berlin = (period: "day" | "week" | "month") => windowOf({ period, reset: "calendar", timeZone: "Europe/Berlin" }, now);
    expect(berlin("day")).toMatchObject({ from: Date.UTC(2026, 2, 28, 23), resetsAt: Date.UTC(2026, 2, 29, 22) });
    expect(berlin("week")).toMatchObject({ from: Date.UTC(2026, 2, 22, 23), resetsAt: Date.UTC(2026, 2, 29, 22) });
    expect(berlin("month")).toMatchObject({ from: Date.UTC(2026, 1, 28, 23), resetsAt: Date.UTC(2026, 2, 31, 22) });
    expect(windowOf({ period: "day", reset: "calendar", timeZone: "Asia/Kolkata" }, now)).toMatchObject({ from: Date.UTC(2026, 2, 28, 18, 30) });
    expect(dayIn("Asia/Tokyo", Date.UTC(2026, 11, 31, 20))).toBe("2027-01-01");
    expect(daysOfPeriod("week", "UTC", Date.UTC(2026, 11, 4, 12))).toEqual(["2026-11-30", "2026-12-01", "2026-12-02", "2026-12-03", "2026-12-04"]);
  });

  it("names the day of each moment right as time moves back and forth across midnights, a DST change and time zones (the day is remembered per zone)", () => {
    // Berlin, 2026-03-29: 23:00 UTC the day before is local midnight; the day has 23 hours.
    const moments: Array<[string, number, string]> = [
      ["Europe/Berlin", Date.UTC(2026, 2, 28, 22, 59, 59, 999), "2026-03-28"],
      ["Europe/Berlin", Date.UTC(2026, 2, 28, 23), "2026-03-29"],
      ["Europe/Berlin", Date.UTC(2026, 2, 29, 21, 59, 59, 999), "2026-03-29"],
      ["Europe/Berlin", Date.UTC(2026, 2, 29, 22), "2026-03-30"],
      ["Europe/Berlin", Date.UTC(2026, 2, 28, 12), "2026-03-28"],
      ["Asia/Tokyo", Date.UTC(2026, 11, 31, 14, 59), "2026-12-31"],
      ["Asia/Tokyo", Date.UTC(2026, 11, 31, 15), "2027-01-01"],
      ["UTC", Date.UTC(2026, 11, 31, 23, 59, 59, 999), "2026-12-31"],
      ["UTC", Date.UTC(2027, 0, 1), "2027-01-01"],
      ["Europe/Berlin", Date.UTC(2026, 2, 29, 12), "2026-03-29"],
    ];
    for (const [zone, at, day] of moments) expect(dayIn(zone, at), `${zone} ${new Date(at).toISOString()}`).toBe(day);
  });

  it("counts a rolling window in 24 slices, the partly covered oldest one included", () => {
    const hour = 3_600_000;
    const now = Date.UTC(2026, 11, 4, 12, 30);
    const window = windowOf({ period: "day", reset: "rolling", timeZone: "UTC" }, now);
    expect(window).toMatchObject({ bucket: Date.UTC(2026, 11, 4, 12), from: Date.UTC(2026, 11, 3, 12) });
    expect(window.resetsAt).toBeUndefined();
    expect(freesAt({ period: "day", reset: "rolling", timeZone: "UTC" }, Date.UTC(2026, 11, 3, 12))).toBe(Date.UTC(2026, 11, 4, 12) + hour);
  });
});
