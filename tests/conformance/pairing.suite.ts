/**
 * The PairingStore conformance suite: the file store and the Redis store run it unchanged.
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { PAIRING_CODE_ALPHABET, PAIRING_CODE_LENGTH } from "../../src/store/file-pairing.js";
import type { PairingSender, PairingStore } from "../../src/store/store.js";

export interface PairingStoreHarness {
  pairing: PairingStore;
  /** A new store over the same storage, as after a restart: built as the app builds its Store. */
  reopen: () => Promise<{ pairing: PairingStore; close(): Promise<void> }>;
  close: () => Promise<void>;
  cleanup: () => Promise<void>;
}

export interface PairingStoreHarnessOptions {
  /** Code generator for the store; undefined: the real one. */
  newCode?: () => string;
}

const START = 1_700_000_000_000;
const TTL = 60 * 60 * 1000;
const codePattern = new RegExp(`^[${PAIRING_CODE_ALPHABET}]{${PAIRING_CODE_LENGTH}}$`);

const alice: PairingSender = { channel: "telegram", senderId: "111", senderName: "Alice", chatId: "111" };
const bob: PairingSender = { channel: "telegram", senderId: "222", chatId: "222" };

export function runPairingStoreSuite(name: string, makeHarness: (options: PairingStoreHarnessOptions) => Promise<PairingStoreHarness>): void {
  describe(`PairingStore conformance: ${name}`, () => {
    const harnesses: PairingStoreHarness[] = [];
    const reopened: Array<{ close(): Promise<void> }> = [];
    let pairing: PairingStore;

    const open = async (options: PairingStoreHarnessOptions = {}) => {
      const harness = await makeHarness(options);
      harnesses.push(harness);
      return harness;
    };

    beforeEach(async () => {
      pairing = (await open()).pairing;
    });

    afterEach(async () => {
      for (const store of reopened.splice(0)) await store.close();
      for (const harness of harnesses.splice(0)) {
        await harness.close();
        await harness.cleanup();
      }
    });

    it("gives a new sender a short code from the unambiguous alphabet, valid for the ttl", async () => {
      const { request, created } = await pairing.request(alice, { ttlMs: TTL, now: START });
      expect(created).toBe(true);
      expect(request).toEqual({ ...alice, code: expect.stringMatching(codePattern), requestedAt: START, expiresAt: START + TTL });
      expect(request.code).not.toMatch(/[01IO]/);
      const other = await pairing.request(bob, { ttlMs: TTL, now: START - 1 });
      expect(other.request.code).not.toBe(request.code);
      expect(await pairing.listPending(START + 1)).toEqual([other.request, request]);
    });

    it("gives the same sender the same pending code while it is valid", async () => {
      const first = await pairing.request(alice, { ttlMs: TTL, now: START });
      const again = await pairing.request({ ...alice, senderName: "Alice B." }, { ttlMs: TTL, now: START + TTL - 1 });
      expect(again).toEqual({ request: first.request, created: false });
      // The same id on another platform is another person.
      const elsewhere = await pairing.request({ ...alice, channel: "discord" }, { ttlMs: TTL, now: START });
      expect(elsewhere.created).toBe(true);
      expect(elsewhere.request.code).not.toBe(first.request.code);
    });

    it("expires codes: from expiresAt on they are neither pending nor approvable, and the sender gets a new one", async () => {
      const { request } = await pairing.request(alice, { ttlMs: TTL, now: START });
      expect(await pairing.listPending(START + TTL - 1)).toEqual([request]);
      expect(await pairing.listPending(START + TTL)).toEqual([]);
      expect(await pairing.approve(request.code, START + TTL)).toBeUndefined();
      expect(await pairing.isApproved("telegram", "111")).toBe(false);

      const renewed = await pairing.request(alice, { ttlMs: TTL, now: START + TTL });
      expect(renewed.created).toBe(true);
      expect(renewed.request.expiresAt).toBe(START + 2 * TTL);
      expect(await pairing.listPending(START + TTL)).toEqual([renewed.request]);
    });

    it("approves a code once, and the approval shows everywhere", async () => {
      const { request } = await pairing.request(alice, { ttlMs: TTL, now: START });
      const approved = await pairing.approve(request.code, START + 5);
      const expected = { ...alice, code: request.code, requestedAt: START, approvedAt: START + 5 };
      expect(approved).toEqual(expected);
      expect(await pairing.isApproved("telegram", "111")).toBe(true);
      expect(await pairing.isApproved("discord", "111")).toBe(false);
      expect(await pairing.approve(request.code, START + 6)).toBeUndefined();
      expect(await pairing.listPending(START + 6)).toEqual([]);
      expect(await pairing.listApproved()).toEqual([expected]);
    });

    it("accepts the code as an operator types it: any case, with spaces or a dash", async () => {
      const { request } = await pairing.request(bob, { ttlMs: TTL, now: START });
      const typed = ` ${request.code.slice(0, 4).toLowerCase()}-${request.code.slice(4)} `;
      expect((await pairing.approve(typed, START + 1))?.senderId).toBe("222");
    });

    it("answers undefined for an unknown code and approves nobody", async () => {
      await pairing.request(alice, { ttlMs: TTL, now: START });
      expect(await pairing.approve("ZZZZZZZZ", START + 1)).toBeUndefined();
      expect(await pairing.approve("", START + 1)).toBeUndefined();
      expect(await pairing.listApproved()).toEqual([]);
      expect(await pairing.listPending(START + 1)).toHaveLength(1);
    });

    it("keeps approvals and pending codes across a restart", async () => {
      const harness = harnesses[0]!;
      const approvedCode = (await pairing.request(alice, { ttlMs: TTL, now: START })).request.code;
      await pairing.approve(approvedCode, START + 1);
      const { request: pending } = await pairing.request(bob, { ttlMs: TTL, now: START + 2 });
      await harness.close();

      const store = await harness.reopen();
      reopened.push(store);
      expect(await store.pairing.isApproved("telegram", "111")).toBe(true);
      expect(await store.pairing.listApproved("telegram")).toEqual([{ ...alice, code: approvedCode, requestedAt: START, approvedAt: START + 1 }]);
      expect(await store.pairing.listPending(START + 3)).toEqual([pending]);
      expect((await store.pairing.approve(pending.code, START + 4))?.senderId).toBe("222");
    });

    it("revokes an approval; the sender has to pair again", async () => {
      await pairing.approve((await pairing.request(alice, { ttlMs: TTL, now: START })).request.code, START + 1);
      await pairing.approve((await pairing.request(bob, { ttlMs: TTL, now: START })).request.code, START + 2);
      expect(await pairing.revoke("telegram", "111")).toBe(true);
      expect(await pairing.revoke("telegram", "111")).toBe(false);
      expect(await pairing.revoke("discord", "222")).toBe(false);
      expect(await pairing.isApproved("telegram", "111")).toBe(false);
      expect((await pairing.listApproved()).map((entry) => entry.senderId)).toEqual(["222"]);
      expect((await pairing.request(alice, { ttlMs: TTL, now: START + 3 })).created).toBe(true);
    });

    it("lists approvals of one channel, oldest approval first", async () => {
      const discord = { ...bob, channel: "discord" };
      for (const [index, sender] of [bob, discord, alice].entries()) {
        const { request } = await pairing.request(sender, { ttlMs: TTL, now: START });
        await pairing.approve(request.code, START + 10 - index);
      }
      expect((await pairing.listApproved()).map((entry) => `${entry.channel}:${entry.senderId}`)).toEqual(["telegram:111", "discord:222", "telegram:222"]);
      expect((await pairing.listApproved("telegram")).map((entry) => entry.senderId)).toEqual(["111", "222"]);
      expect(await pairing.listApproved("feishu")).toEqual([]);
    });

    it("never hands out a code that is pending for someone else", async () => {
      const codes = ["AAAAAAAA", "AAAAAAAA", "AAAAAAAA", "BBBBBBBB"];
      const { pairing: scripted } = await open({ newCode: () => codes.shift() ?? "CCCCCCCC" });
      expect((await scripted.request(alice, { ttlMs: TTL, now: START })).request.code).toBe("AAAAAAAA");
      expect((await scripted.request(bob, { ttlMs: TTL, now: START })).request.code).toBe("BBBBBBBB");
    });

    it("gives concurrent requests of one sender one code, and approves a code for one of two racing operators", async () => {
      const results = await Promise.all(Array.from({ length: 5 }, () => pairing.request(alice, { ttlMs: TTL, now: START })));
      expect(new Set(results.map((result) => result.request.code)).size).toBe(1);
      expect(results.filter((result) => result.created)).toHaveLength(1);
      const code = results[0]!.request.code;
      const approvals = await Promise.all([pairing.approve(code, START + 1), pairing.approve(code, START + 1)]);
      expect(approvals.filter((approval) => approval !== undefined)).toHaveLength(1);
    });

    it("rejects a request it could not store faithfully", async () => {
      await expect(pairing.request({ ...alice, senderId: "" }, { ttlMs: TTL, now: START })).rejects.toThrow(/senderId/);
      await expect(pairing.request({ ...alice, channel: "tele:gram" }, { ttlMs: TTL, now: START })).rejects.toThrow(/channel/);
      expect(await pairing.listPending(START)).toEqual([]);
      expect(await pairing.isApproved("tele:gram", "111")).toBe(false);
    });
  });
}
