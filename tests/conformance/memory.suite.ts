/**
 * The MemoryStore conformance suite: `MEMORY.md` files and Redis run it unchanged. Each `open` is
 * another store over the same storage, as another worker (or a restarted one) would build it.
 */
import { afterEach, describe, expect, it } from "vitest";
import type { MemoryScope, MemoryStore } from "../../src/memory/memory.js";
import { ToolError } from "../../src/errors.js";

export interface MemoryStoreHarness {
  open(options: { scope: MemoryScope; maxBytes?: number; now?: () => number }): Promise<MemoryStore>;
  /** The prefix locations carry (`""` for files, `redis:` for Redis). */
  locationPrefix: string;
  cleanup(): Promise<void>;
}

const NOON = Date.UTC(2025, 5, 1, 12, 30);

export function runMemoryStoreSuite(name: string, makeHarness: () => Promise<MemoryStoreHarness>): void {
  describe(`MemoryStore conformance: ${name}`, () => {
    const harnesses: MemoryStoreHarness[] = [];
    const start = async () => {
      const harness = await makeHarness();
      harnesses.push(harness);
      return harness;
    };

    afterEach(async () => {
      for (const harness of harnesses.splice(0)) await harness.cleanup();
    });

    it("keeps one memory per chat in chat scope, and says where", async () => {
      const harness = await start();
      const memory = await harness.open({ scope: "chat" });
      await memory.write("telegram:-100123", "likes tea");
      await memory.write("discord:42", "likes coffee");
      expect(await memory.read("telegram:-100123")).toBe("likes tea");
      expect(await memory.read("discord:42")).toBe("likes coffee");
      expect(await memory.read("cli:direct")).toBe("");
      expect(memory.location("telegram:-100123")).toBe(`${harness.locationPrefix}memory/chats/telegram%3A-100123/MEMORY.md`);
      expect(memory.scope).toBe("chat");
    });

    it("shares one memory between all sessions in global scope", async () => {
      const harness = await start();
      const memory = await harness.open({ scope: "global" });
      await memory.write("telegram:1", "shared fact");
      expect(await memory.read("discord:2")).toBe("shared fact");
      expect(memory.location("discord:2")).toBe(`${harness.locationPrefix}memory/MEMORY.md`);
    });

    it("keeps one memory per person in person scope, apart from every chat's and the global one", async () => {
      const harness = await start();
      const people = await harness.open({ scope: "person", now: () => NOON });
      await people.append("discord:1", "Ada is vegetarian.");
      await people.write("alice", "Alice lives in Lyon.");
      expect(await people.read("discord:1")).toBe("## 2025-06-01 12:30 UTC\n\nAda is vegetarian.\n");
      expect(await people.read("alice")).toBe("Alice lives in Lyon.");
      expect(await people.read("discord:2")).toBe("");
      expect(people.location("discord:1")).toBe(`${harness.locationPrefix}memory/people/discord%3A1/MEMORY.md`);
      expect(people.scope).toBe("person");
      // Another worker reads the same person memory; a chat of the same key is another memory.
      expect(await (await harness.open({ scope: "person" })).read("discord:1")).toContain("Ada is vegetarian.");
      expect(await (await harness.open({ scope: "chat" })).read("discord:1")).toBe("");
      await (await harness.open({ scope: "global" })).write("any", "vegetarian menu on Fridays");
      // A person's search is their own memory only: never the global one, never another person's.
      expect(await people.search("discord:1", "vegetarian")).toEqual([{ file: people.location("discord:1"), line: 3, text: "Ada is vegetarian." }]);
      expect(await people.search("discord:2", "vegetarian")).toEqual([]);
    });

    it("keeps what one store wrote for the next one over the same storage (another worker, a restart)", async () => {
      const harness = await start();
      await (await harness.open({ scope: "chat" })).append("web:a", "The user's name is Ada.");
      expect(await (await harness.open({ scope: "chat" })).read("web:a")).toContain("The user's name is Ada.");
      // Chat and global memories are apart: the global one is not the chat's.
      expect(await (await harness.open({ scope: "global" })).read("web:a")).toBe("");
    });

    it("appends dated sections", async () => {
      const harness = await start();
      let clock = NOON;
      const memory = await harness.open({ scope: "chat", now: () => clock });
      await memory.append("cli:direct", "User's name is Ada.");
      clock += 24 * 60 * 60 * 1000;
      await memory.append("cli:direct", "  Prefers metric units.\n");
      expect(await memory.read("cli:direct")).toBe("## 2025-06-01 12:30 UTC\n\nUser's name is Ada.\n\n## 2025-06-02 12:30 UTC\n\nPrefers metric units.\n");
      await memory.write("cli:other", "no newline at the end");
      await memory.append("cli:other", "next");
      expect(await memory.read("cli:other")).toBe("no newline at the end\n\n## 2025-06-02 12:30 UTC\n\nnext\n");
    });

    it("loses no append when two workers append to one memory at once", async () => {
      const harness = await start();
      const workers = [await harness.open({ scope: "chat", now: () => NOON }), await harness.open({ scope: "chat", now: () => NOON })];
      await Promise.all(Array.from({ length: 20 }, (_unused, index) => workers[index % 2]!.append("web:shared", `note ${index}`)));
      const content = await workers[0]!.read("web:shared");
      for (let index = 0; index < 20; index++) expect(content).toContain(`\n\nnote ${index}\n`);
      expect(content.match(/^## /gm)).toHaveLength(20);
    });

    it("searches case-insensitively with line numbers, the chat's memory first and then the global one", async () => {
      const harness = await start();
      const memory = await harness.open({ scope: "chat" });
      await (await harness.open({ scope: "global" })).write("any", "# Global\nThe office WiFi is 'Coffee'.\n");
      await memory.write("cli:direct", "# Chat\nfavourite drink: coffee\nnothing here\nCOFFEE beans from Kenya");
      await memory.write("cli:other", "coffee in another chat");
      const chat = `${harness.locationPrefix}memory/chats/cli%3Adirect/MEMORY.md`;
      expect(await memory.search("cli:direct", "Coffee")).toEqual([
        { file: chat, line: 2, text: "favourite drink: coffee" },
        { file: chat, line: 4, text: "COFFEE beans from Kenya" },
        { file: `${harness.locationPrefix}memory/MEMORY.md`, line: 2, text: "The office WiFi is 'Coffee'." },
      ]);
      expect(await memory.search("cli:direct", "tea")).toEqual([]);
      expect(await memory.search("cli:direct", "   ")).toEqual([]);
    });

    it("searches only the global memory in global scope", async () => {
      const harness = await start();
      const memory = await harness.open({ scope: "global" });
      await memory.write("any", "alpha\nbeta");
      expect(await memory.search("other", "BETA")).toEqual([{ file: `${harness.locationPrefix}memory/MEMORY.md`, line: 2, text: "beta" }]);
    });

    it("refuses a write or an append over the size cap and keeps the old content", async () => {
      const harness = await start();
      const memory = await harness.open({ scope: "chat", maxBytes: 100, now: () => NOON });
      await memory.write("cli:direct", "small");
      await expect(memory.write("cli:direct", "x".repeat(101))).rejects.toThrow(/101 bytes, over its 100 bytes limit/);
      await expect(memory.append("cli:direct", "y".repeat(90))).rejects.toBeInstanceOf(ToolError);
      expect(await memory.read("cli:direct")).toBe("small");
      // Bytes, not characters: 40 three-byte characters are 120 bytes.
      await expect(memory.write("cli:direct", "€".repeat(40))).rejects.toThrow(/over its 100 bytes limit/);
      await expect(memory.append("cli:direct", "€".repeat(30))).rejects.toThrow(/over its 100 bytes limit/);
      expect(await memory.read("cli:direct")).toBe("small");
    });

    it("caps at 64 KiB by default", async () => {
      const harness = await start();
      const memory = await harness.open({ scope: "global" });
      await memory.write("k", "x".repeat(64 * 1024));
      await expect(memory.write("k", "x".repeat(64 * 1024 + 1))).rejects.toThrow(/64 KiB limit/);
    });

    it("archives a full memory and starts again with a pointer, so an overflow summary still lands", async () => {
      const harness = await start();
      const memory = await harness.open({ scope: "chat", maxBytes: 200, now: () => NOON });
      await memory.write("web:a", "x".repeat(190));
      await expect(memory.append("web:a", "Summary of 10 earlier messages")).rejects.toBeInstanceOf(ToolError);
      const archived = await memory.archive("web:a");
      expect(archived).toBe(`${harness.locationPrefix}memory/chats/web%3Aa/MEMORY-until-2025-06-01-${NOON}.md`);
      await memory.append("web:a", "Summary of 10 earlier messages");
      expect(await memory.read("web:a")).toBe(
        `Older memory is in MEMORY-until-2025-06-01-${NOON}.md beside this one.\n\n## 2025-06-01 12:30 UTC\n\nSummary of 10 earlier messages\n`,
      );
      // Other chats are untouched.
      expect(await memory.read("web:b")).toBe("");
    });
  });
}
