/**
 * `countbot pairing` as a child process against a file store prepared in a temp
 * COUNTBOT_DATA_DIR, the way an operator approves a stranger while the bot runs.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { createFileStore } from "../../src/store/file-store.js";
import type { PairingSender } from "../../src/store/store.js";
import { runCli } from "../support/run-cli.js";

const HOUR_MS = 60 * 60 * 1000;
const stranger: PairingSender = { channel: "telegram", senderId: "666", senderName: "Stranger", chatId: "666" };

let root: string;
let dataDir: string;

beforeEach(async () => {
  root = await mkdtemp(path.join(tmpdir(), "countbot-pairing-cli-"));
  dataDir = path.join(root, "data");
});
afterEach(async () => {
  await rm(root, { recursive: true, force: true });
});

/** Runs `countbot pairing ...` from the temp dir, so no project config file is picked up. */
function pairing(...args: string[]) {
  return runCli(["pairing", ...args], { env: { HOME: root, COUNTBOT_DATA_DIR: dataDir }, cwd: root });
}

/** Creates a pending request in the data dir, as the running bot would. */
async function requestCode(sender: PairingSender, now = Date.now()): Promise<string> {
  const store = createFileStore({ dataDir });
  try {
    return (await store.pairing.request(sender, { ttlMs: HOUR_MS, now })).request.code;
  } finally {
    await store.close();
  }
}

async function isApproved(channel: string, senderId: string): Promise<boolean> {
  const store = createFileStore({ dataDir });
  try {
    return await store.pairing.isApproved(channel, senderId);
  } finally {
    await store.close();
  }
}

describe("countbot pairing", () => {
  it("lists a pending code and approves it", async () => {
    const code = await requestCode(stranger);
    const listed = await pairing("list");
    expect(listed.code).toBe(0);
    expect(listed.stdout).toContain(`${code}  telegram sender 666 (Stranger)  expires in 60 min`);

    const approved = await pairing("approve", code.toLowerCase());
    expect(approved.stderr).toBe("");
    expect(approved.code).toBe(0);
    expect(approved.stdout).toBe("approved telegram sender 666 (Stranger): they can talk to the bot now\n");
    expect(await isApproved("telegram", "666")).toBe(true);
  });

  it("lists approved senders and revokes one", async () => {
    const store = createFileStore({ dataDir });
    await store.pairing.approve((await store.pairing.request(stranger, { ttlMs: HOUR_MS, now: Date.now() })).request.code, Date.now());
    await store.close();

    const listed = await pairing("list");
    expect(listed.stdout).toMatch(/^pending \(0\):\napproved \(1\):\n {2}telegram sender 666 \(Stranger\) {2}since \d{4}-/);
    expect(await pairing("revoke", "telegram", "666")).toMatchObject({ code: 0, stdout: "revoked telegram sender 666\n" });
    expect(await isApproved("telegram", "666")).toBe(false);
    const again = await pairing("revoke", "telegram", "666");
    expect(again.code).toBe(1);
    expect(again.stderr).toBe("countbot: telegram sender 666 is not approved; nothing to revoke\n");
  });

  it("refuses an unknown or expired code with one clear line and a non-zero exit", async () => {
    const unknown = await pairing("approve", "ZZZZZZZZ");
    expect(unknown.code).toBe(1);
    expect(unknown.stdout).toBe("");
    expect(unknown.stderr).toBe("countbot: pairing code ZZZZZZZZ is unknown or expired; `countbot pairing list` shows the pending codes\n");

    const expired = await requestCode(stranger, Date.now() - 2 * HOUR_MS);
    const late = await pairing("approve", expired);
    expect(late.code).toBe(1);
    expect(late.stderr).toContain(`pairing code ${expired} is unknown or expired`);
    expect(await isApproved("telegram", "666")).toBe(false);
  });

  it("explains its usage when the arguments are wrong", async () => {
    const [none, short] = await Promise.all([[], ["revoke", "telegram"]].map((args) => pairing(...args)));
    expect(none!.code).toBe(2);
    expect(none!.stderr).toContain("Usage: countbot pairing [options] [command]");
    expect(none!.stderr).toMatch(/approve <code>/);
    expect(short!.code).toBe(2);
    expect(short!.stderr).toBe("countbot: missing required argument 'sender'\n");
  });
});
