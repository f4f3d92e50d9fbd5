/**
 * The size rules of eslint.config.js bite where they apply (src/ and channels/): a function of 81
 * counted lines and a file of 401 are errors there, blank lines and comments are not counted, and
 * tests are left free.
 */
import { ESLint } from "eslint";
import { describe, expect, it } from "vitest";

const eslint = new ESLint({ cwd: process.cwd() });

async function ruleIds(code: string, filePath: string): Promise<string[]> {
  const [result] = await eslint.lintText(code, { filePath });
  return result!.messages.map((message) => message.ruleId ?? message.message);
}

const functionOf = (statements: number, extra = "") => `export function long(): number {\n  let total = 0;\n${Array.from({ length: statements }, (_, index) => `  total += ${index};${extra}`).join("\n")}\n  return total;\n}\n`;

describe("code size rules", () => {
  it("refuses a function over 80 counted lines in src/ and channels/, and allows one of 80", async () => {
    // 78 statements plus the opening line, `let`, `return` and the closing brace: 82 lines.
    expect(await ruleIds(functionOf(78), "src/gateway/too-long.ts")).toContain("max-lines-per-function");
    expect(await ruleIds(functionOf(78), "channels/telegram/too-long.ts")).toContain("max-lines-per-function");
    expect(await ruleIds(functionOf(76), "src/gateway/just-right.ts")).not.toContain("max-lines-per-function");
  });

  it("does not count blank lines and comments", async () => {
    const padded = functionOf(76, "\n\n  // a comment that explains the line above");
    expect(await ruleIds(padded, "src/gateway/commented.ts")).toEqual([]);
  });

  it("refuses a file over 400 counted lines, and leaves tests free", async () => {
    const file = Array.from({ length: 401 }, (_, index) => `export const value${index} = ${index};`).join("\n") + "\n";
    expect(await ruleIds(file, "src/store/too-big.ts")).toContain("max-lines");
    expect(await ruleIds(file, "tests/unit/big-table.test.ts")).toEqual([]);
  });
});
