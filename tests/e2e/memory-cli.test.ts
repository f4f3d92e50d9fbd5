/**
 * `countbot memory show|export|import` as a child process, against `MEMORY.md` files in a temp
 * workspace and against Redis (a random key prefix), reading and fixing what the bot would use.
 */
import { randomUUID } from "node:crypto";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createFileMemoryStore } from "../../src/memory/memory.js";
import { createRedisMemoryStore } from "../../src/memory/redis-memory.js";
import { deleteKeys, redisUrl } from "../support/redis.js";
import { runCli } from "../support/run-cli.js";

let root: string;
let redis: Redis;
const prefix = `countbot-memory-cli-${randomUUID()}`;

beforeAll(async () => {
  root = await mkdtemp(path.join(tmpdir(), "countbot-memory-cli-"));
  redis = new Redis(redisUrl);
});
afterAll(async () => {
  await deleteKeys(redis, prefix);
  await redis.quit();
  await rm(root, { recursive: true, force: true });
});

describe("countbot memory (MEMORY.md files)", () => {
  it("shows, exports and imports a chat's MEMORY.md", { timeout: 60_000 }, async () => {
    const workspace = path.join(root, "workspace");
    const env = { HOME: root, COUNTBOT_DATA_DIR: path.join(root, "data"), COUNTBOT_WORKSPACE: workspace };
    const memory = createFileMemoryStore({ workspace, scope: "chat" });
    await memory.write("telegram:42", "# Facts\n- The user's name is Ada.\n");

    const shown = await runCli(["memory", "show", "telegram:42"], { env, cwd: root });
    expect(shown).toMatchObject({ code: 0, stderr: "" });
    expect(shown.stdout).toBe("# the memory of telegram:42, memory/chats/telegram%3A42/MEMORY.md\n\n# Facts\n- The user's name is Ada.\n");

    const exported = path.join(root, "exported.md");
    expect(await runCli(["memory", "export", "telegram:42", "-o", exported], { env, cwd: root })).toMatchObject({ code: 0, stderr: "" });
    expect(await readFile(exported, "utf8")).toBe("# Facts\n- The user's name is Ada.\n");

    await writeFile(exported, "# Facts\n- The user's name is Ada Lovelace.\n");
    const imported = await runCli(["memory", "import", "telegram:42", exported], { env, cwd: root });
    expect(imported).toMatchObject({ code: 0, stderr: "", stdout: "imported 43 bytes into memory/chats/telegram%3A42/MEMORY.md\n" });
    expect(await readFile(path.join(workspace, "memory", "chats", "telegram%3A42", "MEMORY.md"), "utf8")).toBe("# Facts\n- The user's name is Ada Lovelace.\n");

    const empty = await runCli(["memory", "show", "web:nobody"], { env, cwd: root });
    expect(empty).toMatchObject({ code: 0, stdout: "the memory of web:nobody is empty (memory/chats/web%3Anobody/MEMORY.md)\n" });
    const bare = await runCli(["memory", "show", "42"], { env, cwd: root });
    expect(bare).toMatchObject({ code: 2, stdout: "", stderr: expect.stringMatching(/^countbot: SESSION is a session key `channel:chat_id`/) });
  });
});

describe("countbot memory --person (MEMORY.md files)", () => {
  it("shows and imports a person's memory, by account or by the name config links accounts under", { timeout: 60_000 }, async () => {
    const workspace = path.join(root, "people-workspace");
    const configFile = path.join(root, "people.json");
    await writeFile(configFile, JSON.stringify({ memory: { identities: { alice: ["telegram:7", "discord:1"] } } }));
    const env = { HOME: root, COUNTBOT_CONFIG: configFile, COUNTBOT_DATA_DIR: path.join(root, "data"), COUNTBOT_WORKSPACE: workspace };
    await createFileMemoryStore({ workspace, scope: "person" }).write("discord:2", "Bob likes tea.\n");

    const bob = await runCli(["memory", "show", "discord:2", "--person"], { env, cwd: root });
    expect(bob).toMatchObject({ code: 0, stderr: "", stdout: "# the person memory of discord:2, memory/people/discord%3A2/MEMORY.md\n\nBob likes tea.\n" });
    const note = path.join(root, "alice.md");
    await writeFile(note, "Alice is vegetarian.\n");
    // An account linked to a name is that name's memory.
    expect(await runCli(["memory", "import", "telegram:7", note, "--person"], { env, cwd: root })).toMatchObject({ code: 0, stdout: "imported 21 bytes into memory/people/alice/MEMORY.md\n" });
    expect(await runCli(["memory", "show", "alice", "--person"], { env, cwd: root })).toMatchObject({ code: 0, stdout: expect.stringContaining("Alice is vegetarian.") });
    const bare = await runCli(["memory", "show", "nobody", "--person"], { env, cwd: root });
    expect(bare).toMatchObject({ code: 2, stderr: expect.stringContaining("or one of the linked names alice") });
  });
});

describe("countbot memory (Redis)", () => {
  it("exports to stdout and imports from stdin what the workers read, refusing what is over the cap", { timeout: 60_000 }, async () => {
    const configFile = path.join(root, "redis.json");
    await writeFile(configFile, JSON.stringify({ redis: { prefix } }));
    const env = { HOME: root, COUNTBOT_DATA_DIR: path.join(root, "data-redis"), COUNTBOT_CONFIG: configFile, REDIS_URL: redisUrl };
    const memory = createRedisMemoryStore({ redis, prefix, scope: "chat" });
    await memory.append("web:abc", "Prefers tea.");

    const exported = await runCli(["memory", "export", "web:abc"], { env, cwd: root });
    expect(exported.code).toBe(0);
    expect(exported.stdout).toBe(await memory.read("web:abc"));
    expect(exported.stdout).toMatch(/^## \d{4}-\d\d-\d\d \d\d:\d\d UTC\n\nPrefers tea\.\n$/);

    const imported = await runCli(["memory", "import", "web:abc", "-"], { env, cwd: root, input: "Prefers coffee now.\n" });
    expect(imported).toMatchObject({ code: 0, stdout: "imported 20 bytes into redis:memory/chats/web%3Aabc/MEMORY.md\n" });
    expect(await memory.read("web:abc")).toBe("Prefers coffee now.\n");

    const tooBig = await runCli(["memory", "import", "web:abc", "-"], { env, cwd: root, input: "x".repeat(64 * 1024 + 1) });
    expect(tooBig).toMatchObject({ code: 1, stdout: "", stderr: expect.stringMatching(/over its 64 KiB limit, so nothing was saved: shorten - and import it again\n$/) });
    expect(await memory.read("web:abc")).toBe("Prefers coffee now.\n");
  });
});
