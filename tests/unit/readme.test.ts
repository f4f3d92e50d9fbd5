/**
 * The README as a fresh clone reads it: every file it links or names is in the clone, or is one the
 * code itself keeps in the workspace (MEMORY.md, HEARTBEAT.md).
 */
import { existsSync, readFileSync, readdirSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

const root = fileURLToPath(new URL("../../", import.meta.url));
const readme = readFileSync(path.join(root, "README.md"), "utf8");
const sources = readdirSync(path.join(root, "src"), { recursive: true, encoding: "utf8" })
  .filter((file) => file.endsWith(".ts"))
  .map((file) => readFileSync(path.join(root, "src", file), "utf8"))
  .join("\n");

describe("README.md", () => {
  it("links only files the repository has", () => {
    const targets = [...readme.matchAll(/\]\(([^)\s]+)\)/g)].map((match) => match[1]!).filter((target) => !/^(https?:|mailto:|#)/.test(target));
    expect(targets.length).toBeGreaterThan(5);
    for (const target of targets) expect(existsSync(path.join(root, target.replace(/#.*$/, ""))), target).toBe(true);
  });

  it("names no Markdown document a clone lacks", () => {
    const named = new Set([...readme.matchAll(/[\w./-]*\b[\w-]+\.md\b/g)].map((match) => match[0].replace(/^\//, "")));
    expect(named.size).toBeGreaterThan(2);
    for (const name of named) {
      const inClone = [name, path.join("docs", name), path.join("config", name), path.join("bench", name)].some((candidate) => existsSync(path.join(root, candidate)));
      const keptByCode = sources.includes(`"${path.basename(name)}"`);
      expect(inClone || keptByCode, name).toBe(true);
    }
  });
});
